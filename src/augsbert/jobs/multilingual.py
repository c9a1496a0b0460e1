"""Stage `multilingual`: the multilingual student learns the teacher's embeddings of the originals for each parallel
pair's original and translation (MSELoss: augsbert.training.multilingual), then is tested on the target's test
pairs (the source language's STS, as every Bi-Encoder row; its per-language figures: stage `language_suite`)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from ..data.pool import read_split
from ..evaluation import correlations, cosine_scores
from ..models import resolve_device
from ..models.architectures import load_bi_encoder
from ..params import read_params
from ..stages.multilingual import MultilingualParams
from ..store.artifacts import artifact_dir, write_json
from ..store.model_refs import model_path
from ..training.multilingual import match_dimension, read_targets, training_rows
from ..training.trainers import multilingual_trainer

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(MultilingualParams, spec), spec["inputs"]
    pairs, embeddings = read_targets(inputs["source_embeddings"])
    device = resolve_device(device)
    with artifact_dir(out, spec, force) as tmp:
        model = load_bi_encoder(model_path(params, params.model), device, params.max_length)
        projected = match_dimension(model, int(embeddings.shape[1]))
        rows = training_rows(pairs, embeddings)
        result = multilingual_trainer(model, rows, params, tmp / "work", device).train()
        model.save(str(tmp / "model"))
        shutil.rmtree(tmp / "work", ignore_errors=True)  # the trainer's scratch folder, no checkpoint kept
        test = read_split(inputs["data"], "test", required=False)
        scores = {"spearman": None, "pearson": None, "n_pairs": 0}
        if test is not None:  # the source language's test pairs: what the student keeps of the teacher's language
            scores = correlations(cosine_scores(model, list(zip(test["sentence1"], test["sentence2"])),
                                                params.eval_batch_size, show_progress=False), test["score"])
        metrics = {"device": device, "test": scores, "train_pairs": len(rows), "seed": params.seed,
                   "pairs_per_language": {k: int(v) for k, v in pairs["language"].value_counts(sort=False).items()},
                   "projection": projected, "steps": int(result.global_step),
                   "train_loss": float(result.training_loss)}
        log.info("multilingual student: %d steps on %d parallel pairs, final mean loss %.6f; test spearman %s",
                 metrics["steps"], len(rows), metrics["train_loss"], scores["spearman"])
        write_json(tmp / "metrics.json", metrics)
    return metrics
