"""Stage `query_shard` (`queries.shards` > 1): the generated texts of one range of passages, cut at multiples
of the generation batch (so each shard forms the very batches, and so the very seeds, of a run without
shards); `queries` merges the shards in order."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..models import resolve_device
from ..models.query_generation import generate, passages_to_generate
from ..params import read_params
from ..sampling.shards import shard_rows
from ..stages.queries import INVERSE_CLOZE, QueryShardParams
from ..store.artifacts import artifact_dir, write_json

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    """`queries.shards` > 1: the generated texts of one range of passages (`generated.parquet`: passage row,
    its texts); the `queries` job merges the shards in order."""
    params, inputs = read_params(QueryShardParams, spec), spec["inputs"]
    _, sources, per_passage = passages_to_generate(params, inputs["data"])
    start, stop = shard_rows(len(sources), params.shards, params.shard, unit=params.batch_size)
    device = resolve_device(device) if params.generator != INVERSE_CLOZE else "cpu"
    with artifact_dir(out, spec, force) as tmp:
        log.info("query shard %d of %d: passages %d..%d of %d", params.shard + 1, params.shards, start, stop,
                 len(sources))
        texts = generate(params, sources["passage"].iloc[start:stop].tolist(), per_passage, device, offset=start)
        pd.DataFrame({"row": np.arange(start, stop), "texts": texts}).to_parquet(tmp / "generated.parquet",
                                                                                 index=False)
        metrics = {"device": device, "rows": [start, stop], "passages": stop - start,
                   "queries_per_passage": per_passage}
        write_json(tmp / "metrics.json", metrics)
    return metrics
