"""Pair-similarity evaluation: Spearman / Pearson x 100 of model scores against gold."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats


def correlations(predicted, gold) -> dict[str, float]:
    """Spearman (primary) and Pearson correlation, both x 100, plus the pair count.

    Spearman uses average ranks for ties (scipy); a constant input has no
    defined correlation and gives NaN, reported as null in JSON.
    """
    predicted = np.asarray(predicted, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    if predicted.shape != gold.shape or predicted.ndim != 1:
        raise ValueError(f"need two equal-length 1-d arrays, got {predicted.shape} and {gold.shape}")
    if len(gold) < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return {"spearman": float("nan"), "pearson": float("nan"), "n_pairs": int(len(gold))}
    return {
        "spearman": float(stats.spearmanr(predicted, gold).statistic * 100),
        "pearson": float(stats.pearsonr(predicted, gold).statistic * 100),
        "n_pairs": int(len(gold)),
    }


def cosine_scores(model, pairs: Sequence[tuple[str, str]], batch_size: int = 64,
                  show_progress: bool = True) -> np.ndarray:
    """Cosine similarity of each (a, b) pair under a SentenceTransformer.

    Every distinct text is encoded once (Lee documents, for example, occur in
    many pairs).
    """
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    index = {t: i for i, t in enumerate(texts)}
    emb = model.encode(
        texts,
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=show_progress,
    )
    a = emb[[index[p[0]] for p in pairs]]
    b = emb[[index[p[1]] for p in pairs]]
    return np.einsum("ij,ij->i", a, b).astype(np.float64)
