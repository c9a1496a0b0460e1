"""Low-level readers that keep the line number of every record.

They return raw rows `(file, line, *fields)` and report malformed records
(wrong field count, undecodable JSON) to a RowReport, so a user is told
exactly which line of which file is wrong.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from .tables import DataError, RowReport

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long documents are fine


def open_text(path: Path, encoding: str = "utf-8") -> io.TextIOBase:
    """Open a text file, transparently un-gzipping `.gz` (UTF-8 files may start with a BOM)."""
    encoding = "utf-8-sig" if encoding.lower() in ("utf-8", "utf8") else encoding
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding=encoding, newline="")
    return open(path, encoding=encoding, newline="")


def text_format(path: Path) -> str:
    """csv | tsv | jsonl | parquet | txt, from the file name (ignoring .gz)."""
    suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
    ext = suffixes[-1].lstrip(".") if suffixes else ""
    aliases = {"tab": "tsv", "json": "jsonl", "ndjson": "jsonl", "pq": "parquet"}
    ext = aliases.get(ext, ext)
    if ext not in {"csv", "tsv", "jsonl", "parquet", "txt"}:
        raise DataError(f"{path}: cannot tell the format from the extension (use .csv, .tsv, .jsonl or .parquet)")
    return ext


def iter_delimited(
    path: Path,
    delimiter: str,
    quoting: int = csv.QUOTE_MINIMAL,
    encoding: str = "utf-8",
) -> Iterator[tuple[int, list[str]]]:
    """Yield (first line number of the record, fields) for every non-blank record."""
    try:
        with open_text(path, encoding) as handle:
            reader = csv.reader(handle, delimiter=delimiter, quoting=quoting)
            start = 1
            for fields in reader:
                if fields and any(f.strip() for f in fields):
                    yield start, fields
                start = reader.line_num + 1
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not valid {encoding} text ({err})") from None
    except csv.Error as err:
        raise DataError(f"{path}: malformed CSV near line {reader.line_num}: {err}") from None


def read_delimited(
    path: Path,
    report: RowReport,
    *,
    delimiter: str,
    columns: list[str],
    header: bool | list[str] | None,
    quoting: int = csv.QUOTE_MINIMAL,
    max_fields: int | None = None,
) -> list[tuple]:
    """Read a delimited file into raw rows `(file, line, *columns)`.

    `header=True`: the first record names the fields; a list: the fields'
    names in order (files without a header row); None: fields are named
    "0", "1", ... A record with fewer fields than named, or more than
    `max_fields` (default: as many as named), is reported as a bad row.
    """
    records = iter_delimited(path, delimiter, quoting)
    if header is True:
        try:
            _, names = next(records)
        except StopIteration:
            raise DataError(f"{path}: the file is empty (expected a header row)") from None
        names = [n.strip() for n in names]
    elif header is None:
        first = next(records, None)
        if first is None:
            return []
        names = [str(i) for i in range(len(first[1]))]
        records = _prepend(first, records)
    else:
        names = list(header)
    missing = [c for c in columns if c not in names]
    if missing:
        where = "header" if header is True else "fields"
        raise DataError(f"{path}:1: {where} lack column(s) {missing}; found {names}")
    index = [names.index(c) for c in columns]
    low, high = len(names), max_fields or len(names)
    rows = []
    for line, fields in records:
        if not low <= len(fields) <= high:
            want = str(low) if low == high else f"{low}-{high}"
            report.add(path, line, f"expected {want} fields, found {len(fields)}")
            continue
        rows.append((str(path), line, *(fields[i] for i in index)))
    return rows


def _prepend(first, rest):
    yield first
    yield from rest


def read_jsonl(path: Path, report: RowReport, columns: list[str]) -> list[tuple]:
    try:
        with open_text(path) as handle:
            lines = handle.read().split("\n")
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not valid utf-8 text ({err})") from None
    rows = []
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            report.add(path, line_no, f"invalid JSON ({err.msg})")
            continue
        if not isinstance(record, dict):
            report.add(path, line_no, "expected a JSON object")
            continue
        absent = [c for c in columns if c not in record]
        if absent:
            report.add(path, line_no, f"missing key(s) {absent}")
            continue
        rows.append((str(path), line_no, *(record[c] for c in columns)))
    return rows


def read_parquet(path: Path, columns: list[str], names: list[str]) -> pd.DataFrame:
    """A raw frame (`_file`, `_line` = "row N", then `names`) from the parquet `columns`."""
    import pyarrow.parquet as pq

    present = pq.read_schema(path).names
    missing = [c for c in columns if c not in present]
    if missing:
        raise DataError(f"{path}: parquet file lacks column(s) {missing}; it has {present}")
    frame = pd.read_parquet(path, columns=list(dict.fromkeys(columns)))
    raw = pd.DataFrame({"_file": str(path), "_line": [f"row {i}" for i in range(1, len(frame) + 1)]})
    for col, name in zip(columns, names):
        raw[name] = frame[col].to_numpy()
    return raw


def read_all_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    """Every line (blank ones too), split on newlines only: str.splitlines would also split on
    U+2028 and friends; a final newline does not start another line; \r is dropped."""
    try:
        with open_text(path, encoding) as handle:
            lines = handle.read().split("\n")
    except UnicodeDecodeError as err:
        raise DataError(f"{path}: not valid {encoding} text ({err})") from None
    if lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def read_lines(path: Path, encoding: str = "utf-8") -> list[tuple[int, str]]:
    """Non-empty lines with their line numbers."""
    return [(i, line) for i, line in enumerate(read_all_lines(path, encoding), start=1) if line.strip()]
