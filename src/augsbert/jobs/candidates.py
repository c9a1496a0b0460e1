"""Stage `candidates`: candidate silver pairs of every sampling strategy over the target's sentence pool.

The passes (`augsbert.sampling.passes`) are computed here over the whole pool, or, with `candidates.shards`
N > 1, merged from N `candidate_shard` jobs over a `pool_index` job's pool; both ways end in
`augsbert.sampling.candidate_table.write_candidates`, so the merged table is the unsharded one row for row.
The KDE strategies' candidate pools are thinned out by teacher score in `labels`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..data import DataError
from ..data.pool import pool_too_small, read_split, target_pool
from ..models import resolve_device
from ..models.architectures import embed_texts
from ..params import read_params
from ..sampling.candidate_table import small_silver, target_pairs_of, write_candidates
from ..sampling.passes import SEMANTIC, Searcher, all_passes, merged_passes, pool_encoder, read_pool
from ..sampling.semantic import normalised
from ..sampling.shards import gold_keys
from ..scheduling.progress import warn
from ..stages.candidates import CandidatesParams
from ..store.artifacts import artifact_dir, read_json, write_json

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    """The whole pool in this job, or (candidates.shards > 1) the merge of the shards."""
    params = read_params(CandidatesParams, spec)
    data = spec["inputs"]["data"]
    train = read_split(data, "train")
    if params.shards > 1:
        index_dir = Path(spec["inputs"]["index"])
        pool = read_pool(index_dir)
        removed = read_json(index_dir / "metrics.json")["eval_sentences_removed_from_pool"]
        shard_dirs = [Path(spec["inputs"][f"shard_{s}"]) for s in range(params.shards)]
        with artifact_dir(out, spec, force) as tmp:
            pass_rows = merged_passes(shard_dirs, params.strategies, params, len(pool))
            return _finish(tmp, params, pool, removed, pass_rows, train, "cpu", data)  # runs no model
    pool, _, removed = target_pool(data, params.pool, params.exclude_eval_sentences)
    problem = pool_too_small(params.to_json(), len(pool))
    if problem:  # before any encoding; the plan catches it too once the data artifact exists
        raise DataError(problem)
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        log.info("pool: %d unique train sentences (%d dev/test sentences removed)", len(pool), removed)
        x = None
        if set(params.strategies) & set(SEMANTIC):
            x = normalised(embed_texts(pool_encoder(params, spec), pool, device, params.max_length, params.batch_size))
        pass_rows = all_passes(Searcher(pool, x, params.exact), params.strategies, params)
        return _finish(tmp, params, pool, removed, pass_rows, train, device, data)


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
