"""Stage `evaluate_zero_shot`: the untrained base model as a Bi-Encoder on the test split."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..artifacts import artifact_dir, write_json
from ..data import DataError, read_pairs
from ..evaluation import correlations, cosine_scores
from ..models import resolve_device, resolve_model

log = logging.getLogger(__name__)


def load_bi_encoder(ref: str, device: str, max_length: int):
    """A SentenceTransformer for `ref` (mean pooling is added for plain encoders)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(resolve_model(ref), device=device)
    model.max_seq_length = max_length
    return model


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = spec["params"]
    test_path = Path(spec["inputs"]["data"]) / "test.parquet"
    if not test_path.is_file():
        raise DataError(f"{test_path}: the dataset has no test split to evaluate on")
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        test = read_pairs(test_path)
        log.info("zero-shot: model %s on %d test pairs (device %s)", params["model"], len(test), device)
        model = load_bi_encoder(params["model"], device, params["max_length"])
        predicted = cosine_scores(model, test, params["batch_size"])
        metrics = {"split": "test", "model": params["model"], "device": device, **correlations(predicted, test["score"])}
        log.info("zero-shot: spearman %.2f  pearson %.2f", metrics["spearman"], metrics["pearson"])
        pd.DataFrame({"sentence1": test["sentence1"], "sentence2": test["sentence2"],
                      "gold": test["score"], "predicted": predicted}).to_parquet(tmp / "predictions.parquet", index=False)
        write_json(tmp / "metrics.json", metrics)
    return metrics
