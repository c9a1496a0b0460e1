"""Stage `suite`: one Bi-Encoder on the evaluation suite (`augsbert.evaluation.suite`: STS suite, topic
classification, USEB, MTEB, retrieval and diagnostics), written to `metrics.json`."""

from __future__ import annotations

import logging
from pathlib import Path

from ..evaluation.similarity import Encoder
from ..evaluation.suite import evaluate_suite
from ..models import resolve_device
from ..models.architectures import load_bi_encoder
from ..params import read_params
from ..stages.suite import SuiteParams
from ..store.artifacts import artifact_dir, write_json
from ..store.model_refs import model_path

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(SuiteParams, spec), spec["inputs"]
    model_dir = str(Path(inputs["model"]) / "model") if "model" in inputs else model_path(params, params.model)
    device = resolve_device(device)
    with artifact_dir(out, spec, force) as tmp:
        log.info("suite: model %s (device %s)", inputs.get("model", params.model), device)
        encode = Encoder(load_bi_encoder(model_dir, device, params.max_length), params.batch_size)
        metrics = {"device": device, **evaluate_suite(encode, params, inputs["data"], tmp)}
        write_json(tmp / "metrics.json", metrics)
    return metrics
