"""Stage `candidate_shard`: rows `shard_rows(...)` of every pass (`augsbert.sampling.passes.shard_passes`),
against the shared pool index of the `pool_index` job; `candidates` merges the shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data import DataError
from ..data.pool import pool_too_small
from ..params import read_params
from ..sampling.passes import Searcher, read_pool, shard_passes
from ..stages.candidates import CandidateShardParams
from ..store.artifacts import artifact_dir, write_json


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = read_params(CandidateShardParams, spec)
    index_dir = Path(spec["inputs"]["index"])
    pool = read_pool(index_dir)
    problem = pool_too_small(params.to_json(), len(pool))
    if problem:
        raise DataError(problem)
    x = None
    if (index_dir / "embeddings.npy").is_file():
        x = np.load(index_dir / "embeddings.npy", mmap_mode="r", allow_pickle=False)  # only its rows are read
    searcher = Searcher(pool, x, index_dir=index_dir)
    with artifact_dir(out, spec, force) as tmp:
        ranges = {}
        for name, (rows, partners) in shard_passes(searcher, params.strategies, params, params.shard,
                                                   params.shards).items():
            np.save(tmp / f"{name}.npy", partners, allow_pickle=False)
            ranges[name] = list(rows)
        metrics = {"shard": params.shard, "shards": params.shards, "pool_sentences": len(pool), "rows": ranges}
        write_json(tmp / "metrics.json", metrics)
    return metrics
