"""Stage `pretrain`: unsupervised pre-training of a sentence encoder (`pretrain.objective`).

Corpus (the objective's `corpus`, augsbert.training.pretrain_rows): the unique sentences of the `data` input (`pretrain.pool`), without
the evaluated dataset's dev/test sentences; a held-out slice measures the
objective's loss. The chosen checkpoint is evaluated on the evaluated
dataset's test split like the zero-shot model, and saved as a
sentence-transformers model under `model/`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..data.pool import read_split
from ..evaluation import correlations, cosine_scores
from ..models import resolve_device
from ..models.device import precision
from ..params import read_params
from ..objectives import OBJECTIVES
from ..objectives.base import load
from ..stages.pretrain import PretrainParams
from ..store.artifacts import artifact_dir, write_json
from ..store.artifacts import checkpoint_dir
from ..store.model_refs import model_path
from ..training.pretrain import base_held_out_loss, fit, held_out_loss

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(PretrainParams, spec), spec["inputs"]
    evaluated = inputs.get("eval", inputs["data"])
    test = read_split(evaluated, "test")
    dev = read_split(evaluated, "dev", required=False)
    params, train, held, removed, triples, held_triples = load(OBJECTIVES[params.objective].corpus)(
        spec, params, evaluated)
    work = checkpoint_dir(out)
    with artifact_dir(out, spec, force, checkpoints=work) as tmp:
        device = resolve_device(device)
        base = model_path(params, params.model)
        log.info("pretrain %s (pooling %s) from %s: %d training %s, %d held out, %d dev/test sentences removed, "
                 "device %s", params.objective, params.pooling, params.model, len(train),
                 "triples" if triples else "sentences", len(held), removed, device)
        before = base_held_out_loss(base, held, params, device, held_triples)
        model, loss, metrics = fit(base, train, held, dev, params, work, device, precision(), triples, held_triples)
        after = held_out_loss(model, loss, params.objective, held, params, held_triples)
        log.info("pretrain: held-out %s loss %.4f (base model) -> %.4f", params.objective, before, after)
        trained_length = model.max_seq_length
        model.max_seq_length = (params.eval_max_length or trained_length)  # as the zero-shot model is tested
        predicted = cosine_scores(model, list(zip(test["sentence1"], test["sentence2"])),
                                  params.eval_batch_size)
        model.max_seq_length = trained_length
        test_metrics = correlations(predicted, test["score"])
        log.info("pretrain: held-out loss of the chosen checkpoint %.4f; test spearman %.2f  pearson %.2f",
                 after, test_metrics["spearman"], test_metrics["pearson"])
        model.save(str(tmp / "model"))
        pd.DataFrame({"sentence1": test["sentence1"], "sentence2": test["sentence2"], "gold": test["score"],
                      "predicted": predicted}).to_parquet(tmp / "predictions.parquet", index=False)
        dev_scores = [h["eval_dev_spearman_cosine"] for h in metrics["history"]
                      if h["step"] == metrics["best_step"] and "eval_dev_spearman_cosine" in h]
        metrics = {"model": params.model, "device": device, "test": test_metrics,
                   "eval_sentences_removed": removed, "held_out_loss_base": before, "held_out_loss_final": after,
                   **metrics}
        if dev_scores:
            metrics["dev_spearman"] = 100 * dev_scores[0]
        write_json(tmp / "metrics.json", metrics)
    return metrics
