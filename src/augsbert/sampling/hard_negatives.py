"""Hard negatives of (query, positive) pairs from a passage corpus: retrievers, rank range, margins, a filter.

The selection rule is sentence-transformers' `util.mine_hard_negatives` (v6,
`sampling_strategy="top"`), applied to the candidates of any retriever:
1. a retriever ranks `range_max + max_positives` passages per query (BM25 or a Bi-Encoder's cosine);
2. with a Cross-Encoder, its scores replace the retriever's for those candidates and the positives;
3. the query's positives are removed; so is every candidate with
   `score + absolute_margin > min positive score`, with
   `score > min positive - |min positive| * relative_margin`, above `max_score` or below `min_score`;
4. the survivors are sorted by score, the first `range_min` skipped, the next `num_negatives` kept
   (within the top `range_max` survivors).
The library's miner is dense-only (it embeds with its own model and cannot take BM25's candidates) and
drops a query with fewer than `num_negatives` survivors; here one rule serves every retriever, and
tests/test_negatives.py checks it equal to the library's output for a Bi-Encoder on the same input.

Several retrievers (GPL mines with two Bi-Encoders, BM25 optional): each retriever's list is selected
as above, then the lists are interleaved in retriever order without repeats, up to `num_negatives`
(`mine(union=True)`: every survivor of each retriever's window, all of them, GPL's candidate list).

The rule is the `negatives` section's options (`stages.negatives.NegativesOptions`: the fields
`num_negatives`, `range_min`, `range_max`, the margins, `max_score`, `min_score` and `cross_encoder`,
whose scores then replace the retriever's), so each of its settings is declared once. The search keeps
each block's top k only (augsbert.search): memory beyond the embeddings is the (queries, k) result.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..search import FAISS_FROM, best_of_block, block_rows, top_k
from .bm25 import bm25_weights, default_tokenize, term_counts

if TYPE_CHECKING:  # annotations only: the rule is the `negatives` section's options (stages/negatives.py)
    from ..stages.negatives import NegativesOptions


def window(rule: NegativesOptions, max_positives: int) -> int:
    """`range_max`, or as the library derives it when unset: more room when a filter may drop candidates (a
    margin, `max_score`, or `min_score` once a Cross-Encoder rescored them)."""
    if rule.range_max is not None:
        return rule.range_max
    filtered = any(v is not None for v in (rule.absolute_margin, rule.relative_margin, rule.max_score)) \
        or (bool(rule.cross_encoder) and rule.min_score is not None)
    return rule.range_min + rule.num_negatives * (10 if filtered else 1) + max_positives


def check(rule: NegativesOptions, max_positives: int) -> None:
    """The rule's ranks: `range_min` below the window, room in it for `num_negatives` (ValueError)."""
    size = window(rule, max_positives)
    if not 0 <= rule.range_min < size:
        raise ValueError(f"range_min must be >= 0 and below range_max, got {rule.range_min} and {size}")
    if rule.num_negatives < 1:
        raise ValueError(f"num_negatives must be at least 1, got {rule.num_negatives}")
    if rule.num_negatives > size - rule.range_min:
        raise ValueError(f"cannot mine {rule.num_negatives} negatives in ranks {rule.range_min}..{size}")


def select(indices: np.ndarray, scores: np.ndarray, positives: Sequence[set], positive_scores: np.ndarray,
           rule: NegativesOptions, max_positives: int) -> list[list[int]]:
    """Step 3-4 for each query: `indices`/`scores` its candidates (-1 = none), `positives` its positive
    passages, `positive_scores` the lowest score of its positives; returns the chosen passage indices."""
    size = window(rule, max_positives)
    scores = np.where(indices < 0, -np.inf, scores.astype(np.float64))
    out = []
    for row, (idx, s) in enumerate(zip(indices, scores)):
        s = s.copy()
        s[np.isin(idx, list(positives[row]))] = -np.inf
        low = positive_scores[row]
        if rule.absolute_margin is not None:
            s[s + rule.absolute_margin > low] = -np.inf
        if rule.relative_margin is not None:
            s[s > low - abs(low) * rule.relative_margin] = -np.inf
        if rule.max_score is not None:
            s[s > rule.max_score] = -np.inf
        if rule.min_score is not None:
            s[s < rule.min_score] = -np.inf
        order = np.argsort(-s, kind="stable")[:size][rule.range_min:rule.range_min + rule.num_negatives]
        out.append([int(idx[i]) for i in order if np.isfinite(s[i])])
    return out


def interleave(lists: Sequence[Sequence[int]], limit: int) -> list[int]:
    """The retrievers' lists merged rank by rank, in retriever order, each passage once, at most `limit`."""
    merged: dict[int, None] = {}
    for rank in range(max((len(x) for x in lists), default=0)):
        for chosen in lists:
            if rank < len(chosen):
                merged.setdefault(chosen[rank])
    return list(merged)[:limit]


# ------------------------------------------------------------------ retrievers
def bm25_scores(queries: Sequence[str], corpus: Sequence[str], k1: float = 1.5, b: float = 0.75,
                epsilon: float = 0.25, tokenizer: Callable[[str], list[str]] = default_tokenize):
    """A function giving the BM25Okapi scores of a block of queries against the corpus (rank_bm25's values:
    the corpus' statistics, each query token counted as often as it occurs)."""
    counts = term_counts([tokenizer(t) for t in [*corpus, *queries]])  # one vocabulary
    weights_t = bm25_weights(counts[: len(corpus)], k1, b, epsilon).T.tocsr()
    query_counts = counts[len(corpus):]

    def block(start: int, stop: int) -> np.ndarray:
        return np.asarray((query_counts[start:stop] @ weights_t).todense())

    return block


def cached_embeddings(model, texts: list[str], identity: str, cache_dir: str | Path | None,
                      batch_size: int = 64) -> np.ndarray:
    """Normalised embeddings of `texts`, read from / written to `cache_dir` under a hash of the model's
    identity and the texts (a rerun with other mining options encodes nothing again)."""
    hasher = hashlib.sha256(repr((identity, model.max_seq_length, len(texts))).encode())
    for text in texts:  # streamed: no second copy of a large corpus in memory
        hasher.update(text.encode("utf-8") + b"\x00")
    digest = hasher.hexdigest()[:32]
    path = Path(cache_dir) / f"{digest}.npy" if cache_dir else None
    if path is not None and path.is_file():
        return np.load(path, allow_pickle=False)
    emb = model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                       show_progress_bar=len(texts) > 1000).astype(np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as handle:
            np.save(handle, emb, allow_pickle=False)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the whole file or none
    return emb


# ------------------------------------------------------------------ mining
ScoreBlock = Callable[[int, int], np.ndarray]  # (start, stop) -> scores of those queries against every passage
Rescore = Callable[[Iterable[tuple[str, str]]], np.ndarray]  # (query, passage) pairs -> Cross-Encoder scores


def candidates_and_positives(block_scores: ScoreBlock, n_queries: int, n_corpus: int, k: int,
                             positives: Sequence[list[int]]) -> tuple[np.ndarray, np.ndarray, list[list[float]]]:
    """Top-k candidates of every query and the retriever's score of each of its positives. A dense retriever
    (`DenseScores`) searches exactly through augsbert.search (numpy blocks or faiss.knn); any other
    scores one block of queries at a time (about 64 MiB of scores), keeping each block's top k (no full sort)."""
    kk = min(k, n_corpus)
    if isinstance(block_scores, DenseScores):
        idx, sc = block_scores.top_k(kk)
        sc = sc.astype(np.float64)
        positive_scores = [[block_scores.pair(q, p) for p in positives[q]] for q in range(n_queries)]
    else:
        block = block_rows(n_corpus, 8)  # float64 scores
        indices, scores, positive_scores = [], [], []
        for start in range(0, n_queries, block):
            stop = min(n_queries, start + block)
            s = np.asarray(block_scores(start, stop), dtype=np.float64)
            top, top_scores = best_of_block(s, kk)
            indices.append(top)
            scores.append(top_scores)
            positive_scores += [[float(s[q - start, p]) for p in positives[q]] for q in range(start, stop)]
        idx, sc = np.concatenate(indices), np.concatenate(scores)
    if idx.shape[1] < k:  # a corpus smaller than the window: padded with "no candidate"
        idx = np.pad(idx, ((0, 0), (0, k - idx.shape[1])), constant_values=-1)
        sc = np.pad(sc, ((0, 0), (0, k - sc.shape[1])), constant_values=-np.inf)
    return idx, sc, positive_scores


def mine(pairs: Sequence[tuple[str, str]], corpus: Sequence[str], retrievers: dict[str, ScoreBlock | Callable],
         rule: NegativesOptions, rescore: Rescore | None = None, union: bool = False) -> dict:
    """Negatives of every (query, positive) pair. `retrievers`: name -> a function that, given the unique
    queries and the corpus, returns its ScoreBlock; `rescore`: the scores of `rule.cross_encoder`, given
    exactly when it names one. Returns the rows (query, positive, negatives) that got `num_negatives`
    negatives (`union`: every survivor of each retriever's window from `range_min` on, at least one), their
    negatives' indices in the returned corpus (`ids`), the count of the pairs that did not, and per retriever
    its chosen lists."""
    if bool(rule.cross_encoder) != (rescore is not None):
        raise ValueError("a Cross-Encoder's scores (`rescore`) are needed exactly when the rule names one "
                         f"(cross_encoder: {rule.cross_encoder!r})")
    corpus = list(dict.fromkeys([*corpus, *(p for _, p in pairs)]))  # every positive is a passage
    where = {text: i for i, text in enumerate(corpus)}
    queries = list(dict.fromkeys(q for q, _ in pairs))
    query_row = {q: i for i, q in enumerate(queries)}
    positives: list[list[int]] = [[] for _ in queries]
    for q, p in pairs:
        if where[p] not in positives[query_row[q]]:
            positives[query_row[q]].append(where[p])
    max_positives = max(len(p) for p in positives)
    if union:  # every survivor in each retriever's window is a candidate
        rule = rule.replace(num_negatives=window(rule, max_positives) - rule.range_min)
    check(rule, max_positives)
    k = window(rule, max_positives) + max_positives
    chosen: dict[str, list[list[int]]] = {}
    for name, make in retrievers.items():
        idx, sc, pos = candidates_and_positives(make(queries, corpus), len(queries), len(corpus), k, positives)
        if rescore is not None:  # the Cross-Encoder's scores replace the retriever's (library step)
            rows, cols = np.nonzero(idx >= 0)
            sc = np.full(idx.shape, -np.inf)
            sc[rows, cols] = rescore((queries[r], corpus[idx[r, c]]) for r, c in zip(rows, cols))  # streamed
            flat = rescore((queries[q], corpus[p]) for q in range(len(queries)) for p in positives[q])
            cuts = np.cumsum([0, *(len(p) for p in positives)])
            pos = [flat[cuts[q]:cuts[q + 1]].tolist() for q in range(len(queries))]
        lowest = np.array([min(p) for p in pos])
        chosen[name] = select(idx, sc, [set(p) for p in positives], lowest, rule, max_positives)
    rows, ids, short = [], [], 0
    for q, p in pairs:
        limit = rule.num_negatives * (len(retrievers) if union else 1)
        negatives = interleave([chosen[name][query_row[q]] for name in retrievers], limit)
        if len(negatives) < (1 if union else rule.num_negatives):
            short += 1
            continue
        rows.append((q, p, [corpus[i] for i in negatives]))
        ids.append(negatives)
    return {"rows": rows, "ids": ids, "short": short, "corpus": corpus, "queries": queries, "chosen": chosen}


class DenseScores:
    """Cosine of normalised embeddings (the library miner's similarity): a ScoreBlock (scores of a block of
    queries against every passage), an exact top-k search over all queries, and the score of one pair."""

    def __init__(self, query_embeddings: np.ndarray, corpus_embeddings: np.ndarray, faiss_from: int = FAISS_FROM):
        self.queries, self.corpus, self.faiss_from = query_embeddings, corpus_embeddings, faiss_from

    def __call__(self, start: int, stop: int) -> np.ndarray:
        return self.queries[start:stop] @ self.corpus.T

    def top_k(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        return top_k(self.queries, self.corpus, k, self.faiss_from)

    def pair(self, query: int, passage: int) -> float:
        return float(np.dot(self.queries[query].astype(np.float64), self.corpus[passage].astype(np.float64)))


def bi_encoder_scores(query_embeddings: np.ndarray, corpus_embeddings: np.ndarray,
                      faiss_from: int = FAISS_FROM) -> DenseScores:
    """Cosine of normalised embeddings (the library miner's similarity)."""
    return DenseScores(query_embeddings, corpus_embeddings, faiss_from)
