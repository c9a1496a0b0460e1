"""Stage `evaluate_zero_shot`: the untrained base model as a Bi-Encoder on the test split."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..data.pool import read_split
from ..evaluation import correlations, cosine_scores
from ..models import resolve_device
from ..models.architectures import load_bi_encoder
from ..params import read_params
from ..stages.zero_shot import ZeroShotParams
from ..store.artifacts import artifact_dir, write_json
from ..store.model_refs import model_path

log = logging.getLogger(__name__)


def _is_beir(data_dir) -> bool:
    return (Path(data_dir) / "beir").is_dir()


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = read_params(ZeroShotParams, spec)
    test = read_split(spec["inputs"]["data"], "test", required=not _is_beir(spec["inputs"]["data"]))
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        if test is None:  # a BEIR-format dataset: no test pairs; its suite's `retrieval` scores the model
            metrics = {"model": params.model, "device": device,
                       "test": {"spearman": None, "pearson": None, "n_pairs": 0}}
            log.info("zero-shot: the dataset has no test pairs (BEIR-format); see the retrieval suite")
            write_json(tmp / "metrics.json", metrics)
            return metrics
        log.info("zero-shot: model %s on %d test pairs (device %s)", params.model, len(test), device)
        model = load_bi_encoder(model_path(params, params.model), device, params.max_length)
        predicted = cosine_scores(model, list(zip(test["sentence1"], test["sentence2"])), params.batch_size)
        metrics = {"model": params.model, "device": device, "test": correlations(predicted, test["score"])}
        log.info("zero-shot: test spearman %.2f  pearson %.2f", metrics["test"]["spearman"], metrics["test"]["pearson"])
        pd.DataFrame({"sentence1": test["sentence1"], "sentence2": test["sentence2"],
                      "gold": test["score"], "predicted": predicted}).to_parquet(tmp / "predictions.parquet", index=False)
        write_json(tmp / "metrics.json", metrics)
    return metrics
