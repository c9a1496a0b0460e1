"""Nearest neighbours by cosine similarity of embeddings (faiss), in bounded memory.

`semantic_neighbors` is `build_index` + `search_rows` over every row. A
sharded candidate search (candidates.shards) builds the index once, writes it
with `faiss.write_index`, and each shard searches its own rows of it.
"""

from __future__ import annotations

import numpy as np

QUERY_BLOCK = 8192  # queries per faiss search call


def normalised(embeddings) -> np.ndarray:
    """Row-normalised float32 copy (cosine similarity = inner product)."""
    x = np.array(embeddings, dtype=np.float32, copy=True, order="C")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x /= np.maximum(norms, 1e-12)
    return x


def build_index(x: np.ndarray, exact: bool = True, least_similar: bool = False, hnsw_m: int = 32,
                ef_search: int = 128, k: int = 0):
    """A faiss inner-product index of the normalised rows `x` (of -x for `least_similar`, exact only).

    `exact`: a flat index (exact search); else an HNSW graph (approximate, for
    millions of rows), its efSearch at least k + 1. faiss builds HNSW graphs
    with several threads, so two builds of the same rows can differ; a sharded
    search therefore builds it once and every shard reads that one graph.
    """
    import faiss

    if least_similar and not exact:
        raise ValueError("least_similar needs exact search")
    d = x.shape[1]
    if exact:
        index = faiss.IndexFlatIP(d)
    else:
        index = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = max(40, 2 * hnsw_m)
        index.hnsw.efSearch = max(ef_search, k + 1)
    index.add(-x if least_similar else x)
    return index


def search_rows(index, x: np.ndarray, k: int, rows: tuple[int, int] | None = None, least_similar: bool = False,
                query_block: int = QUERY_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    """The k best partners (itself excluded) of rows `start:stop` of `x`, searched in `index` (built from x).

    Queries go in blocks of `query_block` from `start`: with `start` a multiple
    of `query_block` every block is the one a whole-pool search forms, so a
    shard's rows are bit for bit the whole search's (faiss and BLAS may take
    another path for another block shape).
    """
    n = index.ntotal
    if not 0 < k < n:
        raise ValueError(f"k must be between 1 and {n - 1} for {n} rows, got {k}")
    if hasattr(index, "hnsw"):
        index.hnsw.efSearch = max(index.hnsw.efSearch, k + 1)
    first, last = rows if rows is not None else (0, n)
    indices = np.empty((last - first, k), dtype=np.int64)
    scores = np.empty((last - first, k), dtype=np.float32)
    for start in range(first, last, query_block):
        stop = min(last, start + query_block)
        sims, found = index.search(np.ascontiguousarray(x[start:stop], dtype=np.float32), k + 1)
        own = found == np.arange(start, stop)[:, None]
        # drop the row itself where it was found, else the last (k+1-th) hit
        drop = np.where(own.any(axis=1), own.argmax(axis=1), k)
        keep = np.ones_like(found, dtype=bool)
        keep[np.arange(stop - start), drop] = False
        indices[start - first:stop - first] = found[keep].reshape(-1, k)
        scores[start - first:stop - first] = sims[keep].reshape(-1, k)
    if least_similar:
        scores = -scores
    return indices, scores


def semantic_neighbors(
    embeddings,
    k: int,
    exact: bool = True,
    least_similar: bool = False,
    query_block: int = QUERY_BLOCK,
    hnsw_m: int = 32,
    ef_search: int = 128,
) -> tuple[np.ndarray, np.ndarray]:
    """The k most cosine-similar partners of every row (itself excluded), best first.

    `exact=True` searches a flat inner-product index (exact); `exact=False` an
    HNSW graph (approximate, for millions of rows). Queries go in blocks, so
    memory is O(N d + N k), never N x N. With `least_similar` the k least
    similar partners are returned (exact only), lowest first.
    """
    x = normalised(embeddings)
    n = len(x)
    if not 0 < k < n:
        raise ValueError(f"k must be between 1 and {n - 1} for {n} rows, got {k}")
    index = build_index(x, exact, least_similar, hnsw_m, ef_search, k)
    return search_rows(index, x, k, least_similar=least_similar, query_block=query_block)
