"""Low-level readers that keep the line number of every record.

They return raw rows `(file, line, *fields)` and report malformed records
(wrong field count, undecodable JSON, a JSON value of the wrong type) to a
RowReport, so a user is told exactly which line of which file is wrong.

A dataset path may point at any file. Errors name the file, the line and the
problem, but never echo the file's content: a structural problem (no such
column, wrong field count, not JSON, not UTF-8, not parquet) shows no field
at all, only names close to the expected column; a bad value in an otherwise
well-formed row shows at most a short repr of that one field (`short_repr`).

`resolve_path` (a configured path, relative to the data directory) and
`read_text_table` (named text columns of any table format) are here, below
both the loaders and the topic corpora, because both read files with them.
"""

from __future__ import annotations

import csv
import difflib
import gzip
import io
import json
import os
import sys
import zlib
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from .tables import DataError, RowReport, raw_frame, short_repr

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # long documents are fine


def resolve_path(data_dir: str | Path, path: str | Path) -> Path:
    path = Path(os.path.expanduser(str(path)))
    return path if path.is_absolute() else Path(data_dir) / path


def not_a_file(path: Path) -> str | None:
    """What `path` is when it exists but is no regular file ("is a directory, not a file", "is not a regular file
    (a character device)"); None for a regular file or nothing at all. A data path at /dev/zero or a FIFO would
    be read forever, a directory fails with a misleading "missing file": both are refused by what they are."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:  # absent, a dangling link, no permission to look: the caller's "missing" applies
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    kinds = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"))
    return "is not a regular file" + next((f" ({name})" for test, name in kinds if test(mode)), "")


def require_regular(path: Path) -> None:
    """Raise a DataError if `path` is a directory, a device or a pipe: checked before opening it (opening a pipe
    blocks, /dev/zero reads forever)."""
    kind = not_a_file(path)
    if kind:
        raise DataError(f"{path} {kind}; give the path of a data file")


def open_text(path: Path, encoding: str = "utf-8") -> io.TextIOBase:
    """Open a text file, transparently un-gzipping `.gz` (UTF-8 files may start with a BOM)."""
    require_regular(path)
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


def _binary_lines(path: Path) -> Iterator[bytes]:
    with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as handle:
        yield from handle


def undecodable(path: Path, encoding: str) -> DataError:
    """Which line of `path` is not valid `encoding` text, and at which byte (the file is re-read as bytes).

    Line by line is exact for UTF-8: a newline byte is never part of a multi-byte character.
    """
    codec = "utf-8-sig" if encoding.lower() in ("utf-8", "utf8") else encoding
    offset = 0
    for line_no, raw in enumerate(_binary_lines(path), start=1):
        try:
            raw.decode(codec if line_no == 1 else codec.replace("-sig", ""))
        except UnicodeDecodeError as err:
            where = "uncompressed byte offset" if path.suffix == ".gz" else "byte offset"
            return DataError(f"{path}:{line_no}: not valid {encoding} text (byte 0x{raw[err.start]:02x} at {where} "
                             f"{offset + err.start}); convert the file to {encoding}")
        offset += len(raw)
    return DataError(f"{path}: not valid {encoding} text; convert the file to {encoding}")


def nul_byte(path: Path, line: int | str) -> DataError:
    """A NUL byte in a text file: refused, not stripped. Text never holds one; a UTF-16 file (every other byte of
    ASCII text is NUL, and it decodes as "valid" UTF-8) or a binary file does, and its sentences would be wrong."""
    return DataError(f"{path}:{line}: a NUL byte (\\x00) in the text: a UTF-16 or binary file? convert the file "
                     "to utf-8 text")


def check_no_nul(path: Path, text: str, first_line: int = 1) -> None:
    """Raise `nul_byte` naming the line of the first NUL in `text` (which starts at line `first_line`)."""
    at = text.find("\x00")
    if at >= 0:
        raise nul_byte(path, first_line + text.count("\n", 0, at))


@contextmanager
def reading(path: Path, encoding: str = "utf-8") -> Iterator[None]:
    """Turn the ways reading a data file fails into a DataError that names the file (and the line), not its content."""
    try:
        yield
    except UnicodeDecodeError:
        raise undecodable(path, encoding) from None
    except (gzip.BadGzipFile, zlib.error, EOFError):  # BadGzipFile's own message quotes the first bytes
        raise DataError(f"{path}: not a valid gzip file (the name ends in .gz)") from None
    except FileNotFoundError:  # callers say where the file comes from (MissingDataError, USEB's data-eval.zip)
        raise
    except OSError as err:  # unreadable (permissions), a directory, ...
        raise DataError(f"{path}: cannot read the file ({err.strerror or type(err).__name__})") from None


def missing_columns(
    what: str, missing: list[str], present: list[str], noun: str = "column", expected: list[str] | None = None
) -> str:
    """'<what> lacks column(s) [...]' and what was found, with the present names close to a missing one.

    The names found are listed (`found: 'sentence1', 'sentence2', 'score'`, each cut by short_repr, 20 at most)
    only when the record is recognisably a header of this kind of file: it shares a name with `expected` (the
    columns asked for) or one is close to a missing one. Otherwise only their number is given: the first line of an
    unrelated file could be anything (a token, a password), and is not echoed."""
    hints, unused = [], list(present)
    for m in missing:
        close = difflib.get_close_matches(m, unused, n=1)
        if close:
            hints.append(f"{short_repr(close[0])} for {m!r}")
            unused.remove(close[0])
    hint = f"; did you mean {', '.join(hints)}?" if hints else ""
    if hints or set(expected or ()) & set(present):
        shown = ", ".join(short_repr(name) for name in present[:20])
        more = f" and {len(present) - 20} more" if len(present) > 20 else ""
        return f"{what} lacks {noun}(s) {missing}; found: {shown}{more}{hint}"
    return f"{what} lacks {noun}(s) {missing} (found {len(present)} {noun}(s){hint})"


def iter_delimited(
    path: Path,
    delimiter: str,
    quoting: int = csv.QUOTE_MINIMAL,
    encoding: str = "utf-8",
) -> Iterator[tuple[int, list[str]]]:
    """Yield (first line number of the record, fields) for every non-blank record."""
    with reading(path, encoding):
        reader = None
        try:
            with open_text(path, encoding) as handle:
                reader = csv.reader(handle, delimiter=delimiter, quoting=quoting)
                start = 1
                for fields in reader:
                    if fields and any(f.strip() for f in fields):
                        check_no_nul(path, delimiter.join(fields), start)  # (quoted fields may span lines)
                        yield start, fields
                    start = reader.line_num + 1
        except csv.Error as err:  # e.g. "field larger than field limit", "line contains NUL": no content
            line = reader.line_num if reader is not None else 1
            raise DataError(f"{path}:{line}: malformed CSV ({err})") from None


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
        what = "header" if header is True else "fields"
        raise DataError(f"{path}:1: " + missing_columns(what, missing, names, expected=columns))
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


def _json_type_problem(value) -> str | None:
    """Why a JSON value cannot be a text or score field; None if it can.

    A text may be a string (or a number, read as its digits); a score a number or a numeric
    string (validate_pairs checks it). Arrays and objects are never flattened into text, and a
    boolean is neither (Python's bool is an int: as a score it would silently become 0 or 1).
    """
    if isinstance(value, bool):
        return f"a boolean ({json.dumps(value)})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return None


def json_objects(path: Path, report: RowReport, required: Collection[str]):
    """(line, object) of each non-blank line of a JSON-lines file that is an object with the `required` keys;
    every other line goes to `report` with its line number (invalid JSON, not an object, a key missing)."""
    with reading(path):
        with open_text(path) as handle:
            text = handle.read()
    check_no_nul(path, text)
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            report.add(path, line_no, f"invalid JSON at column {err.colno} ({err.msg})")
            continue
        if not isinstance(record, dict):
            report.add(path, line_no, "expected a JSON object")
            continue
        absent = [c for c in required if c not in record]
        if absent:
            keys = [str(k) for k in record]
            report.add(path, line_no, missing_columns("the object", absent, keys, "key", expected=required))
            continue
        yield line_no, record


def read_jsonl(path: Path, report: RowReport, columns: list[str], numeric: Collection[str] = ()) -> list[tuple]:
    """Raw rows from a JSON-lines file; `numeric` names the keys that hold numbers (the score)."""
    rows = []
    for line_no, record in json_objects(path, report, columns):
        problems = [(c, _json_type_problem(record[c])) for c in dict.fromkeys(columns)]
        problems = [(c, p) for c, p in problems if p]
        if problems:
            c, problem = problems[0]
            report.add(path, line_no, f"key {c!r} holds {problem}, expected {'a number' if c in numeric else 'a string'}")
            continue
        escaped = [c for c in dict.fromkeys(columns) if isinstance(record[c], str) and "\x00" in record[c]]
        if escaped:  # written as the escape \u0000 (a NUL byte itself is not valid JSON)
            report.add(path, line_no, f"key {escaped[0]!r} holds a NUL character (\\u0000)")
            continue
        rows.append((str(path), line_no, *(record[c] for c in columns)))
    return rows


def read_parquet(path: Path, columns: list[str], names: list[str]) -> pd.DataFrame:
    """A raw frame (`_file`, `_line` = "row N", then `names`) from the parquet `columns`.

    The column `names` calls "score" must hold numbers (not booleans), the others scalars.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    require_regular(path)
    with reading(path):
        try:
            schema = pq.read_schema(path)
        except OSError:
            raise
        except pa.ArrowException:  # e.g. "Parquet magic bytes not found in footer"
            raise DataError(f"{path}: not a parquet file (or a damaged one)") from None
    present = schema.names
    missing = [c for c in columns if c not in present]
    if missing:
        raise DataError(f"{path}: " + missing_columns("the parquet file", missing, present, expected=columns))
    for col, name in zip(columns, names):  # as for JSON lines: no lists flattened into text, no boolean scores
        kind = schema.field(col).type
        if pa.types.is_nested(kind) or (name == "score" and pa.types.is_boolean(kind)):
            expected = "numbers" if name == "score" else "strings"
            raise DataError(f"{path}: column {col!r} holds values of type {kind}, expected {expected}")
    with reading(path):
        frame = pd.read_parquet(path, columns=list(dict.fromkeys(columns)))
    raw = pd.DataFrame({"_file": str(path), "_line": [f"row {i}" for i in range(1, len(frame) + 1)]})
    for col, name in zip(columns, names):
        raw[name] = frame[col].to_numpy()
    return raw


def read_all_lines(path: Path, encoding: str = "utf-8") -> list[str]:
    """Every line (blank ones too), split on newlines only: str.splitlines would also split on
    U+2028 and friends; a final newline does not start another line; \r is dropped."""
    with reading(path, encoding):
        with open_text(path, encoding) as handle:
            text = handle.read()
    check_no_nul(path, text)
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def read_lines(path: Path, encoding: str = "utf-8") -> list[tuple[int, str]]:
    """Non-empty lines with their line numbers."""
    return [(i, line) for i, line in enumerate(read_all_lines(path, encoding), start=1) if line.strip()]


def read_text_table(path: Path, report: RowReport, columns: dict[str, str | None],
                    texts: tuple[str, ...] = ("text",), what: str = "a table") -> pd.DataFrame:
    """Columns `columns` (canonical name -> column in the file; None = absent) of a .tsv / .csv (header
    row), .jsonl or .parquet file, as whitespace-normalised strings; rows with an empty one of `texts`
    are reported (file, line, which column)."""
    canonical = [name for name, column in columns.items() if column]
    wanted = [columns[name] for name in canonical]
    fmt = text_format(path)
    if fmt in ("csv", "tsv"):
        raw = raw_frame(read_delimited(path, report, delimiter="," if fmt == "csv" else "\t", header=True,
                                       columns=wanted), canonical)
    elif fmt == "jsonl":
        raw = raw_frame(read_jsonl(path, report, wanted), canonical)
    elif fmt == "parquet":
        raw = read_parquet(path, wanted, canonical)
    else:
        raise DataError(f"{path}: {what} must be .tsv, .csv, .jsonl or .parquet")
    for name in texts:
        for file, line, text in zip(raw["_file"], raw["_line"], raw[name]):
            if text is None or not str(text).strip():
                report.add(file, line, f"empty {name}")
            elif "\x00" in str(text):  # a parquet string (text files are refused whole, `nul_byte`)
                report.add(file, line, f"a NUL character (\\x00) in {name}")
    out = pd.DataFrame({name: raw[name].fillna("").astype(str).map(lambda t: " ".join(t.split())).to_numpy()
                        for name in canonical})
    out["_file"], out["_line"] = raw["_file"].to_numpy(), raw["_line"].to_numpy()
    return out
