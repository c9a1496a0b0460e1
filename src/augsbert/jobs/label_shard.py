"""Stage `label_shard`: teacher scores of whole READ_CHUNKs of the merged candidates (rows `shard_rows(...)`),
written as they come; `labels` merges the shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data import tables
from ..models import resolve_device
from ..models.teacher import Teacher
from ..params import read_params
from ..sampling.shards import shard_rows
from ..stages.labels import LabelShardParams
from ..store.artifacts import artifact_dir, write_json


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = read_params(LabelShardParams, spec)
    path = Path(spec["inputs"]["candidates"]) / "candidates.parquet"
    count = tables.candidate_count(path)
    start, stop = shard_rows(count, params.shards, params.shard, tables.READ_CHUNK)
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        teacher = Teacher(spec, params, device)
        # scores go to disk chunk by chunk (a memory map): the job holds one chunk of texts, no score array
        scores = np.lib.format.open_memmap(tmp / "scores.npy", mode="w+", dtype=np.float64, shape=(stop - start,))
        teacher.score_rows(path, start, stop, scores)
        scores.flush()
        del scores
        metrics = {"device": device, "shard": params.shard, "shards": params.shards, "rows": [start, stop],
                   "candidates": count}
        write_json(tmp / "metrics.json", metrics)
    return metrics
