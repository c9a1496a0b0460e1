"""Stage `index_pool` (`pool_index`): the sentence pool of a sharded candidate search, and its semantic index.

Planned only with `candidates.shards` > 1. Written once and read by every
`candidate_shard` job and by the merge:

* `pool.parquet`: the pool (unique normalised sentences, sorted), so no
  shard re-reads and re-normalises the corpus;
* with a semantic strategy: `embeddings.npy` (the normalised float32
  embeddings; shards memory-map only their query rows), `index.faiss` (flat
  or HNSW, `candidates.exact`) and, for `semantic_search_least`,
  `index_least.faiss`, all written by `faiss.write_index` / `numpy.save`
  (no pickle). An HNSW graph is built once here: faiss builds it on several
  threads, so two builds could differ, and every shard must search the same.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..data.pool import target_pool
from ..models import resolve_device
from ..models.architectures import embed_texts
from ..params import read_params
from ..sampling.passes import INDEX_FILES, pool_encoder
from ..sampling.semantic import build_index, normalised
from ..stages.candidates import PoolIndexParams
from ..store.artifacts import artifact_dir, write_json

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    import faiss
    import pyarrow as pa
    import pyarrow.parquet as pq

    params = read_params(PoolIndexParams, spec)
    pool, _, removed = target_pool(spec["inputs"]["data"], params.pool, params.exclude_eval_sentences)
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        pq.write_table(pa.table({"sentence": pa.array(pool, pa.string())}), tmp / "pool.parquet")
        metrics = {"pool_sentences": len(pool), "eval_sentences_removed_from_pool": removed, "device": device}
        if params.semantic_model is not None:  # planned with semantic settings only when a strategy searches
            x = normalised(embed_texts(pool_encoder(params, spec), pool, device, params.max_length, params.batch_size))
            np.save(tmp / "embeddings.npy", x, allow_pickle=False)
            kinds = [False] + ([True] if params.least_index else [])
            for least in kinds:
                faiss.write_index(build_index(x, params.exact, least), str(tmp / INDEX_FILES[least]))
            metrics.update(embedding_dim=int(x.shape[1]), exact=params.exact,
                           indexes=[INDEX_FILES[least] for least in kinds])
            log.info("indexed %d x %d embeddings (%s)", *x.shape, "flat" if params.exact else "HNSW")
        write_json(tmp / "metrics.json", metrics)
    return metrics
