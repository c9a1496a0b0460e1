"""The `mteb` suite: MTEB tasks run through the `mteb` package (optional extra `augsbert[mteb]`).

Each task is a standard MTEB task by name (`evaluation.mteb.tasks`, e.g.
STS12, SICK-R, SciFact). Online, MTEB downloads its data from the Hugging Face
hub at the revision it pins. Offline, a task reads a local copy of that
dataset: a directory `datasets.load_dataset` can open, laid out like the
task's hub dataset (a snapshot of it, e.g. `hf download mteb/sts12-sts
--repo-type dataset --local-dir data/raw/mteb/STS12`, or for single-table
tasks one file per split such as `test.jsonl`). The task keeps its own
metadata (name, splits, main score, score range) and only its dataset path
points at the directory: MTEB's own loader reads it ("where MTEB allows": a
task whose loader reads `metadata.dataset["path"]`, as STS, retrieval,
classification, clustering, pair-classification and reranking tasks do). A
dataset already in the Hugging Face cache also works offline with
`HF_HUB_OFFLINE=1`.

MTEB's result cache is off (`cache=None`): the suite artifact is the cache,
keyed by the model, the task data and the mteb version.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from ..data import DataError
from ..data.suite_files import LOCAL_DIR, MISSING_MTEB, mteb_version

log = logging.getLogger(__name__)

class MtebMissingError(DataError):
    """The suite asks for MTEB but the package is absent (a setup problem, named with its fix)."""


def require_mteb():
    try:
        import mteb
    except ImportError:
        raise MtebMissingError(MISSING_MTEB) from None
    return mteb


def load_task(name: str, local: str | None = None):
    """The MTEB task `name`; with `local`, its dataset is read from that directory (metadata otherwise as MTEB
    defines it). The copy of the metadata is the task instance's own: the registered class is left unchanged."""
    mteb = require_mteb()
    try:
        task = mteb.get_task(name)
    except (KeyError, ValueError) as err:
        raise DataError(f"evaluation.mteb.tasks: {name!r} is not an MTEB task in mteb {mteb_version()} "
                        f"({str(err)[:300]})") from None
    if local is not None:
        task.metadata = task.metadata.model_copy(update={"dataset": {**task.metadata.dataset, "path": str(local)}})
    return task


def task_record(task, result, source: str) -> dict:
    """What the suite stores of one MTEB TaskResult: the main score (x 100, as every figure of this project),
    its name, and the full per-split scores as MTEB reports them (0-1)."""
    return {
        "main_score": float(result.get_score()) * 100,
        "main_metric": task.metadata.main_score,
        "type": task.metadata.type,
        "eval_splits": list(task.eval_splits),
        "source": source,
        "scores": result.model_dump(mode="json")["scores"],
        "evaluation_time_s": result.evaluation_time,
    }


def mteb_suite(model, tasks: dict[str, str], batch_size: int, out_dir: str | Path | None = None) -> dict:
    """Run every MTEB task of `tasks` (name -> local directory or "hub") on a SentenceTransformer.

    Returns {"tasks": {name: task_record}, "skipped": {name: reason}, "mteb_avg": mean main score x 100
    over the tasks with a defined score, "mteb_avg_tasks": those tasks, "version": mteb version}; with `out_dir`, also writes each task's MTEB result
    document to `<out_dir>/<name>.json` (the format MTEB's own tools read). A task that cannot load its
    data fails the job (never cached as skipped: the key does not change when the network returns).
    """
    mteb = require_mteb()
    records: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for name, source in tasks.items():
        task = load_task(name, None if source == "hub" else source)
        where = (f"{task.metadata.dataset['path']}@{task.metadata.dataset.get('revision')}" if source == "hub"
                 else source)
        try:
            result = mteb.evaluate(model, task, cache=None, overwrite_strategy="always", raise_error=True,
                                   encode_kwargs={"batch_size": batch_size}, show_progress_bar=False)
        except Exception as err:  # noqa: BLE001 - data loading fails in many ways (network, layout)
            hint = (f"online, retry; offline, put a copy of the dataset in {LOCAL_DIR}/{name}/ under the data "
                    "directory (or name one in evaluation.mteb.local), or set evaluation.mteb.hub: false to "
                    "list the task as skipped" if source == "hub" else
                    "the directory must be readable by datasets.load_dataset and laid out like the task's hub "
                    "dataset (a snapshot of it, or one file per split such as test.jsonl)")
            raise DataError(f"MTEB task {name} ({where}): {type(err).__name__}: {str(err)[:300]}; {hint}") from None
        (task_result,) = result.task_results
        records[name] = task_record(task, task_result, where)
        if out_dir is not None:
            Path(out_dir).mkdir(parents=True, exist_ok=True)
            task_result.to_disk(Path(out_dir) / f"{name}.json")
        if not math.isfinite(records[name]["main_score"]):  # e.g. a constant model: no correlation
            skipped[name] = f"MTEB main score ({records[name]['main_metric']}) undefined"
            continue
        log.info("MTEB: %s %s %.2f (%s)", name, records[name]["main_metric"], records[name]["main_score"], where)
    names = [n for n in records if n not in skipped]
    average = sum(records[n]["main_score"] for n in names) / len(names) if names else None
    return {"tasks": records, "skipped": skipped, "mteb_avg": average, "mteb_avg_tasks": names,
            "version": mteb_version()}
