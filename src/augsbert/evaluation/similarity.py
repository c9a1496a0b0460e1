"""Pair-similarity evaluation: Spearman / Pearson x 100 of model scores against gold (the scores: `Encoder` and
`cosine_scores` of augsbert.models.inference for Bi-Encoders, each architecture's `predict` for the others)."""

from __future__ import annotations

import logging

import numpy as np

from ..models.inference import Encoder, cosine_scores

__all__ = ["Encoder", "correlations", "cosine_scores"]
log = logging.getLogger(__name__)


def correlations(predicted, gold) -> dict[str, float]:
    """Spearman (primary) and Pearson correlation, both x 100, plus the pair count.

    Spearman uses average ranks for ties (scipy); a constant input has no
    defined correlation and gives NaN, reported as null in JSON.
    """
    from scipy import stats  # here, not at import: planning imports this package and needs no scipy (~1 s)

    predicted = np.asarray(predicted, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    if predicted.shape != gold.shape or predicted.ndim != 1:
        raise ValueError(f"need two equal-length 1-d arrays, got {predicted.shape} and {gold.shape}")
    if len(gold) < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        log.warning("Spearman and Pearson undefined (null in the metrics): %s", undefined_reason(predicted, gold))
        return {"spearman": float("nan"), "pearson": float("nan"), "n_pairs": int(len(gold))}
    return {
        "spearman": float(stats.spearmanr(predicted, gold).statistic * 100),
        "pearson": float(stats.pearsonr(predicted, gold).statistic * 100),
        "n_pairs": int(len(gold)),
    }


def undefined_reason(predicted: np.ndarray, gold: np.ndarray) -> str:
    """Why a correlation of these scores is undefined (fewer than two pairs, or one side constant)."""
    if len(gold) < 2:
        return f"{len(gold)} pair(s); a correlation needs two or more"
    if np.ptp(gold) == 0:
        return (f"all {len(gold)} gold scores are equal ({gold[0]:g}); check the split's scores and the dataset's "
                "score_range")
    return (f"the model gives all {len(predicted)} pairs the same score ({predicted[0]:g}), so it ranks none above "
            "another (a collapsed or untrained model?)")
