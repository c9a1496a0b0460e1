"""Nearest neighbours by cosine similarity of embeddings (faiss), in bounded memory."""

from __future__ import annotations

import numpy as np


def _normalised(embeddings) -> np.ndarray:
    x = np.array(embeddings, dtype=np.float32, copy=True, order="C")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x /= np.maximum(norms, 1e-12)
    return x


def semantic_neighbors(
    embeddings,
    k: int,
    exact: bool = True,
    least_similar: bool = False,
    query_block: int = 8192,
    hnsw_m: int = 32,
    ef_search: int = 128,
) -> tuple[np.ndarray, np.ndarray]:
    """The k most cosine-similar partners of every row (itself excluded), best first.

    `exact=True` searches a flat inner-product index (exact); `exact=False` an
    HNSW graph (approximate, for millions of rows). Queries go in blocks, so
    memory is O(N d + N k), never N x N. With `least_similar` the k least
    similar partners are returned (exact only), lowest first.
    """
    import faiss

    x = _normalised(embeddings)
    n, d = x.shape
    if not 0 < k < n:
        raise ValueError(f"k must be between 1 and {n - 1} for {n} rows, got {k}")
    if least_similar and not exact:
        raise ValueError("least_similar needs exact search")
    if exact:
        index = faiss.IndexFlatIP(d)
    else:
        index = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = max(40, 2 * hnsw_m)
        index.hnsw.efSearch = max(ef_search, k + 1)
    index.add(-x if least_similar else x)
    indices = np.empty((n, k), dtype=np.int64)
    scores = np.empty((n, k), dtype=np.float32)
    for start in range(0, n, query_block):
        stop = min(n, start + query_block)
        sims, found = index.search(x[start:stop], k + 1)
        own = found == np.arange(start, stop)[:, None]
        # drop the row itself where it was found, else the last (k+1-th) hit
        drop = np.where(own.any(axis=1), own.argmax(axis=1), k)
        keep = np.ones_like(found, dtype=bool)
        keep[np.arange(stop - start), drop] = False
        indices[start:stop] = found[keep].reshape(-1, k)
        scores[start:stop] = sims[keep].reshape(-1, k)
    if least_similar:
        scores = -scores
    return indices, scores
