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
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError

COLUMNS = ("pair_id", "sentence1", "sentence2", "score", "scale")
REQUIRED = ("pair_id", "sentence1", "sentence2", "score")
MAX_BYTES = 64 * 2**20  # an annotation file larger than this is not one this workflow wrote for a person


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


def read_annotations(path: str | Path, scale: tuple[float, float], data: bytes | None = None) -> list[Annotation]:
    """Every row of a filled annotation file (`data`: its bytes, if read already), checked: a DataError names the
    file and line of the first bad one."""
    path = Path(path)
    lo, hi = scale
    reader = csv.reader(io.StringIO(_text(path, _bytes(path) if data is None else data), newline=""))
    try:
        header = next(reader)
    except StopIteration:
        raise DataError(f"{path}: the file is empty; it needs the header {','.join(COLUMNS)} and one row per "
                        "pair") from None
    names = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise DataError(f"{path}:1: no column {missing[0]!r} (the header has {', '.join(names) or 'nothing'}); "
                        f"the file needs {', '.join(REQUIRED)}")
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
        try:
            score = float(raw)
        except ValueError:
            score = math.nan
        if not math.isfinite(score):
            raise DataError(f"{path}:{line}: the score {raw[:40]!r} of pair {pair_id} is not a number (write a "
                            f"number from {scale_text(scale)})")
        if not lo <= score <= hi:
            raise DataError(f"{path}:{line}: the score {score:g} of pair {pair_id} lies outside the scale "
                            f"{scale_text(scale)}")
        found.append(Annotation(line, pair_id, row[where["sentence1"]], row[where["sentence2"]], score))
    return found


def annotation_digest(path: str | Path, scale: tuple[float, float]) -> str | None:
    """The sha256 of a filled annotation file, every row checked first; None while it does not exist."""
    path = Path(path)
    if not path.exists():
        return None
    data = _bytes(path)
    read_annotations(path, scale, data)
    return hashlib.sha256(data).hexdigest()


def filled_scores(path: str | Path, data: bytes, chosen: list[tuple[int, str, str]], scale: tuple[float, float],
                  round_: int) -> list[float]:
    """The scores of the `chosen` pairs (pair id, sentence 1, sentence 2) in a filled annotation file (`data`: its
    bytes), each rescaled from `scale` to 0-1, in the order of `chosen`. Every row must be one of the chosen pairs,
    with its texts, and every chosen pair must have its row."""
    path = Path(path)
    wanted = {pair_id: (a, b) for pair_id, a, b in chosen}
    found = {}
    for row in read_annotations(path, scale, data):
        if row.pair_id not in wanted:
            raise DataError(f"{path}:{row.line}: pair {row.pair_id} is not one of the {len(wanted)} pairs round "
                            f"{round_} chose (the file was written for another choice: an earlier round's labels or "
                            "its teacher changed since); move the file aside and run again for the new pairs")
        for column, given, expected in (("sentence1", row.sentence1, wanted[row.pair_id][0]),
                                        ("sentence2", row.sentence2, wanted[row.pair_id][1])):
            if given.strip() != expected.strip():
                raise DataError(f"{path}:{row.line}: the {column} of pair {row.pair_id} is not the chosen pair's; "
                                "keep the texts as written")
        found[row.pair_id] = row.score
    missing = [pair_id for pair_id in wanted if pair_id not in found]
    if missing:
        raise DataError(f"{path}: {len(missing)} of round {round_}'s {len(wanted)} pairs have no row (pair "
                        f"{', '.join(map(str, missing[:3]))}{', ...' if len(missing) > 3 else ''}); every pair "
                        "written needs its row and score")
    low, high = scale
    return [(found[pair_id] - low) / (high - low) for pair_id, _, _ in chosen]


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
