"""The candidates table: every strategy's passes turned into pairs (exclusion rules applied) and written to
candidates.parquet in row groups (`write_candidates`), and the warnings of a small silver pool or set."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..data.pool import UNLABELED_PAIRS
from .shards import select_pairs

if TYPE_CHECKING:  # annotations only: the stage's options classes sit above sampling
    from ..stages.candidates import CandidatesParams

log = logging.getLogger(__name__)

WRITE_ROWS = 1 << 18  # rows per parquet row group of candidates.parquet (labelling streams them)


def write_candidates(path: Path, pool: list[str], strategies: list[str], pass_rows: dict[str, list[np.ndarray]],
                     train, gold) -> tuple[dict, dict]:
    """Apply the exclusion rules to every strategy's passes and write candidates.parquet, in row groups.

    `train`: the pairs `target_pairs` takes whole (`target_pairs_of`). Returns the candidate count and the
    exclusions of each strategy.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("sentence1", pa.string()), ("sentence2", pa.string()), ("strategy", pa.string())])
    texts = pa.array(pool, pa.string())
    counts, excluded = {}, {}
    with pq.ParquetWriter(path, schema) as writer:
        for strategy in strategies:
            if strategy == "target_pairs":  # the target's unlabelled train pairs (transfer, or gold_fraction)
                table = pa.table({"sentence1": pa.array(train["sentence1"].tolist(), pa.string()),
                                  "sentence2": pa.array(train["sentence2"].tolist(), pa.string()),
                                  "strategy": pa.array([strategy] * len(train), pa.string())}, schema=schema)
                writer.write_table(table, row_group_size=WRITE_ROWS)
                counts[strategy], excluded[strategy] = len(train), {}
                log.info("%s: %d target train pairs (labels not used)", strategy, len(train))
                continue
            i, j, dropped = select_pairs(pass_rows[strategy], len(pool), gold)
            for start in range(0, len(i), WRITE_ROWS):
                stop = min(len(i), start + WRITE_ROWS)
                writer.write_table(pa.table({
                    "sentence1": texts.take(pa.array(i[start:stop])), "sentence2": texts.take(pa.array(j[start:stop])),
                    "strategy": pa.array([strategy] * (stop - start), pa.string())}, schema=schema))
            counts[strategy], excluded[strategy] = len(i), dropped
            log.info("%s: %d candidate pairs (excluded: %s)", strategy, len(i), dropped or "none")
    return counts, excluded


def target_pairs_of(data: str | Path, train):
    """The pairs strategy `target_pairs` takes: a few-label dataset's unlabelled train pairs (`gold_fraction`,
    augsbert.jobs.gold_subset), else the target's train pairs (domain transfer: their labels are not used)."""
    import pandas as pd

    held_back = Path(data) / UNLABELED_PAIRS
    return pd.read_parquet(held_back) if held_back.is_file() else train


# Below these a run still works, but its students learn from almost no silver data; said on the console, since
# the counts are otherwise only in the candidates log (docs/guide/own-data.md, "The silver pool")
SMALL_POOL = 100  # sentences
SMALL_SILVER = 100  # candidate pairs of the sampling strategies together
SHRUNK = 0.5  # a pool that lost this share of its sentences to the dev/test exclusion: said as well


def small_silver(params: CandidatesParams, pool: int, removed: int, counts: dict[str, int]) -> list[str]:
    """Warnings for a silver pool or silver set below SMALL_POOL / SMALL_SILVER, with the count and why."""
    found = []
    why = (f"{removed} sentence(s) of dev/test pairs were removed from it (candidates.exclude_eval_sentences: no test "
           "sentence is trained on; a random split shares sentences across splits)" if removed else
           f"candidates.pool is {params.pool}")
    if removed and removed >= SHRUNK * (pool + removed) and pool >= SMALL_POOL:  # (a small pool says why)
        more = ("set candidates.pool: train+unlabeled (the train pairs left unlabelled, with gold_fraction < 1, and "
                "the dataset's `unlabeled` file) and give the `unlabeled` file sentences that occur in no dev/test "
                "pair" if params.pool == "train" else
                "give the dataset's `unlabeled` file sentences that occur in no dev/test pair")
        found.append(f"{removed} of the {pool + removed} pool sentences ({100 * removed // (pool + removed)} %) occur in "
                     "dev/test pairs and were removed from the silver pool (candidates.exclude_eval_sentences): the "
                     f"splits share many sentences; for a larger pool, {more} (the test-free sentences: none is "
                     "removed)")
    if pool < SMALL_POOL:
        found.append(f"the silver pool holds only {pool} sentence(s) (below {SMALL_POOL}): {why}; add unlabeled "
                     "text (the dataset's `unlabeled` file, candidates.pool: train+unlabeled) for more silver pairs")
    silver = sum(n for strategy, n in counts.items() if strategy != "none")
    if any(s != "none" for s in params.strategies) and silver < SMALL_SILVER:
        found.append(f"only {silver} silver pair(s) were drawn (below {SMALL_SILVER}; pool of {pool} sentence(s), "
                     f"top_k {params.top_k}, pairs already in the gold train split excluded): the students learn "
                     "from almost no silver data")
    return found
