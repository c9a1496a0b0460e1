"""Stage `data`: a dataset's raw files read into canonical parquet split tables (train/dev/test(/unlabeled))."""

from __future__ import annotations

import logging
from pathlib import Path

from ..data import DataError, RowReport, get_loader
from ..data.beir import write_beir
from ..data.parallel import write_parallel
from ..data.pool import pool_too_small, target_pool
from ..data.tables import OVERLAP_NOTES, duplicate_report, score_stats, write_table
from ..data.topic_corpora import read_topic_corpus
from ..params import read_params
from ..scheduling.progress import warn
from ..stages.data import DataParams
from ..store.artifacts import artifact_dir, write_json
from .job_inputs import raw_stamps, read_unchanged

log = logging.getLogger(__name__)


def _check_pools(data: Path, checks: list[dict]) -> None:
    """Stop (before any training) when a planned sampling stage asks more partners than its pool has. The plan
    checks this itself once the data exist; on a first run this data job is the earliest point the pool is known."""
    sizes: dict[tuple, int | None] = {}  # one pool per (pool, exclusion): a shared dataset has dozens of checks
    for check in checks:
        candidate_options = check["candidates"]
        which = (candidate_options["pool"], candidate_options["exclude_eval_sentences"])
        if which not in sizes:
            try:
                sizes[which] = len(target_pool(data, *which)[0])
            except DataError:
                sizes[which] = None
        if sizes[which] is None:
            continue  # e.g. no unlabeled corpus: the sampling stage says so with its own message
        problem = pool_too_small(candidate_options, sizes[which], prefix=f"experiments.{check['experiment']}.")
        if problem:
            raise DataError(problem)


def run(spec: dict, out: str | Path, force: bool = False) -> dict:
    """Load the dataset the spec names, validate it and write train/dev/test(/unlabeled).parquet."""
    params = read_params(DataParams, spec)
    name = params.dataset
    loader = get_loader(params.loader)
    report = RowReport(name, params.on_bad_rows)
    loader.inputs(name, spec["params"], Path(params.data_dir))  # each raw file there and a file, or one message
    stamps = raw_stamps(spec)  # before the read: a file rewritten while it is parsed is found after it
    with artifact_dir(out, spec, force) as tmp:
        prepared = loader.load(name, spec["params"], Path(params.data_dir), report)  # its own options too
        if params.topic_corpus:  # UKP Sentential / 20 Newsgroups as released: the unlabeled corpus
            prepared.unlabeled, prepared.info["topic_corpus"] = read_topic_corpus(
                name, params.topic_corpus, Path(params.data_dir), report)
        read_unchanged(spec, stamps)  # what was parsed is what the key names, or no artifact
        report.settle()
        for split in ("train", "test"):
            if split in prepared.splits and prepared.splits[split].empty:
                raise DataError(f"dataset '{name}': the {split} split is empty"
                                + (f" after skipping {len(report.issues)} bad row(s)" if report.issues else ""))
        dev = prepared.splits.get("dev")
        found = []  # data-quality warnings: on the console during the run, in metrics.json for the results file
        if prepared.splits and (dev is None or len(dev) < 2):
            found.append(f"{name}: no usable dev split: training stages will keep the last epoch and cannot "
                         "optimise seeds")
        for split, table in prepared.splits.items():
            write_table(table, tmp / f"{split}.parquet")
        if prepared.unlabeled is not None:
            write_table(prepared.unlabeled, tmp / "unlabeled.parquet")
        if prepared.beir is not None:
            write_beir(prepared.beir, tmp / "beir")
        parallel_sizes = write_parallel(prepared, tmp, name, len(report.issues))  # {} for pairs only
        _check_pools(tmp, params.pool_checks)
        sizes = {split: len(t) for split, t in prepared.splits.items()}
        if prepared.unlabeled is not None:
            sizes["unlabeled"] = len(prepared.unlabeled)
        sizes.update(parallel_sizes)
        duplicates = duplicate_report(prepared.splits)
        metrics = {
            "dataset": name,
            "loader": params.loader,
            "sizes": sizes,
            "skipped_rows": {"total": len(report.issues), "by_file": report.counts(),
                             "first": [str(i) for i in report.issues[:20]]},
            "duplicates": duplicates,
            "scores": {split: score_stats(t) for split, t in prepared.splits.items()},
            "info": prepared.info,
        }
        for split, n in sizes.items():
            log.info("%s: %s = %d rows", name, split, n)
        found += [f"{name}: {n} duplicate pair(s) inside {split} (kept)"
                  for split, n in duplicates["within_split"].items() if n]
        found += [f"{name}: {n} pair(s) occur in both {pair}{OVERLAP_NOTES.get(pair, '')}"
                  for pair, n in duplicates["across_splits"].items() if n]
        metrics["warnings"] = found
        for message in found:
            warn(message)
        write_json(tmp / "metrics.json", metrics)
    return metrics
