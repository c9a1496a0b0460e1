"""`augsbert collect-results` (an experiment's aggregate, not a stage): gather an experiment's artifacts into results/<experiment>.json (sealed with the
digests of what it read and its own: augsbert.store.results_files)."""

from __future__ import annotations

import datetime as dt
import math
import platform
import statistics
from importlib import metadata
from pathlib import Path

import json
import re

from ..store.artifacts import (
    DamagedArtifactError,
    check_artifact,
    nan_to_null,
    read_json,
    write_json,
    writer_lock,
    writing,
)
from ..store.keys import is_key
from ..store.manifests import listed_digests
from ..store.results_files import seal
from ..config.messages import format_errors
from ..config.schema import load_schema
from ..stages import REGISTRY
from ..stages.runs import INPUT_LABELS, TARGET_DATA
from .layout import table_rows

RESULTS_SCHEMA = "schemas/results.schema.yaml"

# Roles planned in numbers (ensemble members, Trans-Encoder rounds): pattern -> description
NUMBERED_ROLES = (
    (re.compile(r"teacher_member_(\d+)"), lambda m: f"teacher ensemble member {int(m[1]) + 1}, trained on gold "
                                                       "(teacher.ensemble; the `teacher` entry is the ensemble)"),
    (re.compile(r"te_cross_(\d+)(_mutual)?"), lambda m: f"Trans-Encoder round {m[1]}: cross model trained on the "
                                                         f"Bi-Encoder{'s' if m[2] else ''}' scores of unlabelled pairs"
                                                         f"{' (the second, mutual chain)' if m[2] else ''}"),
    (re.compile(r"te_bi_(\d+)(_mutual)?"), lambda m: f"Trans-Encoder round {m[1]}: Bi-Encoder trained on the cross "
                                                      f"model{'s' if m[2] else ''}' scores, no gold label"
                                                      f"{' (the second, mutual chain)' if m[2] else ''}"),
    # active learning (docs/methods/active.md): every round's teacher, and the untrained one (the curve's 0 labels)
    (re.compile(r"active_teacher_(\d+)"), lambda m: f"active-learning round {m[1]}'s teacher, trained on the gold of "
                                                    f"rounds 0-{m[1]} (the `teacher` entry is the last round's)"),
    (re.compile(r"active_member_(\d+)_(\d+)"), lambda m: f"active-learning round {m[1]}'s teacher ensemble member "
                                                          f"{int(m[2]) + 1}"),
    (re.compile(r"active_teacher_untrained"), lambda m: "the untrained teacher (max_steps 0: the base model, no label "
                                                        "learned): an active-learning curve's 0-label point"),
)
METRICS = ("spearman", "pearson")
# a Bi-Encoder's deployment cost (its job's metrics.json), with the conditions its speed was measured under
# (augsbert.training.pair_job.speed_conditions): the grid tables label the speed with them
DEPLOYMENT = ("sentences_per_s", "model_size_mb", "speed_load", "speed_cpus", "speed_threads", "speed_device")
PACKAGES = ("augsbert", "torch", "transformers", "sentence-transformers", "snakemake",
            "numpy", "pandas", "scipy", "scikit-learn", "faiss-cpu", "mteb")  # mteb: optional extra


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def summarise(values: list[float | None]) -> dict:
    """Mean and sample standard deviation over seeds (std 0 for a single seed)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None, "n": 0}
    std = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return {"mean": round(statistics.fmean(vals), 4), "std": round(std, 4), "n": len(vals)}


def artifact_holding(path: Path, file: str, role: str) -> Path:
    """The artifact behind a run's `role` that holds `file`: the artifact itself, or, where stages refine the
    role (a filter between `labels` and `student`, docs/development.md), the first one down their inputs named
    after the role that holds it; none does: the artifact itself (its reader says what is missing)."""
    seen = path
    while not (seen / file).is_file():
        below = (read_json(seen / "spec.json").get("inputs") or {}).get(role)
        if not below:
            return path
        seen = Path(below)
    return seen


def labelling_artifact(path: Path) -> Path:
    """The labelling artifact behind a model's `labels` input: the one holding the teacher's sampling statistics,
    below any stage that refines the labels."""
    return artifact_holding(path, "sampling_stats.json", INPUT_LABELS)


def role_statistics() -> dict[str, dict[str, str]]:
    """role -> {file -> results section} of the stages that declare statistics (`Stage.statistics`), by the
    roles they fill."""
    found: dict[str, dict[str, str]] = {}
    for stage in REGISTRY.values():
        for role in stage.roles if stage.statistics else ():
            found.setdefault(role, {}).update(stage.statistics)
    return found


def role_description(role: str) -> str | None:
    """What a model role means in the results (None: not a model role: data, candidates, labels, ...)."""
    rows = table_rows()
    if role in rows:
        return rows[role].description
    for pattern, describe in NUMBERED_ROLES:
        match = pattern.fullmatch(role)
        if match:
            return describe(match)
    return None


def role_order(role: str) -> tuple:
    """Results order: the rows stages declare (by place), then members, then Trans-Encoder rounds (cross before
    Bi-Encoder), then active learning's untrained and rounds' teachers."""
    rows = table_rows()
    if role in rows:
        return (0, rows[role].place)
    numbers = [int(n) for n in re.findall(r"\d+", role)]
    if role.startswith("active_"):  # last: the untrained teacher, then each round's teacher before its members
        return (2, role != "active_teacher_untrained", *numbers, role.startswith("active_member"))
    return (1, role.startswith("te_"), *numbers, role.startswith("te_bi"), role.endswith("_mutual"))


def _model_entry(role: str, per_seed: dict[str, dict], skipped: dict[str, str], paths: dict[str, dict]) -> dict:
    names = [m for m in dict.fromkeys(k for v in per_seed.values() for k in v)
             if all(isinstance(v.get(m), (int, float, type(None))) and not isinstance(v.get(m), bool)
                    for v in per_seed.values()) and m != "n_pairs"]
    return {
        "description": role_description(role),
        "per_seed": per_seed,
        "summary": {m: summarise([v.get(m) for v in per_seed.values()]) for m in names},
        "skipped": skipped,
        "artifacts": paths,
    }


def run(spec: dict, out: str | Path, report_dir: str | Path | None = None) -> dict:
    """Read every planned artifact of the experiment and write the results file (see results.schema.yaml).

    `report_dir` (default: the results file's name with `.report`) gets the
    experiment's report files (reporting/experiment.py). Under the results
    file's writer lock, which also sweeps temporary files of killed writes.
    """
    from ..reporting import experiment as experiment_report  # pandas and matplotlib: `--help` imports this module

    report_dir = Path(report_dir) if report_dir else Path(out).with_suffix(".report")
    with writing(out):  # a read-only or full results directory: one message naming the path
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        with writer_lock(out):
            result = seal(_results(spec))
            experiment_report.write(result, spec, report_dir)
            write_json(out, result)  # last: the results file is what marks the experiment finished
    return result


def _results(spec: dict) -> dict:
    per_role: dict[str, dict[str, dict]] = {}
    skipped: dict[str, dict[str, str]] = {}
    paths: dict[str, dict[str, dict]] = {}
    stages: dict[str, dict] = {}
    statistics = role_statistics()  # the sections they fill, each seed -> the file (labels: silver)
    sections: dict[str, dict[str, dict]] = {name: {} for files in statistics.values() for name in files.values()}
    hub_models: dict[str, str] = {}
    sources: dict[str, dict[str, str]] = {}
    warnings: list[str] = []  # the data-quality and silver-pool warnings of the artifacts read, once each
    for seed, roles in spec["runs"].items():
        for role, node in roles.items():
            metrics = read_json(_checked(node, role, sources) / "metrics.json")
            stages[node["key"]] = {"stage": node["stage"], "path": node["path"],
                                   "wall_time_s": metrics.get("wall_time_s"), "device": metrics.get("device")}
            hub_models.update(metrics.get("resolved_models") or {})
            warnings.extend(w for w in metrics.get("warnings") or () if isinstance(w, str) and w not in warnings)
            for file, section in statistics.get(role, {}).items():  # under any stage that refines the role
                holder = _checked({"path": str(artifact_holding(Path(node["path"]), file, role))}, role, sources)
                sections[section][seed] = read_json(holder / file)
            declared = REGISTRY.get(node["stage"])
            if role_description(role):
                entry = per_role.setdefault(role, {}).setdefault(seed, {})
                entry.update({m: metrics["test"].get(m) for m in (*METRICS, "n_pairs")})
                if metrics.get("arch"):
                    entry["arch"] = metrics["arch"]
                for dim, scores in (metrics.get("test_by_dim") or {}).items():  # a Matryoshka student, per size
                    entry[f"spearman@{dim}"] = scores.get("spearman")
                for key in DEPLOYMENT:  # a Bi-Encoder's deployment cost, and what its speed was measured under
                    if isinstance(metrics.get(key), (int, float, str)) and not isinstance(metrics.get(key), bool):
                        entry[key] = metrics[key]
                if metrics.get("selection"):  # how a Bi-Encoder picked its epoch (no target dev in transfer)
                    entry["selection"] = metrics["selection"]
                if isinstance(metrics.get("dev_spearman"), float) and math.isfinite(metrics["dev_spearman"]):
                    # the chosen epoch's score on the split it was selected on
                    entry["dev_spearman"] = metrics["dev_spearman"]
                if isinstance(metrics.get("wall_time_s"), (int, float)):  # the model's job: training (if any) and test
                    entry["wall_time_s"] = metrics["wall_time_s"]
                if metrics.get("dev_history"):  # epochs trained (fewer than `epochs` after early stopping)
                    entry["epochs_trained"] = len(metrics["dev_history"])
                if isinstance(metrics.get("steps"), int) and not isinstance(metrics["steps"], bool):
                    entry["steps"] = metrics["steps"]  # optimizer steps trained (0: an untrained teacher)
                paths.setdefault(role, {}).setdefault(seed, {})["model"] = node["path"]
            elif declared and declared.evaluates:  # an evaluation suite of a Bi-Encoder: joins its model's entry
                model_role = declared.evaluates(role)
                per_role.setdefault(model_role, {}).setdefault(seed, {}).update(metrics["summary"])
                skipped.setdefault(model_role, {}).update(metrics["skipped"])
                paths.setdefault(model_role, {}).setdefault(seed, {})[node["stage"]] = node["path"]
    data_node = next(iter(spec["runs"].values()))[TARGET_DATA]
    data_metrics = read_json(_checked(data_node, TARGET_DATA, sources) / "metrics.json")
    warnings = [*(w for w in data_metrics.get("warnings") or () if w not in warnings), *warnings]
    devices = {s["device"] for s in stages.values()} - {None}
    models = {role: _model_entry(role, per_role[role], skipped.get(role, {}), paths.get(role, {}))
              for role in sorted(per_role, key=role_order) if role_description(role)}
    result = {
        "experiment": spec["experiment"],
        "description": spec["config"].get("description", ""),
        "dataset": spec["config"]["dataset"],
        "source": spec["config"].get("source"),
        "config_hash": spec["config_hash"],
        "seeds": spec["seeds"],
        "metrics_note": ("spearman / pearson: correlation x 100 with gold on the target test split (cosine for "
                         "Bi-Encoders, the teacher's score for CE / CBE); sts*, topic_*, USEB, mteb_* figures x 100; "
                         "summary = mean and sample std over seeds"),
        "models": models,
        "data": {"sizes": data_metrics["sizes"], "skipped_rows": data_metrics["skipped_rows"]["total"]},
        **sections,
        "warnings": warnings,
        "stages": stages,
        "wall_time_s": {"stages_total": round(sum(s["wall_time_s"] or 0 for s in stages.values()), 3),
                        "per_stage": _per_stage_times(stages)},
        "device": sorted(devices),
        "hub_models": hub_models,
        "versions": package_versions(),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": spec["config"],
        "dataset_definition": spec["dataset"],
        "sources": sources,
    }
    validate_results(result)
    return result


# The files of an artifact this job reads: checked against its manifest before they are published
READ = {"metrics.json", "sampling_stats.json", "spec.json", "score_densities.png"}  # the plot: copied by tables


def _checked(node: dict, role: str, sources: dict[str, dict[str, str]]) -> Path:
    """The artifact of `node`, once it is what its name says and the files read here are as written
    (a same-size edit of its metrics.json would otherwise be published); their digests go into `sources`."""
    path, key = Path(node["path"]), node.get("key")
    if is_key(key) and path.name != key:
        raise DamagedArtifactError(f"`{role}` of the spec: path {path} does not end in its key {node['key']}")
    check_artifact(path, f"`{role}` artifact", only=READ)
    if path.is_dir() and not (path / "metrics.json").is_file():
        raise DamagedArtifactError(f"`{role}` artifact {path} has no metrics.json: it is damaged, or a job was cut "
                                   f"short. Delete it (`rm -r {path}`) and run the workflow again; Snakemake then "
                                   "rebuilds it and what depends on it")
    sources[str(path)] = listed_digests(path, READ)
    return path


def _per_stage_times(stages: dict[str, dict]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for s in stages.values():
        totals[s["stage"]] = round(totals.get(s["stage"], 0.0) + (s["wall_time_s"] or 0.0), 3)
    return totals


def validate_results(result: dict) -> None:
    """Check a results document against workflow/schemas/results.schema.yaml (raises ValueError)."""
    from jsonschema import Draft202012Validator

    document = json.loads(json.dumps(nan_to_null(result)))
    errors = list(Draft202012Validator(load_schema(RESULTS_SCHEMA)).iter_errors(document))
    if errors:
        raise ValueError("results document does not match results.schema.yaml:\n" + format_errors(errors))
