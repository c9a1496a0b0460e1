"""The SentEval-style STS suite: STS12-16, STS-B, SICK-R Spearman of cosine similarities.

Each task comes from a local TSV (`sentence1 \t sentence2 \t score`, header
row, score 0-5) or, when allowed, from the `mteb/<task>-sts` test split on the
Hugging Face hub (a failed download fails the job, so a transient network
error is never cached as a result). Tasks without data were already listed as
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
from ..data.readers import read_delimited
from ..data.tables import RowReport, raw_frame, validate_pairs
from .similarity import correlations

log = logging.getLogger(__name__)

HUB_DATASETS = {"sts12": "mteb/sts12-sts", "sts13": "mteb/sts13-sts", "sts14": "mteb/sts14-sts",
                "sts15": "mteb/sts15-sts", "sts16": "mteb/sts16-sts", "stsb": "mteb/stsbenchmark-sts",
                "sickr": "mteb/sickr-sts"}


def read_sts_file(path: str | Path, task: str) -> pd.DataFrame:
    """A local STS task file as a canonical pair table (score rescaled from 0-5 to 0-1)."""
    path = Path(path)
    report = RowReport(dataset=f"sts_suite/{task}", policy="error")
    rows = read_delimited(path, report, delimiter="\t", columns=["sentence1", "sentence2", "score"], header=True,
                          quoting=csv.QUOTE_NONE)
    table = validate_pairs(raw_frame(rows, ["sentence1", "sentence2", "score"]), report, (0.0, 5.0))
    report.settle()
    return table


def read_sts_hub(task: str) -> pd.DataFrame:
    from datasets import load_dataset

    data = load_dataset(HUB_DATASETS[task], split="test").to_pandas()
    return pd.DataFrame({"sentence1": data["sentence1"], "sentence2": data["sentence2"],
                         "score": data["score"].astype(float) / 5.0})


def sts_suite(score_pairs: Callable[[list[tuple[str, str]]], np.ndarray], tasks: dict[str, str]) -> dict:
    """Spearman / Pearson x 100 per task; `tasks` maps task -> local path or "hub".

    Returns {"tasks": {task: {spearman, pearson, n_pairs, source}}, "skipped":
    {task: reason}, "sts_avg": mean Spearman over the evaluated tasks,
    "sts_avg_tasks": the tasks that average covers}.
    """
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
            table = read_sts_file(source, task)
        predicted = score_pairs(list(zip(table["sentence1"], table["sentence2"])))
        results[task] = {**correlations(predicted, table["score"].to_numpy()),
                         "source": HUB_DATASETS[task] if source == "hub" else str(source)}
        if not np.isfinite(results[task]["spearman"]):
            skipped[task] = "correlation undefined (constant model or gold scores)"
            continue
        log.info("STS suite: %s spearman %.2f (%d pairs)", task, results[task]["spearman"], len(table))
    evaluated = [t for t in results if t not in skipped]
    average = float(np.mean([results[t]["spearman"] for t in evaluated])) if evaluated else None
    return {"tasks": results, "skipped": skipped, "sts_avg": average, "sts_avg_tasks": evaluated}
