"""The SentEval-style STS suite: STS12-16, STS-B, SICK-R Spearman of cosine similarities.

Each task comes from local files or, when allowed, from the `mteb/<task>-sts`
test split on the Hugging Face hub (a failed download fails the job, so a
transient network error is never cached as a result). Local files may be the
project's own TSV (`sentence1 \t sentence2 \t score`, header row, score 0-5)
or the files as their owners release them (`STS_FORMATS`): SentEval's
`data/downstream/STS/STS12-en-test/` ... directories, the STS benchmark's
`sts-test.csv`, SICK's `SICK.txt`. Tasks without data were already listed as
skipped while planning; a task whose correlation is undefined is skipped here;
the average names the tasks it covers.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import DataError
from ..data.readers import read_all_lines, read_delimited, reading
from ..data.tables import RowReport, raw_frame, short_repr, validate_pairs
from ..data.suite_files import (
    GOLD_FILE,
    HUB_DATASETS,
    SICK_COLUMNS,
    SICK_SPLIT,
    STS_FORMATS,
    STSB_FIELDS,
    first_row,
)
from .similarity import correlations

log = logging.getLogger(__name__)

def read_sts_file(path: str | Path, task: str, fmt: str = "tsv") -> pd.DataFrame:
    """A local STS task's test pairs as a canonical pair table (score rescaled from 0-5 to 0-1).

    SentEval directories also return a `subset` column (MSRpar, headlines, ...).
    """
    path = Path(path)
    report = RowReport(dataset=f"sts_suite/{task}", policy="error")
    if fmt == "tsv":
        rows = read_delimited(path, report, delimiter="\t", columns=["sentence1", "sentence2", "score"], header=True,
                              quoting=csv.QUOTE_NONE)
        raw = raw_frame(rows, ["sentence1", "sentence2", "score"])
    elif fmt == "stsbenchmark":  # genre, file, year, id, score, sentence1, sentence2[, source, source]
        rows = read_delimited(path, report, delimiter="\t", quoting=csv.QUOTE_NONE, header=STSB_FIELDS,
                              columns=["sentence1", "sentence2", "score"], max_fields=9)
        raw = raw_frame(rows, ["sentence1", "sentence2", "score"])
    elif fmt == "sick":
        raw = _read_sick(path, report)
    elif fmt == "senteval":
        raw = _read_senteval(path, report)
    else:
        raise DataError(f"{path}: unknown STS format {fmt!r} (known: {', '.join(STS_FORMATS)})")
    table = validate_pairs(raw, report, (0.0, 5.0))  # carries `subset` through
    report.settle()
    return table


def _read_sick(path: Path, report: RowReport) -> pd.DataFrame:
    """SICK.txt: the rows whose SemEval_set is TEST; a file without that column is one split (all rows)."""
    with reading(path):
        header = first_row(path)
    split = "SemEval_set" in header
    columns = [*SICK_COLUMNS, "SemEval_set"] if split else SICK_COLUMNS
    rows = read_delimited(path, report, delimiter="\t", quoting=csv.QUOTE_NONE, header=True, columns=columns)
    raw = raw_frame(rows, ["sentence1", "sentence2", "score", *(["split"] if split else [])])
    if split:
        values = set(raw["split"].str.strip())
        if SICK_SPLIT not in values:
            raise DataError(f"{path}: no row has SemEval_set {SICK_SPLIT} (found {sorted(values)[:5]})")
        raw = raw[raw["split"].str.strip() == SICK_SPLIT].drop(columns="split")
    return raw


def _read_senteval(directory: Path, report: RowReport) -> pd.DataFrame:
    """Every subset of a SentEval STS year directory, concatenated (one Spearman over all pairs, as MTEB's
    mteb/sts1x-sts and SimCSE's "all" setting).

    Line i of STS.input.<subset>.txt (two tab-separated sentences; further fields, e.g. sources in the
    original STS 2016 release, are ignored) goes with line i of STS.gs.<subset>.txt; an empty gold line
    is an unscored pair, skipped with its input line (as SentEval does).
    """
    gold_files = sorted(p for p in directory.iterdir() if GOLD_FILE.match(p.name))
    if not gold_files:
        raise DataError(f"{directory}: no SentEval gold files (STS.gs.<subset>.txt or STS2016.gs.<subset>.txt)")
    rows, unscored = [], 0
    for gold_path in gold_files:
        match = GOLD_FILE.match(gold_path.name)
        subset = match["subset"]
        input_path = directory / f"{match['prefix']}.input.{subset}.txt"
        if not input_path.is_file():
            raise DataError(f"{gold_path}: no matching input file {input_path.name} in {directory} (remove the gold "
                            "file if it is not a subset, e.g. a combined ALL file)")
        gold, inputs = read_all_lines(gold_path), read_all_lines(input_path)
        if len(gold) != len(inputs):
            raise DataError(f"{input_path} has {len(inputs)} line(s) but {gold_path.name} has {len(gold)}; "
                            "line i of one must be the score of line i of the other")
        for line, (score, pair) in enumerate(zip(gold, inputs), start=1):
            if not score.strip():
                unscored += 1
                continue
            fields = pair.split("\t")
            if len(fields) < 2:
                report.add(input_path, line, f"expected two tab-separated sentences, found {len(fields)} field(s)")
                continue
            try:
                value = float(score.split("\t")[0])
            except ValueError:
                report.add(gold_path, line, f"score {short_repr(score)} is not a number")
                continue
            rows.append((f"{input_path}", line, fields[0], fields[1], value, subset))
    log.info("STS suite: %s: %d scored pairs in %d subset(s), %d unscored pair(s) skipped", directory.name,
             len(rows), len(gold_files), unscored)
    return raw_frame(rows, ["sentence1", "sentence2", "score", "subset"])


def read_sts_hub(task: str) -> pd.DataFrame:
    from datasets import load_dataset

    data = load_dataset(HUB_DATASETS[task], split="test").to_pandas()
    return pd.DataFrame({"sentence1": data["sentence1"], "sentence2": data["sentence2"],
                         "score": data["score"].astype(float) / 5.0})


def sts_suite(score_pairs: Callable[[list[tuple[str, str]]], np.ndarray], tasks: dict[str, str],
              formats: dict[str, str] | None = None) -> dict:
    """Spearman / Pearson x 100 per task; `tasks` maps task -> local path or "hub", `formats` task -> format
    of its local data (default tsv).

    Returns {"tasks": {task: {spearman, pearson, n_pairs, source[, format, subsets]}}, "skipped":
    {task: reason}, "sts_avg": mean Spearman over the evaluated tasks,
    "sts_avg_tasks": the tasks that average covers}. `subsets` (SentEval directories): Spearman and
    pair count of each subset, for comparison with papers that report them.
    """
    formats = formats or {}
    results: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for task, source in tasks.items():
        if source == "hub":
            try:
                table = read_sts_hub(task)
            except Exception as err:  # noqa: BLE001 - the hub fails in many ways; all mean "not available"
                # fail rather than cache a half-evaluated suite: the key does not change when the hub recovers
                raise DataError(f"STS task {task}: download of {HUB_DATASETS[task]} failed ({type(err).__name__}: "
                                f"{str(err)[:200]}); retry online, put the pairs in sts_suite/{task}.tsv under the "
                                "data directory, or set evaluation.sts_hub: false to list it as skipped") from None
        else:
            table = read_sts_file(source, task, formats.get(task, "tsv"))
        predicted = score_pairs(list(zip(table["sentence1"], table["sentence2"])))
        results[task] = {**correlations(predicted, table["score"].to_numpy()),
                         "source": HUB_DATASETS[task] if source == "hub" else str(source)}
        if task in formats:
            results[task]["format"] = formats[task]
        if "subset" in table.columns:
            results[task]["subsets"] = {
                name: correlations(predicted[(table["subset"] == name).to_numpy()],
                                   table["score"].to_numpy()[(table["subset"] == name).to_numpy()])
                for name in dict.fromkeys(table["subset"])}
        if not np.isfinite(results[task]["spearman"]):
            skipped[task] = "correlation undefined (constant model or gold scores)"
            continue
        log.info("STS suite: %s spearman %.2f (%d pairs)", task, results[task]["spearman"], len(table))
    evaluated = [t for t in results if t not in skipped]
    average = float(np.mean([results[t]["spearman"] for t in evaluated])) if evaluated else None
    return {"tasks": results, "skipped": skipped, "sts_avg": average, "sts_avg_tasks": evaluated}
