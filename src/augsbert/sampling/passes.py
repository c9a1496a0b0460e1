"""The candidate search's passes: a partner array with one row per pool sentence (`top_k` partners).

Neighbour strategies (random, BM25, semantic search and their least-similar variants) are one pass each; the
KDE strategies' candidate pools are a random pass, plus a semantic one for iterative KDE (`passes`). A
`Searcher` computes any row range of a pass over one pool (its semantic indexes built or read once); one
job computes every row (`all_passes`), or N shard jobs disjoint row ranges cut at multiples of the pass's
query block (`shard_passes`, `block_unit`) that the merge checks to tile the pool (`merged_passes`): the
merged rows are the unsharded ones (tests/test_shards.py). The semantic passes take the pool's embeddings: the job
encodes the pool with the encoder `pool_encoder` names.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..data import DataError
from ..search import block_rows
from ..store.artifacts import read_json
from ..store.model_refs import model_path
from . import bm25 as bm25_module
from . import semantic as semantic_module
from .bm25 import bm25_neighbors
from .pool import random_partners
from .semantic import build_index, search_rows
from .shards import shard_rows

if TYPE_CHECKING:  # annotations only: the stage's options classes sit above sampling
    from ..stages.candidates import CandidatesParams, PoolIndexParams

log = logging.getLogger(__name__)

SEMANTIC = ("semantic_search", "semantic_search_least", "iterative_kde")  # strategies that need embeddings


def pool_encoder(params: CandidatesParams | PoolIndexParams, spec: dict) -> str:
    """The Bi-Encoder whose embeddings of the pool the semantic passes search: a planned stage's model
    (`semantic_model: finetuned | pretrained_stage`, the `encoder` input), else the base or named model."""
    if params.semantic_model in ("finetuned", "pretrained_stage"):  # a planned stage's encoder
        return str(Path(spec["inputs"]["encoder"]) / "model")
    return model_path(params, params.model if params.semantic_model == "pretrained" else params.semantic_model)


def passes(strategy: str, params: CandidatesParams) -> list[dict]:
    """The partner arrays a strategy is made of, in the order PairCollector sees them."""
    k, seed, pool = params.top_k, params.seed, params.candidate_pool
    random_k, semantic_k = (pool.random, pool.semantic_search) if pool else (None, None)
    return {
        "random": [{"kind": "random", "k": k, "seed": seed}],
        "bm25": [{"kind": "bm25", "k": k}],
        "bm25_least": [{"kind": "bm25_least", "k": k}],
        "semantic_search": [{"kind": "semantic", "k": k}],
        "semantic_search_least": [{"kind": "semantic_least", "k": k}],
        "kde": [{"kind": "random", "k": random_k, "seed": seed + 1}],
        "iterative_kde": [{"kind": "random", "k": random_k, "seed": seed + 2},
                          {"kind": "semantic", "k": semantic_k}],
        "target_pairs": [],  # the target's train pairs, taken whole
    }[strategy]


def block_unit(kind: str, n: int) -> int:
    """Rows per query block of a pass kind: shards are cut at multiples of it (see `shard_rows`).

    Read from the sampling modules at call time, as `Searcher.rows` reads them: one block size for both.
    """
    bm25 = block_rows(n, 8, bm25_module.BLOCK_BYTES)
    return {"random": 1, "bm25": bm25, "bm25_least": bm25}.get(kind, semantic_module.QUERY_BLOCK)


class Searcher:
    """Computes rows of passes over one pool; semantic indexes are built (or read) once per kind."""

    def __init__(self, pool: list[str], x: np.ndarray | None = None, exact: bool = True,
                 index_dir: Path | None = None):
        self.pool, self.x, self.exact, self.index_dir = pool, x, exact, index_dir
        self.indexes = {}

    def index(self, least: bool):
        if least not in self.indexes:
            name = INDEX_FILES[least]
            if self.index_dir is not None:
                import faiss

                self.indexes[least] = faiss.read_index(str(self.index_dir / name))
            else:
                self.indexes[least] = build_index(self.x, self.exact, least)
        return self.indexes[least]

    def rows(self, spec: dict, rows: tuple[int, int]) -> np.ndarray:
        n, kind, k = len(self.pool), spec["kind"], spec["k"]
        if kind == "random":
            return random_partners(n, k, spec["seed"], rows=rows)
        if kind.startswith("bm25"):
            return bm25_neighbors(self.pool, k, least_similar=kind.endswith("_least"), rows=rows,
                                  block_bytes=bm25_module.BLOCK_BYTES)[0]
        least = kind.endswith("_least")
        return search_rows(self.index(least), self.x, k, rows=rows, least_similar=least,
                           query_block=semantic_module.QUERY_BLOCK)[0]


INDEX_FILES = {False: "index.faiss", True: "index_least.faiss"}  # pool_index's faiss files


def read_pool(index_dir: str | Path) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(Path(index_dir) / "pool.parquet", columns=["sentence"]).column(0).to_pylist()


def all_passes(searcher: Searcher, strategies: list[str], params: CandidatesParams) -> dict[str, list[np.ndarray]]:
    """Every row of every pass of `strategies` (one job, no shards)."""
    whole = (0, len(searcher.pool))
    return {s: [searcher.rows(p, whole) for p in passes(s, params)] for s in strategies}


def shard_passes(searcher: Searcher, strategies: list[str], params: CandidatesParams, shard: int,
                 shards: int) -> dict[str, tuple[tuple[int, int], np.ndarray]]:
    """Rows `shard_rows(...)` of every pass of `strategies`: `{"<strategy>.<pass>": ((start, stop), rows)}`."""
    n, found = len(searcher.pool), {}
    for strategy in strategies:
        for number, p in enumerate(passes(strategy, params)):
            rows = shard_rows(n, shards, shard, block_unit(p["kind"], n))
            found[f"{strategy}.{number}"] = rows, (searcher.rows(p, rows) if rows[1] > rows[0]
                                                  else np.empty((0, p["k"]), dtype=np.int64))
            log.info("shard %d/%d, %s pass %d: rows %d-%d of %d", shard + 1, shards, strategy, number, *rows, n)
    return found


def merged_passes(shard_dirs: list[Path], strategies: list[str], params: CandidatesParams,
                  n: int) -> dict[str, list[np.ndarray]]:
    """The shards' rows of every pass (each shard's `<strategy>.<pass>.npy` and its `rows` in metrics.json),
    checked to tile the `n` pool rows exactly."""
    pass_rows = {}
    for strategy in strategies:
        pass_rows[strategy] = []
        for number, _ in enumerate(passes(strategy, params)):
            name, parts, next_row = f"{strategy}.{number}", [], 0
            for shard_dir in shard_dirs:
                start, stop = read_json(shard_dir / "metrics.json")["rows"][name]
                if start != next_row:
                    raise DataError(f"{shard_dir}: {name} covers rows {start}-{stop}, expected from {next_row}")
                parts.append(np.load(shard_dir / f"{name}.npy", allow_pickle=False))
                next_row = stop
            if next_row != n:
                raise DataError(f"the shards of {name} end at row {next_row} of {n}")
            pass_rows[strategy].append(np.concatenate(parts))
    log.info("merged %d shards over %d pool sentences", len(shard_dirs), n)
    return pass_rows
