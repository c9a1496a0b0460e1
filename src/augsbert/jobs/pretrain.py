"""Stage `pretrain`: unsupervised pre-training of a sentence encoder (`pretrain.objective`).

Corpus: the unique sentences of the `data` input (`pretrain.pool`), without
the evaluated dataset's dev/test sentences; a held-out slice measures the
objective's loss. The chosen checkpoint is evaluated on the evaluated
dataset's test split like the zero-shot model, and saved as a
sentence-transformers model under `model/`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import torch
from transformers import set_seed

from ..store.artifacts import artifact_dir, write_json
from ..evaluation import correlations, cosine_scores
from ..models import resolve_device
from ..params import read_params
from ..objectives.base import load
from ..objectives import OBJECTIVES, build_loss
from ..stages.pretrain import PretrainParams
from ..training.pretrain import build_encoder, fit, held_out_loss
from .common import checkpoint_dir, model_path, precision
from ..data.pool import evaluation_sentences, read_split
from .pretrain_rows import checked_regulators, corpus, rcl_rows, read_triples, split_triples

log = logging.getLogger(__name__)


def base_held_out_loss(base: str, held: list[str], params: PretrainParams, device: str, triples=None) -> float:
    """The objective's held-out loss of the untrained encoder (a fresh loss: new heads as training starts)."""
    set_seed(params.seed)
    model = build_encoder(base, params.pooling, params.max_length, device, params.config_kwargs)
    value = held_out_loss(model, build_loss(params.objective, model, params, base), params.objective, held,
                          params, triples)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return value


# The corpora an objective trains on (its entry's `corpus`): (params, train, held out, removed, triples,
# held-out triples); the texts the trainer reads are the first of each row (`train`, `held`).
def sentence_corpus(spec: dict, params: PretrainParams, evaluated: str):
    """The unique sentences of the corpus (pretrain.pool), without the evaluated dataset's dev/test sentences."""
    train, held, removed = corpus(spec, params)
    return params, train, held, removed, None, None


def triple_corpus(spec: dict, params: PretrainParams, evaluated: str):
    """NLI triples (anchor, entailment, contradiction) from `pretrain.triples`."""
    eval_sentences = evaluation_sentences(evaluated) if params.exclude_eval_sentences else set()
    triples, held_triples, removed = split_triples(read_triples(params.triples, params.triples_format),
                                                   params.held_out, params.seed, eval_sentences)
    return params, [t[0] for t in triples], [t[0] for t in held_triples], removed, triples, held_triples


def rcl_corpus(spec: dict, params: PretrainParams, evaluated: str):
    """Rows with ids; the entropy models' embeddings of the same rows become the loss's regulators."""
    triples, held_triples, removed = rcl_rows(spec, params)
    params = params.replace(regulators=checked_regulators(spec["inputs"], triples + held_triples))
    return params, [t[1] for t in triples], [t[1] for t in held_triples], removed, triples, held_triples


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
