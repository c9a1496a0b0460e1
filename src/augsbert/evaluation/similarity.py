"""Pair-similarity evaluation: Spearman / Pearson x 100 of model scores against gold."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
        return {"spearman": float("nan"), "pearson": float("nan"), "n_pairs": int(len(gold))}
    return {
        "spearman": float(stats.spearmanr(predicted, gold).statistic * 100),
        "pearson": float(stats.pearsonr(predicted, gold).statistic * 100),
        "n_pairs": int(len(gold)),
    }


class Encoder:
    """L2-normalised embeddings under a SentenceTransformer, each distinct text encoded once per instance.

    Lee documents occur in many pairs, and one evaluation job scores several
    tasks with the same model: the cache serves them all.
    """

    def __init__(self, model, batch_size: int = 64, show_progress: bool | None = None):
        self.model, self.batch_size, self.show_progress, self.cache = model, batch_size, show_progress, {}

    def __call__(self, texts) -> np.ndarray:
        from ..models import inference

        texts = list(texts)
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            progress = len(new) > 1000 if self.show_progress is None else self.show_progress
            # on CUDA as many rows per batch as memory holds, under autocast (augsbert.models.inference); elsewhere
            # `batch_size` and fp32, the call of before
            rows = inference.batch_size(self.model, self.batch_size, new)
            with inference.autocast(self.model):
                emb = self.model.encode(new, batch_size=rows, convert_to_numpy=True,
                                        normalize_embeddings=True, show_progress_bar=progress)
            self.cache.update(zip(new, emb))
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, 0), dtype=np.float32)

    def cosine(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Cosine similarity of each (a, b) pair."""
        self(dict.fromkeys(t for pair in pairs for t in pair))  # one encode call, first-seen order
        a = self([p[0] for p in pairs])
        b = self([p[1] for p in pairs])
        return np.einsum("ij,ij->i", a, b).astype(np.float64)


def cosine_scores(model, pairs: Sequence[tuple[str, str]], batch_size: int = 64,
                  show_progress: bool = True) -> np.ndarray:
    """Cosine similarity of each (a, b) pair under a SentenceTransformer (every distinct text encoded once)."""
    return Encoder(model, batch_size, show_progress).cosine(pairs)
