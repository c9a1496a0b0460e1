"""BM25 nearest neighbours of every sentence in a pool, fast and in bounded memory.

Scores are those of `rank_bm25.BM25Okapi` (k1 1.5, b 0.75, epsilon floor of
0.25 x mean IDF for negative IDFs) on the same tokens, computed for all
queries at once as a sparse product `query term counts x document weights`,
one block of queries at a time (never an N x N matrix).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import torch
from scipy import sparse

from ..search import block_rows

_WORD = re.compile(r"\w+")
FREQUENT_SHARE = 50  # terms in more than 1/50 of the documents are multiplied densely (measured best)
BLOCK_BYTES = 64 * 2**20  # one dense block of query x pool scores


def default_tokenize(text: str) -> list[str]:
    """Lower-cased word tokens: `re.findall(r"\\w+", text.lower())`."""
    return _WORD.findall(text.lower())


def term_counts(tokens: Sequence[Sequence[str]]) -> sparse.csr_matrix:
    """N x V matrix of term counts (vocabulary in order of first appearance)."""
    vocab: dict[str, int] = {}
    indptr, indices = [0], []
    for doc in tokens:
        indices.extend(vocab.setdefault(t, len(vocab)) for t in doc)
        indptr.append(len(indices))
    data = np.ones(len(indices), dtype=np.float64)
    counts = sparse.csr_matrix((data, np.asarray(indices, dtype=np.int64), np.asarray(indptr, dtype=np.int64)),
                               shape=(len(tokens), max(1, len(vocab))))
    counts.sum_duplicates()
    return counts


def bm25_weights(counts: sparse.csr_matrix, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
    """Document-side BM25Okapi weights w[d, t] = idf[t] * tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl))."""
    n_docs = counts.shape[0]
    df = np.bincount(counts.indices, minlength=counts.shape[1]).astype(np.float64)
    present = df > 0
    idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
    average = idf[present].mean() if present.any() else 0.0
    idf[present & (idf < 0)] = epsilon * average  # rank_bm25's floor for terms in more than half the documents
    doc_len = np.asarray(counts.sum(axis=1)).ravel()
    avgdl = doc_len.mean() if n_docs else 1.0
    norm = k1 * (1 - b + b * doc_len / avgdl)
    rows = np.repeat(np.arange(n_docs), np.diff(counts.indptr))
    tf = counts.data
    weights = counts.copy()
    weights.data = idf[counts.indices] * tf * (k1 + 1) / (tf + norm[rows])
    return weights


def bm25_neighbors(
    texts: Sequence[str],
    k: int,
    tokenizer: Callable[[str], list[str]] = default_tokenize,
    k1: float = 1.5,
    b: float = 0.75,
    epsilon: float = 0.25,
    least_similar: bool = False,
    block_bytes: int = BLOCK_BYTES,
    rows: tuple[int, int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The k best BM25 partners of every text (itself excluded), best first.

    Each text is the query and the whole pool the corpus. Returns `(indices,
    scores)`, arrays of shape (N, k). With `least_similar` the k *lowest*
    scoring partners are returned (hard negatives), lowest first. Memory:
    the sparse matrices plus one dense block of about `block_bytes`.

    `rows=(start, stop)` queries only those texts (the corpus is still the
    whole pool) and returns their stop - start rows: a shard of a large pool.
    With `start` a multiple of `block_rows(N, 8, block_bytes)` every query block
    is the one the whole-pool call forms, so the rows are bit for bit those
    of the whole-pool call (candidates.shards relies on this).
    """
    n = len(texts)
    if not 0 < k < n:
        raise ValueError(f"k must be between 1 and {n - 1} for {n} texts, got {k}")
    first, last = rows if rows is not None else (0, n)
    if not 0 <= first <= last <= n:
        raise ValueError(f"rows {rows} are not a range of the {n} texts")
    counts = term_counts([tokenizer(t) for t in texts])
    weights_t = bm25_weights(counts, k1, b, epsilon).T.tocsr()  # V x N
    # Terms in many documents make the product dense: they go through BLAS as
    # dense matrices (worth it above ~1/8 of the documents), the long tail
    # through a sparse product. The sum is split, not approximated.
    df = np.diff(weights_t.indptr)
    budget = max(0, min(512, (256 * 2**20) // (8 * n)))
    frequent = np.argsort(-df, kind="stable")[:budget]
    frequent = np.sort(frequent[df[frequent] > max(8, n // FREQUENT_SHARE)])
    is_rare = np.ones(counts.shape[1], dtype=bool)
    is_rare[frequent] = False
    dense_weights = weights_t[frequent].toarray()  # F x N
    rare_weights = weights_t[np.flatnonzero(is_rare)]
    counts_csc = counts.tocsc()
    counts_frequent = counts_csc[:, frequent].tocsr()
    counts_rare = counts_csc[:, np.flatnonzero(is_rare)].tocsr()
    block = block_rows(n, 8, block_bytes)  # float64 scores
    indices = np.empty((last - first, k), dtype=np.int64)
    scores = np.empty((last - first, k), dtype=np.float64)
    for start in range(first, last, block):
        stop = min(last, start + block)
        dense = counts_frequent[start:stop].toarray() @ dense_weights if len(frequent) else np.zeros((stop - start, n))
        rare = (counts_rare[start:stop] @ rare_weights).tocoo()
        dense[rare.row, rare.col] += rare.data  # coo from a product has no duplicate coordinates
        rows = np.arange(stop - start)
        dense[rows, rows + start] = np.inf if least_similar else -np.inf  # never the text itself
        top = torch.topk(torch.from_numpy(dense), k, dim=1, largest=not least_similar, sorted=True)
        indices[start - first:stop - first] = top.indices.numpy()
        scores[start - first:stop - first] = top.values.numpy()
    return indices, scores
