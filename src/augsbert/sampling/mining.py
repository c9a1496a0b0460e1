"""What hard-negative mining (`augsbert.sampling.hard_negatives.mine`, stage `negatives`) reads and writes: the
(query, positive) pairs of a BEIR dataset's qrels, Bi-Encoder retrievers with cached embeddings, a
Cross-Encoder rescorer, and GPL's candidate lists (`candidates.parquet` with `passages.parquet`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..data import DataError
from ..data.beir import load_prepared
from ..models.architectures import load_bi_encoder
from ..models.inference import stream_scores
from ..store.model_refs import model_path
from .hard_negatives import bi_encoder_scores, cached_embeddings

if TYPE_CHECKING:  # annotations only: the stage's options class sits above sampling
    from ..stages.negatives import NegativesParams


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


def bi_encoder_retriever(params: NegativesParams, ref: str, device: str):
    """The scorer `mine` calls for Bi-Encoder `ref`: its embeddings of queries and passages, cached under
    `params.embedding_cache` by model identity and texts."""
    model = load_bi_encoder(model_path(params, ref), device, params.max_length)
    identity = params.model_identity.get(ref, ref)

    def make(queries, corpus):
        return bi_encoder_scores(
            cached_embeddings(model, queries, identity, params.embedding_cache, params.batch_size),
            cached_embeddings(model, corpus, identity, params.embedding_cache, params.batch_size))

    return make


def cross_encoder_scores(params: NegativesParams, device: str):
    """The rescorer `mine` calls: `params.cross_encoder`'s scores of (query, passage) pairs, in its scale."""
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(model_path(params, params.cross_encoder), device=device, max_length=params.max_length)

    def rescore(pairs):  # an iterable of pairs, scored a chunk at a time (augsbert.models.inference.stream_scores)
        return stream_scores(model, pairs, params.batch_size, params.cross_encoder_scale)

    return rescore


def write_candidate_lists(folder: Path, rows: list, ids: list[list[int]], corpus: list[str]) -> None:
    """`candidates.parquet` (query, positive, candidates: indices into `passages.parquet`), the union of the
    retrievers' lists per pair, stored once (GPL's hard-negatives file, gpl/toolkit/mine.py); and the passages
    the lists name (`passages.parquet`, `passage`)."""
    used = sorted({i for chosen in ids for i in chosen})
    new_index = {old: new for new, old in enumerate(used)}
    pd.DataFrame({"passage": [corpus[i] for i in used]}).to_parquet(folder / "passages.parquet", index=False)
    pd.DataFrame({"query": [r[0] for r in rows], "positive": [r[1] for r in rows],
                  "candidates": [np.array([new_index[i] for i in chosen], dtype=np.int32) for chosen in ids]}
                 ).to_parquet(folder / "candidates.parquet", index=False)
