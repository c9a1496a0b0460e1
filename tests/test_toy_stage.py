"""The worked examples of docs/development.md "Adding a stage".

1. `label_filter`, a stage between `labels` and `student`, added the way a developer adds one: two files
   written into a copy of the project (its declaration with its options class `src/augsbert/stages/label_filter.py`
   and its job `src/augsbert/jobs/label_filter.py`), its schema section written from the class by `make schema`
   (`python -m augsbert.reference.schema --write`), nothing else edited (not `src/augsbert/plan.py`, not a rule, not the
   schema by hand), then a Snakemake dry run of an experiment that sets it and a run of it and its student.
   Its declaration says it `needs` the `labels` role and fills it: the registry plans it after the labelling
   stage and before the student, which reads its node through the role without knowing it.
2. `word_counts`, registered in-process, shown planned, sized, given a command and run.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from augsbert.face.cli import build_parser, main
from augsbert.data.pool import read_split
from augsbert.scheduling.resources import job_resources
from augsbert.stages import REGISTRY, register
from augsbert.stages.base import Stage
from augsbert.store.artifacts import artifact_dir, write_json
from augsbert.planning.graph import Node, SeedPlan
from conftest import REPO, plan_shipped
from workflow_helpers import checkout, job_stats, keep_experiments, place_standins

# -- 1. the two files of a stage between `labels` and `student`
DECLARATION = '''"""The `label_filter` stage: keeps the teacher-labelled pairs scored at least `label_filter.min_score`
(job: augsbert.jobs.label_filter)."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Params, option, section_options
from ..planning.graph import Node, SeedPlan
from .base import Stage


@dataclass(frozen=True, kw_only=True)
class LabelFilterParams(Params):
    SECTION = "label_filter"
    SECTION_DESCRIPTION = "Which teacher-labelled pairs the student learns (stage `label_filter`)."

    min_score: float | None = option(None, "Keep the pairs the teacher scored at least this; null keeps every "
                                           "pair (no stage).")


def plan_label_filter(seed_plan: SeedPlan) -> dict[str, Node]:
    """Between the teacher's labels and the student: the filtered pairs become the run's `labels`."""
    min_score = seed_plan.config["label_filter"]["min_score"]
    labels = seed_plan.roles.get("labels")
    if min_score is None or labels is None:  # unset: nothing planned, every key as before
        return {}
    node = seed_plan.graph.add(LABEL_FILTER, f"{labels.name}.min{min_score:g}",
                               section_options(LabelFilterParams, seed_plan.config["label_filter"]),
                               {"labels": labels})
    return {"labels": node, "unfiltered_labels": labels}


LABEL_FILTER = Stage("label_filter", 1, "keep the labelled pairs scored at least label_filter.min_score",
                     "augsbert.jobs.label_filter:run", section="label_filter", roles=("labels",), needs=("labels",),
                     plan=plan_label_filter, params=LabelFilterParams, gpu=False, device=False, env="cpu",
                     threads=1, seconds_per_item=0.0001, base_mem_mb=2000)
STAGES = (LABEL_FILTER,)
'''

JOB = '''"""The `label_filter` job: the labelled pairs scored at least `min_score`, in the labels' own layout."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..params import read_params
from ..stages.label_filter import LabelFilterParams
from ..store.artifacts import artifact_dir


def run(spec: dict, out: str | Path, force: bool = False) -> dict:
    params = read_params(LabelFilterParams, spec)
    pairs = pd.read_parquet(Path(spec["inputs"]["labels"]) / "pairs.parquet")
    kept = pairs[pairs["score"] >= params.min_score]
    with artifact_dir(out, spec, force) as tmp:
        kept.to_parquet(tmp / "pairs.parquet", index=False)
    return {"pairs": len(pairs), "kept": len(kept)}
'''

def add_label_filter(root: Path, env: dict) -> list[str]:
    """What a developer writes: two new modules; then `make schema` writes the schema's section from the
    declaration's options class. Returns the files written by hand."""
    package = root / "src" / "augsbert"
    (package / "stages" / "label_filter.py").write_text(DECLARATION)
    (package / "jobs" / "label_filter.py").write_text(JOB)
    proc = subprocess.run([sys.executable, "-m", "augsbert.reference.schema", "--write"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return ["src/augsbert/jobs/label_filter.py", "src/augsbert/stages/label_filter.py"]


def changed_files(root: Path) -> list[str]:
    """Files of src/, workflow/ and config/ that differ between the copy and the repository."""
    found = []
    for part in ("src", "workflow", "config"):
        for path in sorted((root / part).rglob("*")):
            if path.is_symlink() or not path.is_file() or "__pycache__" in path.parts:
                continue
            rel = path.relative_to(root)
            original = REPO / rel
            if not original.is_file() or original.read_bytes() != path.read_bytes():
                found.append(rel.as_posix())
    return found


PLANNED = '''
import json, sys
from augsbert.config.load import load_configs
from augsbert.plan import Plan
for override in ({}, {"label_filter": {"min_score": 0.5}}):
    config = load_configs(["config/config.yaml"], lazy=True)
    config["experiments"]["demo_augsbert_cbe"].update(override)
    plan = Plan(config)
    runs = plan.experiment("demo_augsbert_cbe").runs
    student = plan.node(runs[min(runs)]["student"])
    print(json.dumps({"labels_stage": plan.node(dict(student.inputs)["labels"]).stage,
                      "roles": sorted(runs[min(runs)]), "keys": sorted(set(runs[min(runs)].values()))}))
'''


def test_a_stage_between_labels_and_student_is_two_files_and_runs(tmp_path, standins):
    root = checkout(tmp_path / "project", ("workflow", "config", "profiles", "src"))
    keep_experiments(root, "demo_augsbert_cbe")
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "HF_HUB_OFFLINE": "1", "AUGSBERT_DEVICE": "cpu"}
    touched = add_label_filter(root, env)
    config_before = (root / "config" / "config.yaml").read_bytes()
    (root / "config" / "config.yaml").write_bytes((REPO / "config" / "config.yaml").read_bytes())
    schema = "workflow/schemas/config.schema.yaml"  # written by the generator, not by hand
    assert changed_files(root) == sorted([*touched, schema])  # nothing else: no plan.py, no rule, no registry list
    generated = (root / schema).read_text()
    assert "      # >>> generated section label_filter (augsbert.stages.label_filter.LabelFilterParams;" in generated
    assert "Keep the pairs the teacher scored at least this; null keeps every pair (no stage)." in " ".join(
        generated.split())
    (root / "config" / "config.yaml").write_bytes(config_before)

    # planned through the roles: unset, the run is as before; set, the student reads the filter's node
    proc = subprocess.run([sys.executable, "-c", PLANNED], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    unset, filtered = (json.loads(line) for line in proc.stdout.splitlines())
    assert unset["labels_stage"] == "labels" and "unfiltered_labels" not in unset["roles"]
    assert filtered["labels_stage"] == "label_filter"
    assert set(filtered["roles"]) == set(unset["roles"]) | {"unfiltered_labels"}
    # the filter changes the student (and its suite), nothing planned before it
    assert len(set(unset["keys"]) - set(filtered["keys"])) == 2

    # the dry run: the stage's rule comes from the registry, between the labelling job and the student
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1",
                           "results/demo_augsbert_cbe.json",
                           "--config", "experiments={demo_augsbert_cbe: {label_filter: {min_score: 0.5}}}"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    jobs = job_stats(out)
    assert jobs["label_filter"] == jobs["labels"] == jobs["student"] // 2  # per seed: one of each, two students
    assert "augsbert label_filter --spec" in out
    student_specs = [json.loads(p.read_text()) for p in (root / "artifacts" / ".specs" / "student").glob("*.json")]
    readers = [s for s in student_specs if "labels" in s["inputs"]]
    assert readers and all(s["inputs"]["labels"].startswith("artifacts/label_filter/") for s in readers)

    # and it runs: a rehearsal (stand-in models, one seed, 1 epoch; docs/guide/rehearsal.md) runs the filter's job,
    # and the student learns exactly the pairs it kept (read from the student's own training-set counts)
    # (the stand-in teacher is seeded: its scores of these pairs lie around 0.24, so 0.24 keeps some, not all)
    place_standins(root, standins)
    (root / "filter.yaml").write_text("experiments: {demo_augsbert_cbe: {label_filter: {min_score: 0.24}}}\n")
    proc = subprocess.run([sys.executable, "-m", "augsbert", "rehearse", "results/demo_augsbert_cbe.json",
                           "--config", "filter.yaml"], cwd=root, env={**env, "AUGSBERT_PRINT_TABLES": "0"},
                          capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "OK      label_filter (1 job)" in proc.stdout.splitlines()
    rehearsal = root / ".rehearsal"
    [filtered] = (rehearsal / "artifacts" / "label_filter").iterdir()
    filter_spec = json.loads((filtered / "spec.json").read_text())
    labelled = pd.read_parquet(rehearsal / filter_spec["inputs"]["labels"] / "pairs.parquet")
    kept = pd.read_parquet(filtered / "pairs.parquet")
    assert kept.reset_index(drop=True).equals(labelled[labelled["score"] >= 0.24].reset_index(drop=True))
    students = [json.loads((p / "spec.json").read_text()) for p in (rehearsal / "artifacts" / "student").iterdir()]
    [student] = [s for s in students if "labels" in s["inputs"]]
    assert rehearsal / student["inputs"]["labels"] == filtered
    trained = json.loads((rehearsal / "artifacts" / "student" / student["key"] / "metrics.json").read_text())
    expected = kept["strategy"].where(kept["strategy"] != "gold", "relabelled_gold").value_counts().to_dict()
    if student["params"]["use_gold_labels"]:
        expected["gold"] = len(pd.read_parquet(rehearsal / student["inputs"]["data"] / "train.parquet"))
    assert trained["training_set"] == expected
    assert 0 < len(kept) < len(labelled)  # the filter kept some of the teacher's pairs, not all


def test_the_results_find_the_teachers_statistics_under_a_refined_labels_role(tmp_path):
    """collect-results and the model card read the labelling stage's sampling statistics through the run's
    `labels`, which a refining stage (the filter above) may hold: they follow its `labels` inputs down."""
    from augsbert.reporting.results import labelling_artifact

    labels, filtered = tmp_path / "labels", tmp_path / "filtered"
    for folder, inputs in ((labels, {"teacher": "t"}), (filtered, {"labels": str(labels)})):
        folder.mkdir()
        write_json(folder / "spec.json", {"inputs": inputs})
    write_json(labels / "sampling_stats.json", {"pairs": 3})
    assert labelling_artifact(filtered) == labels and labelling_artifact(labels) == labels
    (labels / "sampling_stats.json").unlink()  # none anywhere: the artifact itself (its reader says what is missing)
    assert labelling_artifact(filtered) == filtered


# -- 2. a stage registered in-process: planned, sized, given a command and run
def plan_word_counts(seed_plan: SeedPlan) -> dict[str, Node]:
    data = seed_plan.roles["data"]
    return {"word_counts": seed_plan.graph.add(WORD_COUNTS, f"{data.name}.words", {"split": "train"}, {"data": data})}


def run(spec: dict, out: str | Path, force: bool = False) -> dict:
    pairs = read_split(spec["inputs"]["data"], spec["params"]["split"])
    words = [len(text.split()) for text in [*pairs["sentence1"], *pairs["sentence2"]]]
    metrics = {"sentences": len(words), "words": sum(words)}
    with artifact_dir(out, spec, force) as tmp:
        write_json(tmp / "metrics.json", metrics)
    return metrics


WORD_COUNTS = Stage("word_counts", 1, "count the words of a dataset's train split", "test_toy_stage:run",
                    section="datasets", roles=("word_counts",), needs=("data",), gpu=False, device=False,
                    seconds_per_item=0.001, base_mem_mb=1000, env="cpu", threads=1, plan=plan_word_counts)


@pytest.fixture
def toy_stage(monkeypatch):
    """Registered for one test (a plugin's way; the package's own stages are its modules in augsbert.stages)."""
    monkeypatch.delitem(REGISTRY, "word_counts", raising=False)
    register(WORD_COUNTS)
    yield WORD_COUNTS
    REGISTRY.pop("word_counts", None)


def test_a_registered_stage_is_planned_run_and_sized_from_its_declaration(toy_stage, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="already declared"):
        register(toy_stage)
    plan = plan_shipped({})
    run_keys = plan.experiment("demo_zeroshot").runs[42]
    key = run_keys["word_counts"]
    node = plan.node(key)
    assert node.stage == "word_counts" and node.path == f"artifacts/word_counts/{key}"
    assert key.startswith("lee.words-") and dict(node.inputs) == {"data": run_keys["data"]}
    assert {plan.experiment("demo_zeroshot").runs[s]["word_counts"] for s in plan.experiment("demo_zeroshot").seeds} \
        == {key}
    spec = plan.spec(key)
    assert spec["stage"] == "word_counts" and spec["params"] == {"split": "train"}
    assert spec["experiments"] == ["demo_zeroshot"]
    resources = job_resources(plan, key, env={})
    assert resources["gpu"] == 0 and resources["mem_mb"] == 1000
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    options = {o for action in sub.choices["word-counts"]._actions for o in action.option_strings}
    assert {"--spec", "--config", "--out", "--force"} <= options and "--device" not in options
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # the runner "test_toy_stage:run"
    data_spec = tmp_path / "data.json"
    data_spec.write_text(json.dumps(plan.spec(run_keys["data"])))
    data_out = tmp_path / plan.node(run_keys["data"]).path
    assert main(["-q", "data", "--spec", f"@{data_spec}", "--out", str(data_out)]) in (0, None)
    spec["inputs"] = {"data": str(data_out)}
    spec_file = tmp_path / "word_counts.json"
    spec_file.write_text(json.dumps(spec))
    out = tmp_path / node.path
    assert main(["-q", "word_counts", "--spec", f"@{spec_file}", "--out", str(out)]) in (0, None)
    metrics = json.loads((out / "metrics.json").read_text())
    pairs = read_split(data_out, "train")
    assert len(pairs) == 300 and "wall_time_s" in metrics  # artifact_dir adds the job's wall time
    assert {k: metrics[k] for k in ("sentences", "words")} == {"sentences": 600,
                       "words": sum(len(t.split()) for t in [*pairs["sentence1"], *pairs["sentence2"]])}


def test_the_rules_are_one_template_over_the_registry():
    """workflow/rules/stages.smk has no rule of its own per stage: a registered stage gets the same rule."""
    text = (REPO / "workflow" / "rules" / "stages.smk").read_text()
    assert "for _stage in REGISTRY.values():" in text
    assert text.count("rule:") == 1


def test_the_planning_order_follows_needs_and_refinements():
    """A stage is planned after the stages filling the roles it needs; one that refines a role (needs and fills
    it) between that role's stage and its readers."""
    from augsbert.stages import planning_order

    order = [s.name for s in planning_order()]
    assert order.index("data") < order.index("candidates") < order.index("labels") < order.index("student")
    assert order.index("adapt") < order.index("teacher") < order.index("labels")
    assert order.index("student") < order.index("suite") and order.index("gpl") < order.index("suite")
    refine = Stage("refine_labels", 1, "x", "m:f", roles=("labels",), needs=("labels",), plan=lambda sp: {})
    REGISTRY["refine_labels"] = refine
    try:
        order = [s.name for s in planning_order()]
        assert order.index("labels") < order.index("refine_labels") < order.index("student")
    finally:
        REGISTRY.pop("refine_labels")
