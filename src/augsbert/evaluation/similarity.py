"""Pair-similarity evaluation: Spearman / Pearson x 100 of model scores against gold."""

from __future__ import annotations

import numpy as np
import pandas as pd
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


def cosine_scores(model, table: pd.DataFrame, batch_size: int = 64, show_progress: bool = True) -> np.ndarray:
    """Cosine similarity of each (sentence1, sentence2) under a SentenceTransformer.

    Every distinct text is encoded once (Lee documents, for example, occur in
    many pairs).
    """
    texts = pd.unique(pd.concat([table["sentence1"], table["sentence2"]], ignore_index=True))
    index = {t: i for i, t in enumerate(texts)}
    emb = model.encode(
        list(texts),
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=show_progress,
    )
    a = emb[[index[t] for t in table["sentence1"]]]
    b = emb[[index[t] for t in table["sentence2"]]]
    return np.einsum("ij,ij->i", a, b).astype(np.float64)
