"""Stages `train_teacher` (Cross-Encoder / Cross-Bi-Encoder on gold) and `train_student` (Bi-Encoder).

Both select the best epoch on dev, evaluate the chosen model on the test
split and save it in its standard format under `model/`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..artifacts import artifact_dir, write_json
from ..data import DataError, read_pairs
from ..models import resolve_device, resolve_model
from ..training import evaluate, fit, save_model, symmetrise
from .common import checkpoint_dir, precision, read_split

log = logging.getLogger(__name__)


def _train_and_save(arch: str, spec: dict, train: pd.DataFrame, out, device, force) -> dict:
    params = spec["params"]
    data = spec["inputs"]["data"]
    dev = read_split(data, "dev", required=False)
    test = read_split(spec["inputs"].get("eval", data), "test")  # domain transfer: the target's test split
    device = resolve_device(device)
    work = checkpoint_dir(out)
    # an MLM-adapted checkpoint (domain / full_domain variants) replaces the base model
    base = str(Path(spec["inputs"]["init"]) / "model") if "init" in spec["inputs"] else resolve_model(params["model"])
    log.info("%s: %d training pairs, %s dev pairs, %d test pairs, base %s, device %s", arch, len(train),
             len(dev) if dev is not None else "no", len(test), params["model"], device)
    with artifact_dir(out, spec, force, checkpoints=work) as tmp:
        result = fit(arch, base, train, dev, params, work, device, precision())
        test_metrics, predicted = evaluate(arch, result.model, test, params)
        log.info("%s: test spearman %.2f  pearson %.2f", arch, test_metrics["spearman"], test_metrics["pearson"])
        save_model(arch, result.model, tmp / "model")
        pd.DataFrame({"sentence1": test["sentence1"], "sentence2": test["sentence2"], "gold": test["score"],
                      "predicted": predicted}).to_parquet(tmp / "predictions.parquet", index=False)
        metrics = {"arch": arch, "device": device, "test": test_metrics, **result.metrics}
        if "eval" in spec["inputs"]:
            metrics["source_test"] = evaluate(arch, result.model, read_split(data, "test"), params)[0]
        write_json(tmp / "metrics.json", metrics)
    return metrics


def run_teacher(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = spec["params"]
    train = read_split(spec["inputs"]["data"], "train")
    if params["symmetric"]:
        train = symmetrise(train)
    return _train_and_save(params["arch"], spec, train, out, device, force)


def student_training_set(spec: dict) -> pd.DataFrame:
    """Gold train pairs (if `use_gold_labels`) plus teacher-labelled pairs (if a `labels` input is planned)."""
    params = spec["params"]
    parts = []
    if params["use_gold_labels"]:
        parts.append(read_split(spec["inputs"]["data"], "train")[["sentence1", "sentence2", "score"]])
    if "labels" in spec["inputs"]:
        parts.append(read_pairs(Path(spec["inputs"]["labels"]) / "pairs.parquet")[["sentence1", "sentence2", "score"]])
    if not parts:
        raise DataError("the student has no training pairs: enable student.use_gold_labels or silver labels")
    return pd.concat(parts, ignore_index=True)


def run_student(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    train = student_training_set(spec)
    return _train_and_save("be", spec, train, out, device, force)
