"""Stage `collect_results`: gather an experiment's artifacts into results/<experiment>.json."""

from __future__ import annotations

import datetime as dt
import platform
import statistics
from importlib import metadata
from pathlib import Path

from ..artifacts import read_json, write_json

# What each planned role means in a results table.
ROLE_LABELS = {
    "zero_shot": "base model, no training (zero-shot Bi-Encoder)",
    "lower_bound": "Bi-Encoder trained on gold only (SBERT, lower bound)",
    "teacher": "teacher trained on gold (Cross-Encoder / Cross-Bi-Encoder, upper bound)",
    "student": "Bi-Encoder student trained on the teacher's labels (AugSBERT)",
}
METRICS = ("spearman", "pearson")
PACKAGES = ("augsbert", "torch", "transformers", "sentence-transformers", "snakemake",
            "numpy", "pandas", "scipy", "scikit-learn", "faiss-cpu", "rank-bm25")


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


def run(spec: dict, out: str | Path) -> dict:
    per_role: dict[str, dict[str, dict]] = {}
    stages: dict[str, dict] = {}
    silver: dict[str, dict] = {}
    for seed, roles in spec["runs"].items():
        for role, node in roles.items():
            metrics = read_json(Path(node["path"]) / "metrics.json")
            stages[node["key"]] = {"stage": node["stage"], "path": node["path"],
                                   "wall_time_s": metrics.get("wall_time_s")}
            if role == "labels":
                silver.setdefault(seed, read_json(Path(node["path"]) / "sampling_stats.json"))
            if role in ROLE_LABELS:
                test = metrics["test"]
                per_role.setdefault(role, {})[seed] = {m: test.get(m) for m in (*METRICS, "n_pairs")}
                if metrics.get("arch"):
                    per_role[role][seed]["arch"] = metrics["arch"]
    data_node = next(iter(spec["runs"].values()))["data"]
    data_metrics = read_json(Path(data_node["path"]) / "metrics.json")
    devices = {read_json(Path(s["path"]) / "metrics.json").get("device") for s in stages.values()} - {None}
    models = {
        role: {
            "description": ROLE_LABELS[role],
            "per_seed": seeds,
            **{m: summarise([v[m] for v in seeds.values()]) for m in METRICS},
        }
        for role, seeds in per_role.items()
    }
    result = {
        "experiment": spec["experiment"],
        "description": spec["config"].get("description", ""),
        "dataset": spec["config"]["dataset"],
        "config_hash": spec["config_hash"],
        "seeds": spec["seeds"],
        "metrics_note": "Spearman and Pearson correlation x 100 on the test split; mean and std over seeds",
        "models": models,
        "data": {"sizes": data_metrics["sizes"], "skipped_rows": data_metrics["skipped_rows"]["total"]},
        "silver": silver,
        "stages": stages,
        "wall_time_s": {"stages_total": round(sum(s["wall_time_s"] or 0 for s in stages.values()), 3)},
        "device": sorted(devices),
        "versions": package_versions(),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": spec["config"],
        "dataset_definition": spec["dataset"],
    }
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_json(out, result)
    return result
