"""Stage `negatives`: hard negatives of every (query, positive) pair, mined from the passage corpus.

Each retriever (`bm25`, or a Bi-Encoder reference) ranks the corpus for every
query; sentence-transformers' selection rule (sampling/hard_negatives.py)
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

from ..store.artifacts import artifact_dir, write_json
from ..data import DataError
from ..data.beir import load_prepared
from ..models import resolve_device
from ..params import read_params
from ..stages.negatives import BM25, PER_STEP, NegativesParams
from ..sampling.hard_negatives import Rule, bi_encoder_scores, bm25_scores, cached_embeddings, mine
from ..store.model_refs import model_path
from ..models.inference import stream_scores
from ..models.architectures import load_bi_encoder

log = logging.getLogger(__name__)


def qrels_pairs(data_dir: str | Path, split: str) -> tuple[list[tuple[str, str]], list[str]]:
    """(query, positive passage) of every judgement with grade >= 1, and the corpus' passages."""
    corpus, queries, qrels = load_prepared(data_dir, split)
    text = dict(zip(queries["id"], queries["text"]))
    passage = dict(zip(corpus["id"], corpus["passage"]))
    positive = qrels[qrels["score"] >= 1]
    if positive.empty:
        raise DataError(f"{data_dir}: qrels/{split}.tsv has no judgement with a grade >= 1 (no positive pair)")
    return [(text[q], passage[c]) for q, c in zip(positive["query_id"], positive["corpus_id"])], \
        corpus["passage"].tolist()


def retriever(params: NegativesParams, ref: str, device: str):
    if ref == BM25:
        return bm25_scores
    model = load_bi_encoder(model_path(params, ref), device, params.max_length)
    identity = params.model_identity.get(ref, ref)

    def make(queries, corpus):
        return bi_encoder_scores(
            cached_embeddings(model, queries, identity, params.embedding_cache, params.batch_size),
            cached_embeddings(model, corpus, identity, params.embedding_cache, params.batch_size))

    return make


def cross_encoder_scores(params: NegativesParams, device: str):
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(model_path(params, params.cross_encoder), device=device, max_length=params.max_length)

    def rescore(pairs):  # an iterable of pairs, scored a chunk at a time (augsbert.models.inference.stream_scores)
        return stream_scores(model, pairs, params.batch_size, params.cross_encoder_scale)

    return rescore


def write_candidates(folder: Path, rows: list, ids: list[list[int]], corpus: list[str]) -> None:
    """`candidates.parquet` (query, positive, candidates: indices into `passages.parquet`), the union of the
    retrievers' lists per pair, stored once (GPL's hard-negatives file, gpl/toolkit/mine.py); and the passages
    the lists name (`passages.parquet`, `passage`)."""
    used = sorted({i for chosen in ids for i in chosen})
    new_index = {old: new for new, old in enumerate(used)}
    pd.DataFrame({"passage": [corpus[i] for i in used]}).to_parquet(folder / "passages.parquet", index=False)
    pd.DataFrame({"query": [r[0] for r in rows], "positive": [r[1] for r in rows],
                  "candidates": [np.array([new_index[i] for i in chosen], dtype=np.int32) for chosen in ids]}
                 ).to_parquet(folder / "candidates.parquet", index=False)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(NegativesParams, spec), spec["inputs"]
    pairs, corpus = qrels_pairs(inputs["pairs"], params.qrels_split)
    device = resolve_device(device)
    per_step = params.mode == PER_STEP  # every survivor in each retriever's window is a candidate
    wanted = params.range_max - params.range_min if per_step else params.num_negatives
    rule = Rule(num_negatives=wanted, range_min=params.range_min, range_max=params.range_max,
                absolute_margin=params.absolute_margin, relative_margin=params.relative_margin,
                max_score=params.max_score, min_score=params.min_score, rescored=bool(params.cross_encoder))
    with artifact_dir(out, spec, force) as tmp:
        log.info("negatives: %d pairs, %d passages, retrievers %s", len(pairs), len(corpus), params.retrievers)
        try:
            mined = mine(pairs, corpus, {ref: retriever(params, ref, device) for ref in params.retrievers}, rule,
                         cross_encoder_scores(params, device) if params.cross_encoder else None,
                         union=per_step)
        except ValueError as err:  # the rule's own checks (num_negatives, range_min, range_max)
            raise DataError(f"negatives: {err}") from None
        rows = mined["rows"]
        if per_step:
            write_candidates(tmp, rows, mined["ids"], mined["corpus"])
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
