"""BEIR-format retrieval data (Thakur et al., NeurIPS 2021 Datasets and Benchmarks): corpus, queries, qrels.

A dataset folder as BEIR and GPL release it:
- `corpus.jsonl`: one object per passage, `{"_id", "title" (optional), "text"}`;
- `queries.jsonl`: `{"_id", "text"}`;
- `qrels/{train,dev,test}.tsv`: header `query-id  corpus-id  score`, tab-separated; a split file may be absent.

A passage is `title + " " + text` (stripped, whitespace normalised), as BEIR's
Sentence-BERT wrapper and GPL encode it. Bad rows go to the dataset's
`RowReport` with file, line and key (an empty passage, a duplicate id, a qrels
id that is not in the corpus or the queries, a score that is not an integer),
so `on_bad_rows` decides whether they stop the data stage or are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import DataError
from .readers import iter_delimited, json_objects, missing_columns
from .tables import RowReport, normalise_text, short_repr

QRELS_SPLITS = ("train", "dev", "test")
QRELS_HEADER = ("query-id", "corpus-id", "score")


@dataclass
class BeirData:
    """Passages (`id`, `title`, `text`, `passage`), queries (`id`, `text`) and qrels per split
    (`query_id`, `corpus_id`, `score`: graded relevance, an integer)."""

    corpus: pd.DataFrame
    queries: pd.DataFrame
    qrels: dict[str, pd.DataFrame] = field(default_factory=dict)


def beir_files(root: Path) -> dict[str, Path]:
    """The files of a BEIR folder: corpus, queries and the qrels splits present (test is required)."""
    files = {"corpus": root / "corpus.jsonl", "queries": root / "queries.jsonl"}
    for split in QRELS_SPLITS:
        path = root / "qrels" / f"{split}.tsv"
        if split == "test" or path.is_file():
            files[f"qrels/{split}"] = path
    return files


def _objects(path: Path, report: RowReport, required: tuple[str, ...]):
    """(line, object) of each JSON line with the `required` keys; other lines reported with their key."""
    for line_no, record in json_objects(path, report, required):
        bad = next((k for k in ("_id", "title", "text") if record.get(k) is not None
                    and (isinstance(record[k], bool) or not isinstance(record[k], (str, int)))), None)
        if bad:
            report.add(path, line_no, f"key {bad!r} holds {short_repr(record[bad])}, expected a string")
            continue
        yield line_no, record


def _table(path: Path, report: RowReport, what: str, with_title: bool) -> tuple[pd.DataFrame, dict[str, int]]:
    rows, first_line = [], {}
    for line, record in _objects(path, report, ("_id", "text")):
        key = str(record["_id"]).strip()
        title = normalise_text(str(record.get("title") or "")) if with_title else ""
        text = normalise_text(str(record["text"] or ""))
        passage = f"{title} {text}".strip()
        if not key:
            report.add(path, line, "key '_id' is empty")
        elif not passage:
            report.add(path, line, f"key 'text' is empty{' (and no title)' if with_title else ''}: an empty {what} "
                                   f"(_id {short_repr(key)})")
        elif key in first_line:
            report.add(path, line, f"key '_id': {short_repr(key)} repeats the {what} of line {first_line[key]}")
        else:
            first_line[key] = line
            rows.append((key, title, text, passage) if with_title else (key, text))
    columns = ["id", "title", "text", "passage"] if with_title else ["id", "text"]
    return pd.DataFrame.from_records(rows, columns=columns), first_line


def read_qrels(path: Path, report: RowReport, corpus_ids, query_ids, corpus_path: Path,
               queries_path: Path) -> pd.DataFrame:
    """A qrels file; a query or passage id that is not in the queries or the corpus is a bad row."""
    records = iter_delimited(path, "\t")
    try:
        _, names = next(records)
    except StopIteration:
        return pd.DataFrame({"query_id": [], "corpus_id": [], "score": []}).astype({"score": "int64"})
    names = [n.strip() for n in names]
    missing = [c for c in QRELS_HEADER if c not in names]
    if missing:
        lacks = missing_columns("header", missing, names, expected=QRELS_HEADER)
        raise DataError(f"{path}:1: {lacks} (BEIR qrels: query-id, corpus-id, score)")
    index = [names.index(c) for c in QRELS_HEADER]
    rows, seen = [], {}
    for line, fields in records:
        if len(fields) < len(names):
            report.add(path, line, f"expected {len(names)} fields, found {len(fields)}")
            continue
        qid, cid, score = (fields[i].strip() for i in index)
        try:
            value = int(score)
        except ValueError:
            report.add(path, line, f"key 'score': {short_repr(score)} is not an integer relevance grade")
            continue
        if qid not in query_ids:
            report.add(path, line, f"key 'query-id': {short_repr(qid)} is not in {queries_path}")
        elif cid not in corpus_ids:
            report.add(path, line, f"key 'corpus-id': {short_repr(cid)} is not in {corpus_path}")
        elif (qid, cid) in seen:
            report.add(path, line, f"query {short_repr(qid)} and passage {short_repr(cid)} repeat line "
                                   f"{seen[(qid, cid)]}")
        else:
            seen[(qid, cid)] = line
            rows.append((qid, cid, value))
    return pd.DataFrame.from_records(rows, columns=["query_id", "corpus_id", "score"]).astype({"score": "int64"})


def read_beir(root: Path, report: RowReport) -> BeirData:
    """Read a BEIR folder (`beir_files`); bad rows go to `report`, which the caller settles."""
    files = beir_files(root)
    corpus, corpus_lines = _table(files["corpus"], report, "passage", with_title=True)
    queries, query_lines = _table(files["queries"], report, "query", with_title=False)
    qrels = {split: read_qrels(path, report, corpus_lines, query_lines, files["corpus"], files["queries"])
             for split in QRELS_SPLITS if (path := files.get(f"qrels/{split}"))}
    return BeirData(corpus, queries, qrels)


def write_beir(data: BeirData, folder: Path) -> None:
    """The prepared tables: `beir/corpus.parquet`, `beir/queries.parquet`, `beir/qrels_<split>.parquet`."""
    folder.mkdir(parents=True, exist_ok=True)
    data.corpus.to_parquet(folder / "corpus.parquet", index=False)
    data.queries.to_parquet(folder / "queries.parquet", index=False)
    for split, table in data.qrels.items():
        table.to_parquet(folder / f"qrels_{split}.parquet", index=False)


def load_prepared(data_dir: str | Path, split: str = "test") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Corpus, queries and the qrels of `split` of a prepared BEIR dataset (the data stage's artifact)."""
    folder = Path(data_dir) / "beir"
    path = folder / f"qrels_{split}.parquet"
    if not folder.is_dir():
        raise DataError(f"{data_dir}: the dataset is not BEIR-format (no beir/ tables); retrieval evaluation "
                        "needs a dataset with `loader: beir`")
    if not path.is_file():
        raise DataError(f"{data_dir}: the BEIR dataset has no qrels/{split}.tsv")
    return (pd.read_parquet(folder / "corpus.parquet"), pd.read_parquet(folder / "queries.parquet"),
            pd.read_parquet(path))
