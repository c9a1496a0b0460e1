"""Stage `queries`: generated (query, passage) pairs for a corpus without labels (GPL's query generation,
`augsbert.models.query_generation`), written in the BEIR layout the `negatives` stage reads (beir/corpus,
queries, qrels_train: each query's passage is its positive); with `queries.shards` > 1 the `query_shard` jobs'
texts, merged in passage order. Its key (generator identity, options, seed) is the cache.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..data import DataError
from ..data.beir import BeirData, write_beir
from ..models import resolve_device
from ..models.query_generation import generate, passage_queries, passages_to_generate
from ..params import read_params
from ..sampling.shards import shard_rows
from ..stages.queries import INVERSE_CLOZE, QueriesParams
from ..store.artifacts import artifact_dir, write_json

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(QueriesParams, spec), spec["inputs"]
    corpus, sources, per_passage = passages_to_generate(params, inputs["data"])
    device = resolve_device(device) if params.generator != INVERSE_CLOZE and params.shards == 1 else "cpu"
    with artifact_dir(out, spec, force) as tmp:
        log.info("queries: %s (%s) writes %d per passage for %d of %d passages%s", params.generator, params.mode,
                 per_passage, len(sources), len(corpus), f" in {params.shards} shards" if params.shards > 1 else "")
        if params.shards > 1:  # the shards' texts, in passage order
            texts = []
            for shard in range(params.shards):
                part = pd.read_parquet(Path(inputs[f"shard_{shard}"]) / "generated.parquet")
                if part["row"].tolist() != list(range(*shard_rows(len(sources), params.shards, shard, unit=params.batch_size))):
                    raise DataError(f"{inputs[f'shard_{shard}']}: its passages are not shard {shard}'s of these")
                texts += [list(t) for t in part["texts"]]
        else:
            texts = generate(params, sources["passage"].tolist(), per_passage, device)
        rows, empty, duplicates = passage_queries(sources["id"], texts)
        if not rows:
            raise DataError(f"queries: {params.generator} generated no non-empty text")
        queries = pd.DataFrame({"id": [r[0] for r in rows], "text": [r[1] for r in rows]})
        qrels = pd.DataFrame({"query_id": queries["id"], "corpus_id": [r[2] for r in rows], "score": 1})
        # GPL's `new_size -1`: a resized corpus is the one mined and labelled (gpl/train.py, toolkit/resize.py)
        write_beir(BeirData(sources, queries, {"train": qrels.astype({"score": "int64"})}), tmp / "beir")
        metrics = {"device": device, "generator": params.generator, "mode": params.mode,
                   "queries_per_passage": per_passage, "passages": len(sources), "corpus": len(corpus),
                   "queries": len(queries), "empty_dropped": empty, "duplicates_dropped": duplicates,
                   "mined_corpus": len(sources)}
        write_json(tmp / "metrics.json", metrics)
    return metrics
