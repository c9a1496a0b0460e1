"""The annotation files of active learning's `annotator: file` (docs/methods/active.md): a round's chosen pairs
written for a person to score, and the filled file read back, every row checked.

`annotate/<experiment>/round_<r>.csv` (UTF-8, comma-separated, a header):

    pair_id,sentence1,sentence2,score,scale
    17,A man plays a flute.,Someone plays an instrument.,,0 to 5

`score` is left empty for the annotator; `scale` says the range a score must lie in (`active.scale`). Read back,
columns are found by name (extra columns, such as an annotation tool's, are ignored; their order is free) and
every row must hold a pair id of the file once, and a finite number within the scale as its score: a row that does
not stops the reading with the file and the line of that row. Only the standard library is used, so planning can
check a file without importing pandas.

A file saved again by a spreadsheet is read as it was meant (issue 64): a byte-order mark and CRLF line ends are
taken as they come, and the separator is the one of `,`, `;` and tab under which the header names the columns
(Excel writes `;` where the locale's decimal mark is a comma). Under `;` or tab a score written with a decimal
comma (`2,5`, as those locales write it) is read as 2.5; under `,` a comma cannot be inside an unquoted score.
The file is keyed by what it says (`content_digest`: each row's pair id, texts and score), not by its bytes, so
saving it again unchanged reruns nothing.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError

COLUMNS = ("pair_id", "sentence1", "sentence2", "score", "scale")
REQUIRED = ("pair_id", "sentence1", "sentence2", "score")
MAX_BYTES = 64 * 2**20  # an annotation file larger than this is not one this workflow wrote for a person
SEPARATORS = (",", ";", "\t")  # tried in this order: the header must name the columns under one of them
DECIMAL_COMMA = re.compile(r"[+-]?\d*,\d+")  # `2,5`: a score in a locale whose decimal mark is a comma


@dataclass(frozen=True)
class Annotation:
    line: int  # of the row's first line in the file (a quoted field may span lines)
    pair_id: int
    sentence1: str
    sentence2: str
    score: float  # as written, on the file's scale


def scale_text(scale: tuple[float, float]) -> str:
    return f"{scale[0]:g} to {scale[1]:g}"


def write_request(path: str | Path, rows: list[tuple[int, str, str]], scale: tuple[float, float]) -> None:
    """Write the pairs `rows` (pair id, sentence 1, sentence 2) to score into `path`, an empty score each; never over
    an existing file (it may hold a person's work): the file appears whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(tmp, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            writer.writerows((pair_id, a, b, "", scale_text(scale)) for pair_id, a, b in rows)
        os.link(tmp, path)  # fails on an existing file: nothing is replaced
    finally:
        tmp.unlink(missing_ok=True)


def _bytes(path: Path) -> bytes:
    if not path.is_file():
        raise DataError(f"{path}: not a regular file")
    if path.stat().st_size > MAX_BYTES:
        raise DataError(f"{path}: larger than {MAX_BYTES // 2**20} MiB; not an annotation file of this workflow")
    return path.read_bytes()


def _text(path: Path, data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid utf-8 text (byte 0x{data[err.start]:02x}); save the file as "
                        "utf-8") from None
    if "\x00" in text:
        raise DataError(f"{path}:{text[:text.index(chr(0))].count(chr(10)) + 1}: a NUL byte in the text; save the "
                        "file as utf-8 text")
    return text


def separator(text: str) -> str:
    """The separator of the file: the first of SEPARATORS under which its header names every REQUIRED column, else
    the one that splits the header most (its missing column is then named as such)."""
    first = text.splitlines()[0] if text else ""
    split = {sep: [h.strip() for h in next(csv.reader([first], delimiter=sep), [])] for sep in SEPARATORS}
    for sep, names in split.items():
        if all(c in names for c in REQUIRED):
            return sep
    return max(SEPARATORS, key=lambda sep: len(split[sep]))


def _score(raw: str, sep: str) -> float:
    if sep != "," and DECIMAL_COMMA.fullmatch(raw):
        raw = raw.replace(",", ".")
    try:
        return float(raw)
    except ValueError:
        return math.nan


def read_annotations(path: str | Path, scale: tuple[float, float], data: bytes | None = None) -> list[Annotation]:
    """Every row of a filled annotation file (`data`: its bytes, if read already), checked: a DataError names the
    file and line of the first bad one."""
    path = Path(path)
    lo, hi = scale
    text = _text(path, _bytes(path) if data is None else data)
    sep = separator(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep)
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(f"{path}: the file is empty; it needs the header {','.join(COLUMNS)} and one row per "
                        "pair") from None
    names = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise DataError(f"{path}:1: no column {missing[0]!r} (the header has {', '.join(names) or 'nothing'}, read "
                        f"with the separator {sep!r}; `,`, `;` and tab are read); the file needs "
                        f"{', '.join(REQUIRED)}")
    where = {c: names.index(c) for c in REQUIRED}
    found: list[Annotation] = []
    seen: dict[int, int] = {}
    end = reader.line_num
    for row in reader:
        line, end = end + 1, reader.line_num
        if not any(field.strip() for field in row):
            continue  # a blank line
        if len(row) < len(names):
            raise DataError(f"{path}:{line}: {len(row)} field(s), but the header names {len(names)}")
        raw_id = row[where["pair_id"]].strip()
        try:
            pair_id = int(raw_id)
        except ValueError:
            raise DataError(f"{path}:{line}: pair_id {raw_id[:40]!r} is not a whole number") from None
        if pair_id in seen:
            raise DataError(f"{path}:{line}: pair {pair_id} is listed twice (first at line {seen[pair_id]})")
        seen[pair_id] = line
        raw = row[where["score"]].strip()
        if not raw:
            raise DataError(f"{path}:{line}: pair {pair_id} has no score yet: fill the score column of every row "
                            f"({scale_text(scale)}), then run the same command again")
        score = _score(raw, sep)
        if not math.isfinite(score):
            raise DataError(f"{path}:{line}: the score {raw[:40]!r} of pair {pair_id} is not a number (write a "
                            f"number from {scale_text(scale)})")
        if not lo <= score <= hi:
            raise DataError(f"{path}:{line}: the score {score:g} of pair {pair_id} lies outside the scale "
                            f"{scale_text(scale)}")
        found.append(Annotation(line, pair_id, row[where["sentence1"]], row[where["sentence2"]], score))
    return found


def content_digest(rows: list[Annotation]) -> str:
    """The sha256 of what a filled file says: each row's pair id, texts (as compared: without surrounding spaces)
    and score, in pair-id order. Line ends, a byte-order mark, the separator, the rows' order, the way a number is
    written (`2.50`, `2,5`) and columns not read do not change it."""
    content = sorted((r.pair_id, r.sentence1.strip(), r.sentence2.strip(), r.score) for r in rows)
    return hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()


def annotation_digest(path: str | Path, scale: tuple[float, float]) -> str | None:
    """The content digest of a filled annotation file (`content_digest`), every row checked first; None while it
    does not exist."""
    path = Path(path)
    if not path.exists():
        return None
    return content_digest(read_annotations(path, scale))


def filled_scores(path: str | Path, data: bytes, chosen: list[tuple[int, str, str]], scale: tuple[float, float],
                  round_: int) -> list[float]:
    """The scores of the `chosen` pairs (pair id, sentence 1, sentence 2) in a filled annotation file (`data`: its
    bytes), each rescaled from `scale` to 0-1, in the order of `chosen`. Every row must be one of the chosen pairs,
    with its texts, and every chosen pair must have its row.

    A row of a pair not chosen is told apart by what the rest of the file says (issue 64): where most rows are of
    pairs not chosen, the file was written for another choice (an earlier round's labels changed since); where
    every chosen pair has its row, the row is an extra one; else a chosen pair's id was changed in the file."""
    path = Path(path)
    wanted = {pair_id: (a, b) for pair_id, a, b in chosen}
    rows = read_annotations(path, scale, data)
    foreign = [row for row in rows if row.pair_id not in wanted]
    if foreign and 2 * len(foreign) > len(rows):
        first = foreign[0]
        raise DataError(f"{path}:{first.line}: pair {first.pair_id} is not one of the {len(wanted)} pairs round "
                        f"{round_} chose, nor are {len(foreign) - 1} more of the file's {len(rows)} rows (the file "
                        "was written for another choice: an earlier round's labels or its teacher changed since); "
                        "move the file aside and run again for the new pairs")
    found = {}
    for row in rows:
        if row.pair_id not in wanted:
            continue
        for column, given, expected in (("sentence1", row.sentence1, wanted[row.pair_id][0]),
                                        ("sentence2", row.sentence2, wanted[row.pair_id][1])):
            if given.strip() != expected.strip():
                raise DataError(f"{path}:{row.line}: the {column} of pair {row.pair_id} is not the chosen pair's; "
                                "keep the texts as written")
        found[row.pair_id] = row.score
    missing = [pair_id for pair_id in wanted if pair_id not in found]
    if foreign:
        first, more = foreign[0], foreign[1:]
        also = f" (also extra: line{'s' if len(more) > 1 else ''} {', '.join(str(r.line) for r in more[:5])}" \
               f"{', ...' if len(more) > 5 else ''})" if more else ""
        if not missing:
            raise DataError(f"{path}:{first.line}: pair {first.pair_id} is an extra row: not one of the {len(wanted)} "
                            f"pairs round {round_} chose, whose rows are all there{also}; "
                            f"remove {'them' if more else 'it'}")
        raise DataError(f"{path}:{first.line}: pair {first.pair_id} is not one of the {len(wanted)} pairs round "
                        f"{round_} chose, and its pair{'s' if len(missing) > 1 else ''} {_some(missing)} "
                        f"{'have' if len(missing) > 1 else 'has'} no row: a pair id changed in the file? keep every "
                        "row's pair_id as written")
    if missing:
        raise DataError(f"{path}: {len(missing)} of round {round_}'s {len(wanted)} pairs have no row (pair "
                        f"{_some(missing)}); every pair written needs its row and score")
    low, high = scale
    return [(found[pair_id] - low) / (high - low) for pair_id, _, _ in chosen]


def _some(pair_ids: list[int]) -> str:
    return ", ".join(map(str, pair_ids[:3])) + (", ..." if len(pair_ids) > 3 else "")


def fill_standin(path: str | Path, scale: tuple[float, float], seed: int) -> None:
    """A rehearsal's person (augsbert.config.rehearsal): every empty score of a just written annotation file filled
    with a seeded stand-in (uniform over `scale`, two decimals), written whole in place of the file."""
    import numpy as np

    path = Path(path)
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    draw = np.random.default_rng(seed).uniform(scale[0], scale[1], len(rows))
    column = rows[0].index("score")
    for row, value in zip(rows[1:], draw):
        row[column] = row[column] or f"{value:.2f}"
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(tmp, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows(rows)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
