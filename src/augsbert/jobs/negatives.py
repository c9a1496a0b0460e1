"""Stage `negatives`: hard negatives of every (query, positive) pair, mined from the passage corpus.

Each retriever (`bm25`, or a Bi-Encoder reference: its embeddings, loaded and encoded here) ranks the corpus
for every query; sentence-transformers' selection rule (sampling/hard_negatives.py; its inputs and
files: sampling/mining.py)
picks each retriever's negatives, optionally after a Cross-Encoder rescored the
candidates (a candidate it scores within the margins of the positive is a
false negative and dropped); the lists are interleaved. `mode: per_step` (GPL)
keeps every survivor of each retriever's top `range_max` (the union, positives
removed) and writes `candidates.parquet` (query, positive, candidate indices)
with `passages.parquet`: the student draws one of them per training tuple.
`mode: fixed` (ours) writes `negatives.parquet` (query, positive, negative_1 ...
negative_n). Both write `metrics.json`. Bi-Encoder embeddings are cached under `embedding_cache`
(by model identity and texts) so a rerun with other mining options encodes nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import DataError
from ..models import resolve_device
from ..models.architectures import load_bi_encoder
from ..models.inference import stream_scores
from ..params import read_params
from ..sampling.hard_negatives import bi_encoder_scores, bm25_scores, cached_embeddings, mine
from ..sampling.mining import qrels_pairs, write_candidate_lists
from ..stages.negatives import BM25, PER_STEP, NegativesParams
from ..store.artifacts import artifact_dir, write_json
from ..store.model_refs import model_path

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(NegativesParams, spec), spec["inputs"]
    pairs, corpus = qrels_pairs(inputs["pairs"], params.qrels_split)
    device = resolve_device(device)
    per_step = params.mode == PER_STEP  # every survivor in each retriever's window is a candidate
    with artifact_dir(out, spec, force) as tmp:
        log.info("negatives: %d pairs, %d passages, retrievers %s", len(pairs), len(corpus), params.retrievers)
        try:
            retrievers = {ref: bm25_scores if ref == BM25 else _bi_encoder(params, ref, device)
                          for ref in params.retrievers}
            mined = mine(pairs, corpus, retrievers, params,
                         _cross_encoder(params, device) if params.cross_encoder else None, union=per_step)
        except ValueError as err:  # the rule's own checks (num_negatives, range_min, range_max)
            raise DataError(f"negatives: {err}") from None
        rows = mined["rows"]
        if per_step:
            write_candidate_lists(tmp, rows, mined["ids"], mined["corpus"])
        else:
            table = pd.DataFrame({"query": [r[0] for r in rows], "positive": [r[1] for r in rows],
                                  **{f"negative_{i + 1}": [r[2][i] for r in rows]
                                     for i in range(params.num_negatives)}})
            table.to_parquet(tmp / "negatives.parquet", index=False)
        lengths = np.array([len(i) for i in mined["ids"]] or [0])
        metrics = {"device": device, "mode": params.mode, "pairs": len(pairs), "rows": len(rows),
                   "short_pairs": mined["short"], "candidates_per_row": {"mean": float(lengths.mean()),
                                                                         "min": int(lengths.min()),
                                                                         "max": int(lengths.max())},
                   "queries": len(mined["queries"]), "passages": len(mined["corpus"]),
                   "chosen_per_retriever": {name: int(sum(len(x) for x in lists))
                                            for name, lists in mined["chosen"].items()}}
        if mined["short"]:
            log.warning("negatives: %d of %d pairs found fewer than %d negatives under the rule and are left out "
                        "(widen range_max or loosen the margins)", mined["short"], len(pairs),
                        1 if per_step else params.num_negatives)
        log.info("negatives: %d rows of (query, positive, %s)", len(rows),
                 f"{lengths.mean():.1f} candidates on average" if per_step else f"{params.num_negatives} negatives")
        write_json(tmp / "metrics.json", metrics)
    return metrics


def _bi_encoder(params: NegativesParams, ref: str, device: str):
    """Bi-Encoder `ref` as a retriever of `mine`: its scores over its embeddings of queries and passages, cached
    under `params.embedding_cache` by model identity and texts."""
    model = load_bi_encoder(model_path(params, ref), device, params.max_length)
    identity = params.model_identity.get(ref, ref)

    def embed(texts):
        return cached_embeddings(model, texts, identity, params.embedding_cache, params.batch_size)

    return lambda queries, corpus: bi_encoder_scores(embed(queries), embed(corpus))


def _cross_encoder(params: NegativesParams, device: str):
    """`params.cross_encoder` as `mine`'s rescorer: its scores of (query, passage) pairs, a chunk at a time."""
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(model_path(params, params.cross_encoder), device=device, max_length=params.max_length)
    return lambda pairs: stream_scores(model, pairs, params.batch_size, params.cross_encoder_scale)
