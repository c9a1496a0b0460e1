"""Dense retrieval on a BEIR-format test split: nDCG@10, MRR@10, Recall@100 (x 100), and beside them the
binary-relevance figures of seeds 000 / 002 (`binary`: MAP, MAP@k, P@k, R@k, capped R@k, Acc@k at k = 1, 10, 100).

Every passage (`title text`) and every judged query is encoded by the Bi-Encoder;
each query retrieves the top 100 passages by cosine or dot product (`score_function`,
as BEIR's `cos_sim` / `dot`: dot-product models such as GPL's TAS-B students are
scored unnormalised). The search is exact: blocks of queries against all passages
in numpy (about 64 MiB of scores per block, top-k per block), or `faiss.knn` from
`faiss_from` passages on (also exact; augsbert.search). A passage whose id equals the query's
is never retrieved (BEIR's `ignore_identical_ids`, for Quora-like corpora whose
queries are passages). Ties keep corpus order (trec_eval would break them by id).
"""

from __future__ import annotations

import logging

import pandas as pd

from ..search import FAISS_FROM, top_k
from .retrieval import beir_metrics, retrieval_metrics

__all__ = ["FAISS_FROM", "evaluate_retrieval", "top_k"]

log = logging.getLogger(__name__)


def evaluate_retrieval(model, corpus: pd.DataFrame, queries: pd.DataFrame, qrels: pd.DataFrame,
                       score_function: str = "cos", batch_size: int = 64, k: int = 100,
                       faiss_from: int = FAISS_FROM, without_relevant: str = "zero") -> dict:
    """BEIR's headline metrics of `model` (a SentenceTransformer) on one qrels split."""
    if score_function not in ("cos", "dot"):
        raise ValueError(f"score_function must be cos or dot, got {score_function!r}")
    judged = qrels.groupby("query_id", sort=False)
    relevance = {qid: dict(zip(group["corpus_id"], group["score"].astype(int))) for qid, group in judged}
    texts = dict(zip(queries["id"], queries["text"]))
    qids = [q for q in relevance if q in texts]
    normalise = score_function == "cos"
    encode = dict(batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=normalise)
    passages = model.encode(corpus["passage"].tolist(), show_progress_bar=len(corpus) > 1000, **encode)
    query_emb = model.encode([texts[q] for q in qids], show_progress_bar=False, **encode)
    ids = corpus["id"].to_numpy()
    indices, _ = top_k(query_emb, passages, k + 1, faiss_from)  # one more: a hit equal to the query is dropped
    rankings = [[d for d in ids[row] if d != qid][:k] for qid, row in zip(qids, indices)]
    metrics = beir_metrics(rankings, [relevance[q] for q in qids], recall_k=k, without_relevant=without_relevant)
    # seeds 000 / 002's figures over the same rankings: a passage is relevant when its grade is >= 1; a query
    # without one is left out of their means (and counted); MAP is over the k retrieved
    relevant = [{d for d, grade in relevance[q].items() if grade >= 1} for q in qids]
    metrics["binary"] = retrieval_metrics(rankings, relevant, ks=(1, 10, k))
    metrics.update({"corpus": len(corpus), "score_function": score_function,
                    "search": "faiss knn (exact)" if len(corpus) >= faiss_from else "exact (numpy)"})
    log.info("retrieval: nDCG@10 %.2f, MRR@10 %.2f, Recall@%d %.2f over %d queries, %d passages",
             metrics["ndcg@10"], metrics["mrr@10"], k, metrics[f"recall@{k}"], metrics["queries"], len(corpus))
    return metrics
