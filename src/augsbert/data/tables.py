"""Canonical tables, text normalisation and row validation.

Pair table: `sentence1, sentence2, score` (float in [0, 1]) and optionally
`topic`. Unlabeled table: `text` and optionally `topic`. Every loader builds a
*raw* frame that also carries `_file` and `_line` (where each row came from),
and `validate_pairs` turns it into a canonical table, reporting bad rows by
file and line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError, MissingDataError  # defined there: the workflow catches them without pandas

log = logging.getLogger(__name__)

PAIR_COLUMNS = ["sentence1", "sentence2", "score"]
SPLITS = ("train", "dev", "test")


def normalise_text(text: str) -> str:
    """Collapse runs of whitespace and strip: the identity of a sentence everywhere."""
    return " ".join(text.split())


def normalise_series(series: pd.Series) -> pd.Series:
    """`normalise_text` over a column; missing values stay missing, non-strings become strings."""
    values = [None if v is None or (isinstance(v, float) and v != v) else " ".join(str(v).split())
              for v in series.tolist()]
    return pd.Series(values, index=series.index, dtype=object)


def short_repr(value, limit: int = 24) -> str:
    """repr of one field cut to `limit` characters: enough to find the cell, never a line of an unrelated file."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class RowIssue:
    file: str
    line: int | str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class RowReport:
    """Collects bad rows; raises or counts them depending on the `on_bad_rows` policy."""

    dataset: str
    policy: str = "error"
    issues: list[RowIssue] = field(default_factory=list)
    # scores outside a declared score_range: (the option's key, its range, the observed min and max, rows)
    range_problem: tuple[str, tuple[float, float], float, float, int] | None = None

    def out_of_range(self, option: str, declared: tuple[float, float], low: float, high: float, rows: int) -> None:
        """Scores outside `declared` were flagged; keep the observed range over every file of the dataset."""
        if self.range_problem:
            _, _, seen_low, seen_high, seen_rows = self.range_problem
            low, high, rows = min(low, seen_low), max(high, seen_high), rows + seen_rows
        self.range_problem = (option, declared, low, high, rows)

    def _range_hint(self) -> str:
        """Out-of-range scores usually mean a scale other than the declared one (0-5 against the default [0, 1]):
        the observed range and the score_range to set, not `on_bad_rows: skip`, which would drop those rows."""
        import math

        option, (lo, hi), low, high, rows = self.range_problem
        wanted = [min(lo, math.floor(low)), max(hi, math.ceil(high))]
        return (f"The scores run from {low:g} to {high:g}, and {rows} row(s) lie outside {option}: [{lo:g}, {hi:g}]"
                f" (default [0, 1]). If your scale is wider, set {option}: [{wanted[0]:g}, {wanted[1]:g}] (the scale's"
                " bounds; scores are rescaled to [0, 1] from it).")

    def add(self, file, line, reason: str) -> None:
        self.issues.append(RowIssue(str(file), line, reason))

    def settle(self) -> None:
        """Raise on bad rows under policy `error`; log them under `skip`."""
        if not self.issues:
            return
        shown = "\n".join(f"  {i}" for i in self.issues[:10])
        more = f"\n  ... and {len(self.issues) - 10} more" if len(self.issues) > 10 else ""
        if self.policy == "error":
            fix = f"Fix the file(s), or set datasets.{self.dataset}.on_bad_rows: skip to drop such rows."
            if self.range_problem:
                fix = self._range_hint() + ("" if self.range_problem[-1] == len(self.issues) else
                                            f" For the other rows: {fix[0].lower()}{fix[1:]}")
            raise DataError(f"dataset '{self.dataset}': {len(self.issues)} bad row(s):\n{shown}{more}\n{fix}")
        log.warning("dataset '%s': skipped %d bad row(s):\n%s%s", self.dataset, len(self.issues), shown, more)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for issue in self.issues:
            out[issue.file] = out.get(issue.file, 0) + 1
        return out


def raw_frame(rows: list[tuple], columns: list[str]) -> pd.DataFrame:
    """Build a raw frame from (file, line, *values) tuples."""
    return pd.DataFrame.from_records(rows, columns=["_file", "_line", *columns])


# score_range this many times wider than the scores read: almost surely not their scale (a warning; issue 49 C14)
WIDE_RANGE = 10


def _warn_flat(scores: np.ndarray, lo: float, hi: float, dataset: str, range_option: str | None) -> None:
    """Warn when the scores of a split cannot rank pairs as declared: all equal (every correlation with them is
    undefined, null), or `score_range` ≥ WIDE_RANGE times wider than their own range (they are squeezed into a
    sliver of [0, 1]: a range of [-1e300, 1e300] gave scores of ~1e-300 without a word)."""
    if len(scores) < 2:
        return
    span = float(scores.max() - scores.min())
    option = range_option or f"datasets.{dataset}.score_range"
    if span == 0:
        log.warning("dataset '%s': all %d scores are equal (%g): Spearman and Pearson against them are undefined "
                    "(null)", dataset, len(scores), float(scores[0]))
    elif hi - lo >= WIDE_RANGE * span:
        log.warning("dataset '%s': %s [%g, %g] is %.3g times wider than the scores (%g to %g), which land in [%.3g, "
                    "%.3g] after rescaling; set it to the bounds of the scores' scale", dataset, option, lo, hi,
                    (hi - lo) / span, float(scores.min()), float(scores.max()), (float(scores.min()) - lo) / (hi - lo),
                    (float(scores.max()) - lo) / (hi - lo))


def validate_pairs(
    raw: pd.DataFrame,
    report: RowReport,
    score_range: tuple[float, float] = (0.0, 1.0),
    range_option: str | None = None,
) -> pd.DataFrame:
    """Check and normalise a raw pair frame; return the canonical pair table.

    Bad rows (missing/empty text, non-numeric or NaN score, score outside the
    declared range) go to `report`; scores are rescaled from `score_range`
    to [0, 1].
    """
    lo, hi = (float(x) for x in score_range)
    if not hi > lo:
        raise DataError(f"dataset '{report.dataset}': score_range [{lo}, {hi}] is empty")
    if not np.isfinite(hi - lo):  # [-1e308, 1e308]: every score rescaled to 0.0, every Spearman null
        raise DataError(f"dataset '{report.dataset}': score_range [{lo:g}, {hi:g}] is {hi - lo:g} wide, not a finite "
                        f"number; set datasets.{report.dataset}.score_range to the real [min, max] of the scores")
    frame = raw.reset_index(drop=True)
    for col in ("sentence1", "sentence2"):
        frame[col] = normalise_series(frame[col])
    raw_score = frame["score"].to_numpy()
    score = pd.to_numeric(frame["score"], errors="coerce").astype("float64").to_numpy()
    bad = np.full(len(frame), None, dtype=object)  # reason per row, None = good

    def flag(mask: np.ndarray, reason) -> None:
        rows = np.flatnonzero(mask & (bad == None))  # noqa: E711 - elementwise comparison
        bad[rows] = [reason(i) for i in rows] if callable(reason) else reason

    for col in ("sentence1", "sentence2"):
        text = frame[col].to_numpy()
        flag((text == None) | (text == ""), f"empty or missing text in {col}")  # noqa: E711
    for col in ("sentence1", "sentence2"):  # from a parquet file (a text file holding one is refused whole)
        nul = np.array([isinstance(t, str) and "\x00" in t for t in frame[col].to_numpy()], dtype=bool)
        flag(nul, f"a NUL character (\\x00) in {col}")
    flag(np.isnan(score), lambda i: f"score {short_repr(raw_score[i])} is not a number")
    # inf, -inf, 1e999 (read as inf): no scale holds them, and no score_range to suggest (issue 56 E6)
    flag(np.isinf(score), lambda i: f"score {short_repr(raw_score[i])} is not a finite number")
    tol = 1e-9 * (hi - lo)
    outside = np.isfinite(score) & ((score < lo - tol) | (score > hi + tol))
    flag(outside, lambda i: f"score {score[i]:g} outside the declared range [{lo:g}, {hi:g}]")
    if range_option and outside.any():  # `range_option`: the config key that declares the range (its hint)
        rows = sum(1 for reason in bad[outside] if isinstance(reason, str) and "outside the declared" in reason)
        finite = score[np.isfinite(score)]
        report.out_of_range(range_option, (lo, hi), float(finite.min()), float(finite.max()), rows)
    is_bad = bad != None  # noqa: E711
    for file, line, reason in zip(frame["_file"].to_numpy()[is_bad], frame["_line"].to_numpy()[is_bad], bad[is_bad]):
        report.add(file, line, reason)
    good = ~is_bad
    keep = frame[good]
    rescaled = np.clip((score[good] - lo) / (hi - lo), 0.0, 1.0)
    distinct = len(np.unique(score[good]))
    _warn_flat(score[good], lo, hi, report.dataset, range_option)
    if len(np.unique(rescaled)) < distinct:  # a range so wide that different scores become one (constant gold)
        raise DataError(f"dataset '{report.dataset}': rescaled from score_range [{lo:g}, {hi:g}], {distinct} distinct "
                        f"score(s) become {len(np.unique(rescaled))} (the range is far wider than the scores, so "
                        f"correlations with them are undefined); set datasets.{report.dataset}.score_range to the real "
                        "[min, max] of the scores")
    table = pd.DataFrame(
        {
            "sentence1": keep["sentence1"].astype(str).to_numpy(),
            "sentence2": keep["sentence2"].astype(str).to_numpy(),
            "score": rescaled,
        }
    )
    for col in keep.columns.difference(["_file", "_line", *PAIR_COLUMNS], sort=False):
        values = normalise_series(keep[col]) if col == "topic" else keep[col].astype("string")
        table[col] = values.fillna("").astype(str).to_numpy()  # topic, id, ... carried through
    return table


def sentence_pool(tables) -> list[str]:
    """Sorted unique normalised sentences of the given pair tables (the pool candidates are drawn from)."""
    texts = set()
    for table in tables:
        texts.update(normalise_text(t) for t in table["sentence1"])
        texts.update(normalise_text(t) for t in table["sentence2"])
    texts.discard("")
    return sorted(texts)


def unlabeled_table(texts: list[str], topics: list[str] | None = None) -> pd.DataFrame:
    """Canonical unlabeled table: normalised, non-empty texts."""
    frame = pd.DataFrame({"text": [normalise_text(t) for t in texts]})
    if topics is not None:
        frame["topic"] = topics
    return frame[frame["text"] != ""].reset_index(drop=True)


def pair_keys(table: pd.DataFrame) -> pd.Series:
    """Order-independent identity of each pair (by normalised text)."""
    a, b = table["sentence1"].to_numpy(), table["sentence2"].to_numpy()
    lo = np.where(a <= b, a, b)
    hi = np.where(a <= b, b, a)
    return pd.Series(lo, dtype=object) + "\x1f" + pd.Series(hi, dtype=object)


def duplicate_report(splits: dict[str, pd.DataFrame]) -> dict:
    """Duplicate pairs inside each split and pairs shared between splits (either order)."""
    keys = {name: set() for name in splits}
    inside = {}
    for name, table in splits.items():
        k = pair_keys(table)
        inside[name] = int(k.duplicated().sum())
        keys[name] = set(k)
    names = list(splits)
    across = {
        f"{a}/{b}": len(keys[a] & keys[b]) for i, a in enumerate(names) for b in names[i + 1 :]
    }
    return {"within_split": inside, "across_splits": across}


# What a pair in two splits does (duplicate_report: the same two texts, either order): a train/test pair was seen in
# training; a dev/test pair is one of those the epoch was picked on (issue 56: it said "seen in training" too)
OVERLAP_NOTES = {"train/test": " (a test pair seen in training inflates its score)",
                 "dev/test": " (shared by dev and test: the epoch picked on dev was picked on these test pairs, "
                             "which inflates the test score)"}


def write_table(table: pd.DataFrame, path: Path) -> None:
    table.reset_index(drop=True).to_parquet(path, index=False)


def score_stats(table: pd.DataFrame) -> dict:
    """Mean, std, min and max of a pair table's scores (4 decimals); {} for no rows."""
    s = table["score"]
    if s.empty:
        return {}
    return {"mean": round(float(s.mean()), 4), "std": round(float(s.std(ddof=0)), 4),
            "min": round(float(s.min()), 4), "max": round(float(s.max()), 4)}


def pairs_of(table: pd.DataFrame) -> list[tuple[str, str]]:
    """The (sentence1, sentence2) tuples of a pair table, in its order."""
    return list(zip(table["sentence1"].tolist(), table["sentence2"].tolist()))


def read_pairs(path: str | Path) -> pd.DataFrame:
    """Read a canonical pair table written by the `data` stage."""
    table = pd.read_parquet(path)
    missing = [c for c in PAIR_COLUMNS if c not in table.columns]
    if missing:
        raise DataError(f"{path}: not a pair table (missing columns {missing})")
    return table


READ_CHUNK = 1 << 18  # rows of a parquet file read (and scored) at a time by `read_rows`: bounded memory


def read_rows(path: str | Path, start: int, stop: int, chunk: int | None = None,
              columns: list[str] | None = None) -> Iterator[tuple[int, "pa.Table"]]:
    """Rows `[start, stop)` of a parquet file as `(first row, table)` pieces of at most `chunk` rows
    (READ_CHUNK), cut at multiples of `chunk` counted from row 0: a shard that starts at such a multiple
    reads the very pieces a whole read does. Only the row groups that hold the range are read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    chunk = chunk or READ_CHUNK
    if stop <= start:
        return
    source = pq.ParquetFile(path)
    sizes = [source.metadata.row_group(g).num_rows for g in range(source.metadata.num_row_groups)]
    offsets = np.cumsum([0, *sizes])
    first = max(0, int(np.searchsorted(offsets, start, side="right")) - 1)
    position, pending, pending_rows, emitted = int(offsets[first]), [], 0, start
    for batch in source.iter_batches(batch_size=min(chunk, 65536), row_groups=range(first, len(sizes)),
                                     columns=columns):
        lo, hi = max(position, start), min(position + batch.num_rows, stop)
        if hi > lo:
            pending.append(batch.slice(lo - position, hi - lo))
            pending_rows += hi - lo
        position += batch.num_rows
        boundary = (emitted // chunk + 1) * chunk  # the next multiple of chunk
        while pending_rows and (emitted + pending_rows >= boundary or position >= stop):
            table = pa.Table.from_batches(pending)
            size = min(pending_rows, boundary - emitted)
            yield emitted, table.slice(0, size)
            rest = table.slice(size)
            pending, pending_rows, emitted = rest.to_batches(), rest.num_rows, emitted + size
            boundary = (emitted // chunk + 1) * chunk
        if position >= stop:
            return


def candidate_count(path: str | Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows
