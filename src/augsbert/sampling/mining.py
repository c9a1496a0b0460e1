"""What hard-negative mining (`augsbert.sampling.hard_negatives.mine`, stage `negatives`) reads and writes: the
(query, positive) pairs of a BEIR dataset's qrels, and GPL's candidate lists (`candidates.parquet` with
`passages.parquet`). The retrievers' and the Cross-Encoder's scores come from the job (augsbert.jobs.negatives)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..data import DataError
from ..data.beir import load_prepared


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
