"""Candidate silver pairs from a pool of unique sentences, with the exclusion rules of methods.md §4.

Pool: the unique (normalised) sentences of the target train split, sorted, so
indices do not depend on input order or on PYTHONHASHSEED. Never emitted: a
sentence paired with itself, a pair that is already gold (either order), the
same pair twice (either order), a pair with a dev/test sentence (unless
allowed). Every dropped pair is counted by reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..data.tables import normalise_text, sentence_pool  # noqa: F401 - sentence_pool is part of this API

NEIGHBOUR_STRATEGIES = ("bm25", "bm25_least", "semantic_search", "semantic_search_least")
SELECTION_STRATEGIES = ("kde", "iterative_kde")
STRATEGIES = ("none", "random", *NEIGHBOUR_STRATEGIES, *SELECTION_STRATEGIES)


def pair_key(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def random_partners(n: int, k: int, seed: int, rows: tuple[int, int] | None = None) -> np.ndarray:
    """k distinct random partners (never itself) for each of n items: shape (n, k).

    `rows=(start, stop)` returns only those rows (a shard), exactly as in the
    full array: one generator draws for every item in order, so the draws of
    the rows before `start` are made and dropped (O(stop) time, O(rows) memory).
    """
    if not 0 < k < n:
        raise ValueError(f"need 0 < k < pool size, got k={k} for {n} sentences")
    first, last = rows if rows is not None else (0, n)
    rng = np.random.default_rng(seed)
    out = np.empty((last - first, k), dtype=np.int64)
    for i in range(last):
        choice = rng.choice(n - 1, size=k, replace=False)
        if i >= first:
            out[i - first] = choice + (choice >= i)  # skip i itself
    return out


class PairCollector:
    """Accumulates candidate pairs and applies the exclusion rules, counting what it drops."""

    def __init__(self, pool: list[str], gold_pairs: Iterable[tuple[str, str]], eval_sentences: set[str],
                 exclude_eval: bool = True):
        self.pool = pool
        self.gold = {pair_key(normalise_text(a), normalise_text(b)) for a, b in gold_pairs}
        self.eval_sentences = eval_sentences if exclude_eval else set()
        self.seen: set[tuple[str, str]] = set()
        self.rows: list[tuple[str, str, str]] = []
        self.excluded: Counter = Counter()

    def add_neighbours(self, strategy: str, neighbours: np.ndarray) -> None:
        """Add (i, neighbours[i, j]) for every row i, in row order."""
        for i, row in enumerate(neighbours):
            for j in row:
                self.add(strategy, self.pool[i], self.pool[int(j)])

    def add(self, strategy: str, a: str, b: str) -> None:
        if a == b:
            self.excluded["self_pair"] += 1
            return
        key = pair_key(a, b)
        if key in self.gold:
            self.excluded["gold_pair"] += 1
        elif a in self.eval_sentences or b in self.eval_sentences:
            self.excluded["eval_sentence"] += 1
        elif key in self.seen:
            self.excluded["duplicate"] += 1
        else:
            self.seen.add(key)
            self.rows.append((a, b, strategy))

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=["sentence1", "sentence2", "strategy"])
