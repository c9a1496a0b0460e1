"""Stage `trans_encoder`: unlabelled pairs scored by one or two models, averaged (Trans-Encoder's pseudo-labels).

The pairs are the target's train pairs, read without their score column (no gold label enters), or the
sampling stage's candidates; with `max_pairs`, a seeded subset of them. A scorer is a trained artifact
(a cross model, `teacher`; a Bi-Encoder, `student` / `pretrain`) or, in round 0, a model reference used
as a Bi-Encoder (cosine of its sentence embeddings, mean pooling for a plain encoder). Writes
`pairs.parquet` in the labelling stage's layout (`sentence1, sentence2, strategy, score, teacher`, plus
each scorer's own score `score_<k>`), which the teacher and student stages learn from, and metrics.json.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..data import DataError
from ..data.pool import unlabelled_pairs
from ..data.tables import pairs_of
from ..evaluation import correlations
from ..models import resolve_device
from ..models.teacher import BiEncoderScorer, TrainedPairModel
from ..params import read_params
from ..stages.trans_encoder import SCORER_INPUT, TransEncoderParams
from ..store.artifacts import artifact_dir, read_json, write_json
from ..store.model_refs import model_path

log = logging.getLogger(__name__)

STRATEGY = "trans_encoder"


def _scorer(spec: dict, params: TransEncoderParams, k: int, device: str):
    """Scorer k: the input `scorer_<k>` (a trained artifact) or the reference `model` / `mutual_model`."""
    directory = spec["inputs"].get(SCORER_INPUT.format(k))
    if directory is None:
        ref = params.model if k == 0 else params.mutual_model
        if ref is None:
            raise DataError(f"trans_encoder spec: scorer {k} is neither an input nor a model reference")
        return BiEncoderScorer(model_path(params, ref), device, params.max_length), ref
    directory = Path(directory)
    if read_json(directory / "spec.json")["stage"] == "teacher":
        return TrainedPairModel(directory, device), directory.name
    return BiEncoderScorer(str(directory / "model"), device, params.max_length), directory.name


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = read_params(TransEncoderParams, spec)
    pairs = unlabelled_pairs(spec["inputs"]["pairs"], params)
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        shown, scores, names = pairs_of(pairs), [], []
        for k in range(params.scorers):
            model, name = _scorer(spec, params, k, device)
            log.info("scoring %d unlabelled pairs with %s (%s)", len(pairs), name, model.arch_name)
            scores.append(model.score(shown, params.batch_size))
            names.append(name)
            del model
        score = np.mean(scores, axis=0)  # mutual distillation: the two models' mean
        clipped = int(((score < 0) | (score > 1)).sum()) if params.clip else 0
        if params.clip:
            score = np.clip(score, 0.0, 1.0)
        table = pairs.assign(strategy=STRATEGY, score=score, teacher="+".join(names),
                             **{f"score_{k}": s for k, s in enumerate(scores)})
        table.to_parquet(tmp / "pairs.parquet", index=False)
        metrics = {"device": device, "pairs": len(table), "source": params.source, "scorers": names,
                   "clipped_to_unit_interval": clipped,
                   "score": {"mean": float(score.mean()), "std": float(score.std()), "min": float(score.min()),
                             "max": float(score.max())}}
        if len(scores) == 2:
            metrics["scorer_agreement"] = correlations(scores[0], scores[1])  # Spearman / Pearson x 100
        write_json(tmp / "metrics.json", metrics)
        log.info("pseudo-labels: %d pairs, mean %.3f, std %.3f%s", len(table), score.mean(), score.std(),
                 f", {clipped} clipped to [0, 1]" if params.clip else "")
    return metrics
