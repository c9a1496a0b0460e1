"""Retrieval metrics (seeds 000/002, USEB) and embedding diagnostics (alignment, uniformity).

Each ranking is a sequence of item ids, best first; `relevant` the set of
relevant ids for that query. Conventions (stated because papers differ):
- AP: mean of precision@i over the ranks i of the relevant items retrieved,
  divided by the number of relevant items (unretrieved ones count as 0);
- AP@k: the same over the top k, divided by min(k, |relevant|);
- capped R@k: hits in the top k / min(k, |relevant|); Acc@k: 1 if any hit.
Queries without relevant items are skipped, and counted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _hits(ranking: Sequence, relevant: set, k: int | None = None) -> np.ndarray:
    top = ranking if k is None else ranking[:k]
    return np.fromiter((item in relevant for item in top), dtype=bool, count=len(top))


def average_precision(ranking: Sequence, relevant: set, k: int | None = None) -> float:
    hits = _hits(ranking, relevant, k)
    if not relevant:
        raise ValueError("average precision needs at least one relevant item")
    precision_at_hits = np.cumsum(hits)[hits] / (np.flatnonzero(hits) + 1)
    denominator = len(relevant) if k is None else min(k, len(relevant))
    return float(precision_at_hits.sum() / denominator)


def precision_at_k(ranking: Sequence, relevant: set, k: int) -> float:
    return float(_hits(ranking, relevant, k).sum() / k)


def recall_at_k(ranking: Sequence, relevant: set, k: int) -> float:
    return float(_hits(ranking, relevant, k).sum() / len(relevant))


def capped_recall_at_k(ranking: Sequence, relevant: set, k: int) -> float:
    return float(_hits(ranking, relevant, k).sum() / min(k, len(relevant)))


def accuracy_at_k(ranking: Sequence, relevant: set, k: int) -> float:
    return float(_hits(ranking, relevant, k).any())


def retrieval_metrics(rankings: Sequence[Sequence], relevant: Sequence[set], ks: Sequence[int] = (1, 10, 100)) -> dict:
    """Mean MAP, MAP@k, P@k, R@k, capped R@k and Acc@k over the queries (x 100)."""
    pairs = [(r, rel) for r, rel in zip(rankings, relevant) if rel]
    if not pairs:
        raise ValueError("no query has a relevant item")
    out = {"queries": len(pairs), "skipped_queries": len(rankings) - len(pairs),
           "map": 100 * float(np.mean([average_precision(r, rel) for r, rel in pairs]))}
    per_k = {"map": average_precision, "p": precision_at_k, "r": recall_at_k, "capped_r": capped_recall_at_k,
             "acc": accuracy_at_k}
    for k in ks:
        for name, fn in per_k.items():
            out[f"{name}@{k}"] = 100 * float(np.mean([fn(r, rel, k) for r, rel in pairs]))
    return out


def _normalised(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def alignment(x, y, alpha: float = 2.0) -> float:
    """E ||f(x) - f(y)||^alpha over positive pairs (rows of x and y), on normalised embeddings; lower is better."""
    return float(np.mean(np.linalg.norm(_normalised(x) - _normalised(y), axis=1) ** alpha))


def uniformity(x, t: float = 2.0) -> float:
    """log E exp(-t ||f(a) - f(b)||^2) over all distinct pairs, on normalised embeddings; lower is better."""
    z = _normalised(x)
    sq = np.maximum(2 - 2 * (z @ z.T), 0.0)
    iu = np.triu_indices(len(z), k=1)
    return float(np.log(np.mean(np.exp(-t * sq[iu]))))


# ------------------------------------------------------------------ BEIR (graded relevance)
# BEIR's conventions (beir.retrieval.evaluation, pytrec_eval = trec_eval): `relevance` maps an item to its graded
# relevance from the qrels; an item counts as relevant when its grade is >= 1.
# - nDCG@k: gain = the grade itself (trec_eval's gain, not 2^grade - 1), discount 1 / log2(rank + 1), divided by
#   the DCG of the judged grades sorted best first (the ideal ranking);
# - MRR@k: 1 / rank of the first relevant item in the top k, 0 without one (BEIR's own `mrr`);
# - Recall@k: relevant items in the top k / all relevant items (trec_eval's recall_k, not capped).
def ndcg_at_k(ranking: Sequence, relevance: dict, k: int) -> float:
    gains = np.array([max(relevance.get(item, 0), 0) for item in ranking[:k]], dtype=np.float64)
    discounts = 1.0 / np.log2(np.arange(2, k + 2))
    ideal = np.sort(np.array([g for g in relevance.values() if g > 0], dtype=np.float64))[::-1][:k]
    if not len(ideal):
        raise ValueError("nDCG needs at least one relevant item")
    return float((gains * discounts[: len(gains)]).sum() / (ideal * discounts[: len(ideal)]).sum())


def reciprocal_rank_at_k(ranking: Sequence, relevance: dict, k: int) -> float:
    for rank, item in enumerate(ranking[:k], start=1):
        if relevance.get(item, 0) >= 1:
            return 1.0 / rank
    return 0.0


def graded_recall_at_k(ranking: Sequence, relevance: dict, k: int) -> float:
    relevant = {item for item, grade in relevance.items() if grade >= 1}
    return recall_at_k(ranking, relevant, k)


def beir_metrics(rankings: Sequence[Sequence], relevance: Sequence[dict], ndcg_k: int = 10, mrr_k: int = 10,
                 recall_k: int = 100, without_relevant: str = "zero") -> dict:
    """Mean nDCG@k, MRR@k and Recall@k x 100 (BEIR's headline figures). A judged query without a relevant item
    (every grade 0) scores 0 on all three and counts in the mean, as pytrec_eval (trec_eval) and so BEIR count
    it (`without_relevant: zero`), or is left out of the mean (`skip`); either way it is counted."""
    if without_relevant not in ("zero", "skip"):
        raise ValueError(f"without_relevant must be zero or skip, got {without_relevant!r}")
    has_relevant = [any(g >= 1 for g in rel.values()) for rel in relevance]
    if not any(has_relevant):
        raise ValueError("no query has a relevant item")
    pairs = [(r, rel, ok) for r, rel, ok in zip(rankings, relevance, has_relevant) if ok or without_relevant == "zero"]

    def mean(metric, k):
        return 100 * float(np.mean([metric(r, rel, k) if ok else 0.0 for r, rel, ok in pairs]))

    return {"queries": len(pairs), "without_relevant": len(has_relevant) - sum(has_relevant),
            "skipped_queries": len(rankings) - len(pairs), f"ndcg@{ndcg_k}": mean(ndcg_at_k, ndcg_k),
            f"mrr@{mrr_k}": mean(reciprocal_rank_at_k, mrr_k), f"recall@{recall_k}": mean(graded_recall_at_k, recall_k)}
