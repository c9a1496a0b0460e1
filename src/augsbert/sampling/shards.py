"""Candidate pairs of a large pool in shards: row ranges, exclusion and deduplication on pool indices.

A neighbour strategy gives every pool sentence i its partners j (one array
row per sentence, a "pass"); `PairCollector` (sampling/pool.py) states the
rules that turn passes into candidate pairs. `select_pairs` applies the same
rules to index arrays at once, so a pool of millions of sentences never turns
into millions of Python tuples, and the passes of different shards can be
merged afterwards into exactly the pairs one whole-pool run emits:

* a self pair, a gold pair (either order) is dropped, counted by reason;
* the same unordered pair a second time is dropped as `duplicate`: the first
  occurrence in (pass, row, partner) order wins, which is the order in which
  `PairCollector.add_neighbours` sees them. Gold status does not depend on
  the order, so a duplicate's first occurrence is always a kept pair.

Dev/test sentences never reach this point: `target_pool` removes them from
the pool when `exclude_eval_sentences` is on, and they are allowed when off.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from ..data.tables import normalise_text


def shard_rows(n: int, shards: int, shard: int, unit: int = 1) -> tuple[int, int]:
    """Rows `[start, stop)` of shard `shard` of `shards` over n rows, cut at multiples of `unit`.

    The units (query blocks of the search) are split as evenly as possible;
    cutting only at block boundaries lets each shard form the very blocks a
    whole-pool search forms. Later shards may be empty when n is small.
    """
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} is not one of 0..{shards - 1}")
    units = -(-n // unit)
    per = -(-units // shards)
    return min(n, shard * per * unit), min(n, (shard + 1) * per * unit)


def pool_positions(pool: Sequence[str], texts: Iterable[str]) -> dict[str, int]:
    """Index in the sorted `pool` of each of `texts` found there (by binary search, no pool-sized dict)."""
    found = {}
    for text in texts:
        i = bisect.bisect_left(pool, text)
        if i < len(pool) and pool[i] == text:
            found[text] = i
    return found


def gold_keys(pool: Sequence[str], gold_pairs: Iterable[tuple[str, str]]) -> np.ndarray:
    """Sorted unordered keys `min * n + max` of the gold pairs whose two sentences are both in the pool."""
    pairs = [(normalise_text(a), normalise_text(b)) for a, b in gold_pairs]
    where = pool_positions(pool, {t for p in pairs for t in p})
    n = len(pool)
    keys = [min(where[a], where[b]) * n + max(where[a], where[b]) for a, b in pairs if a in where and b in where]
    return np.unique(np.asarray(keys, dtype=np.int64))


def select_pairs(passes: Sequence[np.ndarray], n: int, gold: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict]:
    """The kept pairs `(i, j)` of a strategy's passes, in emission order, and what was dropped by reason.

    `passes`: arrays of shape (n, k_p), row i = partners of sentence i; `gold`
    from `gold_keys`. Same result as feeding the passes to one PairCollector.
    """
    if n * n >= 2**63:
        raise ValueError(f"a pool of {n} sentences is too large for 64-bit pair keys")
    i = np.concatenate([np.repeat(np.arange(len(p), dtype=np.int64), p.shape[1]) for p in passes])
    j = np.concatenate([np.asarray(p, dtype=np.int64).ravel() for p in passes])
    self_pair = i == j
    key = np.minimum(i, j) * n + np.maximum(i, j)
    gold_pair = ~self_pair & np.isin(key, gold)
    candidate = np.flatnonzero(~(self_pair | gold_pair))
    _, first = np.unique(key[candidate], return_index=True)
    kept = candidate[np.sort(first)]
    excluded = Counter({"self_pair": int(self_pair.sum()), "gold_pair": int(gold_pair.sum()),
                        "duplicate": len(candidate) - len(kept)})
    return i[kept], j[kept], {reason: count for reason, count in excluded.items() if count}
