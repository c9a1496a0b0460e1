"""Exact inner-product top-k search with bounded memory: the retrieval evaluation's and the samplers' search (BM25's
and the candidate passes' block sizes, the miner's search). No model: numpy and faiss over arrays, so it sits at the
package's root, below the evaluation and sampling that both read it (tests/test_imports.py).

Below `faiss_from` passages, numpy scores one block of queries against every
passage at a time, the block sized so that its scores take about `BLOCK_BYTES`
(argpartition keeps the k best, then only those are sorted: no full argsort);
from `faiss_from` on, `faiss.knn` (exact, blocked BLAS, no index copy of the
corpus) searches query blocks. Memory beyond the inputs: one block of scores
plus the (queries, k) results. Ties keep corpus order in numpy (faiss breaks
them its own way).
"""

from __future__ import annotations

import numpy as np

BLOCK_BYTES = 64 * 2**20  # scores of one numpy block of queries (float32)
FAISS_FROM = 200_000  # passages: from here on faiss.knn (the same hits, faster)
FAISS_QUERIES = 8192  # queries per faiss.knn call (its own buffers are per call)


def block_rows(n_corpus: int, row_bytes: int = 4, block_bytes: int | None = None) -> int:
    """Queries per block whose scores (`row_bytes` each) against `n_corpus` passages take about `block_bytes`
    (BLOCK_BYTES, read at call time)."""
    return max(1, (block_bytes or BLOCK_BYTES) // (row_bytes * max(1, n_corpus)))


def best_of_block(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k highest of each row of `scores`, best first, ties by column (indices, scores)."""
    k = min(k, scores.shape[1])
    if k < scores.shape[1]:
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(scores.shape[1]), scores.shape).copy()
    part_scores = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -part_scores), axis=1)
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(part_scores, order, axis=1)


def top_k(queries: np.ndarray, corpus: np.ndarray, k: int,
          faiss_from: int = FAISS_FROM) -> tuple[np.ndarray, np.ndarray]:
    """The k highest inner products of each query row among the corpus rows, best first (indices, scores)."""
    k = min(k, len(corpus))
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    corpus = np.ascontiguousarray(corpus, dtype=np.float32)
    indices = np.empty((len(queries), k), dtype=np.int64)
    scores = np.empty((len(queries), k), dtype=np.float32)
    if len(corpus) >= faiss_from:
        import faiss

        for start in range(0, len(queries), FAISS_QUERIES):
            stop = min(len(queries), start + FAISS_QUERIES)
            scores[start:stop], indices[start:stop] = faiss.knn(queries[start:stop], corpus, k,
                                                                metric=faiss.METRIC_INNER_PRODUCT)
        return indices, scores
    step = block_rows(len(corpus))
    for start in range(0, len(queries), step):
        block = queries[start:start + step] @ corpus.T
        indices[start:start + len(block)], scores[start:start + len(block)] = best_of_block(block, k)
    return indices, scores
