"""Stages `sample_pairs` (`candidates`) and `sample_pairs_shard` (`candidate_shard`): candidate silver pairs.

Neighbour strategies (random, BM25, semantic search and their least-similar
variants) emit `top_k` partners per sentence. The KDE strategies emit a
candidate pool here (random, plus semantic search for iterative KDE) that
`label_pairs` thins out by teacher score.

Each strategy is one or more *passes*: a partner array with one row per pool
sentence. With `candidates.shards: 1` one job computes every row of every pass.
With N > 1 the pool and its semantic index come from a `pool_index` job,
N `candidate_shard` jobs compute disjoint row ranges of every pass, and the
`candidates` job merges them; both ways end in `write_candidates`, so the
merged table is the unsharded one row for row (tests/test_shards.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..store.artifacts import artifact_dir, read_json, write_json
from ..data import DataError
from ..models import resolve_device
from ..params import read_params
from ..stages.candidates import CandidateShardParams, CandidatesParams, PoolIndexParams
from ..sampling import bm25 as bm25_module
from ..sampling import semantic as semantic_module
from ..sampling.bm25 import block_rows, bm25_neighbors
from ..sampling.pool import random_partners
from ..sampling.semantic import build_index, normalised, search_rows
from ..sampling.shards import gold_keys, select_pairs, shard_rows
from ..scheduling.progress import warn
from .common import model_path
from ..data.pool import pool_too_small, read_split, target_pool

log = logging.getLogger(__name__)

SEMANTIC = ("semantic_search", "semantic_search_least", "iterative_kde")
WRITE_ROWS = 1 << 18  # rows per parquet row group of candidates.parquet (labelling streams them)


def embed_pool(pool: list[str], params: CandidatesParams | PoolIndexParams, spec: dict, device: str) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    if params.semantic_model in ("finetuned", "pretrained_stage"):  # a planned stage's encoder
        path = str(Path(spec["inputs"]["encoder"]) / "model")
    else:
        path = model_path(params, params.model if params.semantic_model == "pretrained" else params.semantic_model)
    model = SentenceTransformer(path, device=device)
    model.max_seq_length = params.max_length
    log.info("encoding %d pool sentences with %s", len(pool), path)
    return model.encode(pool, batch_size=params.batch_size, convert_to_numpy=True, normalize_embeddings=True,
                        show_progress_bar=True)


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
    bm25 = block_rows(n, bm25_module.BLOCK_BYTES)
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


INDEX_FILES = {False: "index.faiss", True: "index_least.faiss"}


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

    held_back = Path(data) / "unlabeled_pairs.parquet"
    return pd.read_parquet(held_back) if held_back.is_file() else train


def _pool(data: str, params: CandidatesParams) -> tuple[list[str], int]:
    pool, _, removed = target_pool(data, params.pool, params.exclude_eval_sentences)
    problem = pool_too_small(params.to_json(), len(pool))
    if problem:  # before any encoding; the plan catches it too once the data artifact exists
        raise DataError(problem)
    return pool, removed


def _finish(tmp: Path, params: CandidatesParams, pool: list[str], removed: int, pass_rows: dict, train, device: str,
            data: str | Path) -> dict:
    gold = gold_keys(pool, zip(train["sentence1"], train["sentence2"]))
    counts, excluded = write_candidates(tmp / "candidates.parquet", pool, params.strategies, pass_rows,
                                        target_pairs_of(data, train), gold)
    found = small_silver(params, len(pool), removed, counts)
    metrics = {"pool_sentences": len(pool), "eval_sentences_removed_from_pool": removed,
               "candidates": counts, "excluded": excluded, "device": device, "warnings": found}
    write_json(tmp / "metrics.json", metrics)
    for message in found:
        warn(message)
    return metrics


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
        found.append(f"{removed} of the {pool + removed} pool sentences ({100 * removed // (pool + removed)} %) occur in "
                     "dev/test pairs and were removed from the silver pool (candidates.exclude_eval_sentences): the "
                     "splits share many sentences")
    if pool < SMALL_POOL:
        found.append(f"the silver pool holds only {pool} sentence(s) (below {SMALL_POOL}): {why}; add unlabeled "
                     "text (the dataset's `unlabeled` file, candidates.pool: train+unlabeled) for more silver pairs")
    silver = sum(n for strategy, n in counts.items() if strategy != "none")
    if any(s != "none" for s in params.strategies) and silver < SMALL_SILVER:
        found.append(f"only {silver} silver pair(s) were drawn (below {SMALL_SILVER}; pool of {pool} sentence(s), "
                     f"top_k {params.top_k}, pairs already in the gold train split excluded): the students learn "
                     "from almost no silver data")
    return found


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    """Stage `candidates`: the whole pool in this job, or (candidates.shards > 1) the merge of the shards."""
    params = read_params(CandidatesParams, spec)
    data = spec["inputs"]["data"]
    train = read_split(data, "train")
    if params.shards > 1:
        return _merge(spec, params, out, train, force)
    pool, removed = _pool(data, params)
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        log.info("pool: %d unique train sentences (%d dev/test sentences removed)", len(pool), removed)
        x = None
        if set(params.strategies) & set(SEMANTIC):
            x = normalised(embed_pool(pool, params, spec, device))
        searcher = Searcher(pool, x, params.exact)
        pass_rows = {s: [searcher.rows(p, (0, len(pool))) for p in passes(s, params)] for s in params.strategies}
        return _finish(tmp, params, pool, removed, pass_rows, train, device, data)


def read_pool(index_dir: str | Path) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(Path(index_dir) / "pool.parquet", columns=["sentence"]).column(0).to_pylist()


def run_shard(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    """Stage `candidate_shard`: rows `shard_rows(...)` of every pass, against the shared pool index."""
    params = read_params(CandidateShardParams, spec)
    index_dir = Path(spec["inputs"]["index"])
    pool = read_pool(index_dir)
    n, shard, shards = len(pool), params.shard, params.shards
    problem = pool_too_small(params.to_json(), n)
    if problem:
        raise DataError(problem)
    x = None
    if (index_dir / "embeddings.npy").is_file():
        x = np.load(index_dir / "embeddings.npy", mmap_mode="r", allow_pickle=False)  # only its rows are read
    searcher = Searcher(pool, x, index_dir=index_dir)
    with artifact_dir(out, spec, force) as tmp:
        ranges = {}
        for strategy in params.strategies:
            for number, p in enumerate(passes(strategy, params)):
                rows = shard_rows(n, shards, shard, block_unit(p["kind"], n))
                name = f"{strategy}.{number}"
                np.save(tmp / f"{name}.npy", searcher.rows(p, rows) if rows[1] > rows[0]
                        else np.empty((0, p["k"]), dtype=np.int64), allow_pickle=False)
                ranges[name] = list(rows)
                log.info("shard %d/%d, %s pass %d: rows %d-%d of %d", shard + 1, shards, strategy, number, *rows, n)
        metrics = {"shard": shard, "shards": shards, "pool_sentences": n, "rows": ranges}
        write_json(tmp / "metrics.json", metrics)
    return metrics


def _merge(spec: dict, params: CandidatesParams, out: str | Path, train, force: bool) -> dict:
    """The shards' rows of every pass, checked to tile the pool exactly, through the same `write_candidates`."""
    index_dir = spec["inputs"]["index"]
    pool = read_pool(index_dir)
    removed = read_json(Path(index_dir) / "metrics.json")["eval_sentences_removed_from_pool"]
    shard_dirs = [Path(spec["inputs"][f"shard_{s}"]) for s in range(params.shards)]
    with artifact_dir(out, spec, force) as tmp:
        pass_rows = {}
        for strategy in params.strategies:
            pass_rows[strategy] = []
            for number, _ in enumerate(passes(strategy, params)):
                name, parts, next_row = f"{strategy}.{number}", [], 0
                for shard_dir in shard_dirs:
                    start, stop = read_json(shard_dir / "metrics.json")["rows"][name]
                    if start != next_row:
                        raise DataError(f"{shard_dir}: {name} covers rows {start}-{stop}, expected from {next_row}")
                    parts.append(np.load(shard_dir / f"{name}.npy", allow_pickle=False))
                    next_row = stop
                if next_row != len(pool):
                    raise DataError(f"the shards of {name} end at row {next_row} of {len(pool)}")
                pass_rows[strategy].append(np.concatenate(parts))
        log.info("merged %d shards over %d pool sentences", len(shard_dirs), len(pool))
        return _finish(tmp, params, pool, removed, pass_rows, train, "cpu", spec["inputs"]["data"])  # runs no model
