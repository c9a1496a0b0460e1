"""Where the evaluation suites' data lie, found while planning: a local STS task's files and their format (the
project's TSV or a release's own layout), the hub datasets of the STS tasks, the MTEB tasks' local folders, and
whether the optional `mteb` package is installed (without importing it)."""

from __future__ import annotations

import csv
import importlib.util
import re
from importlib import metadata
from pathlib import Path

from ..errors import ConfigError, DataError
from .readers import iter_delimited, reading

HUB_DATASETS = {"sts12": "mteb/sts12-sts", "sts13": "mteb/sts13-sts", "sts14": "mteb/sts14-sts",
                "sts15": "mteb/sts15-sts", "sts16": "mteb/sts16-sts", "stsb": "mteb/stsbenchmark-sts",
                "sickr": "mteb/sickr-sts"}

# tsv: the project's own table; senteval: a SentEval STS year directory (STS.input.<subset>.txt + STS.gs.<subset>.txt);
# stsbenchmark: the STS benchmark release's sts-test.csv; sick: SICK.txt (TEST rows of SemEval_set) or a SICK split
# file with the same columns (SentEval's SICK_test_annotated.txt)
STS_FORMATS = ("tsv", "senteval", "stsbenchmark", "sick")
# Where planning looks for a task's files under <data_dir>/sts_suite/, in this order (the first present wins):
# the project's TSV, then the releases as unpacked (SentEval's data/downstream/STS/ copied to sts_suite/STS/).
RELEASE_PATHS = {
    **{f"sts{y}": [f"STS/STS{y}-en-test"] for y in (12, 13, 14, 15, 16)},
    "stsb": ["STS/STSBenchmark/sts-test.csv", "stsbenchmark/sts-test.csv"],
    "sickr": ["SICK.txt", "SICK/SICK.txt", "SICK/SICK_test_annotated.txt"],
}
STSB_FIELDS = ["genre", "filename", "year", "id", "score", "sentence1", "sentence2"]
SICK_COLUMNS = ["sentence_A", "sentence_B", "relatedness_score"]
SICK_SPLIT = "TEST"  # SICK-R in SentEval and MTEB: the 4927 test pairs
GOLD_FILE = re.compile(r"^(?P<prefix>STS(?:\d{4})?)\.gs\.(?P<subset>.+)\.txt$")


def task_candidates(task: str) -> list[str]:
    """Paths under sts_suite/ that may hold `task`, in the order planning tries them."""
    return [f"{task}.tsv", *RELEASE_PATHS.get(task, [])]


def first_row(path: Path) -> list[str]:
    """The first row of a tab-separated file, its fields stripped."""
    first = next(iter_delimited(path, "\t", csv.QUOTE_NONE), None)
    return [f.strip() for f in first[1]] if first else []


def detect_format(path: str | Path, explicit: str | None = None) -> str:
    """The format of a task's local data: `explicit` if given, else from the name or the header.

    Raises DataError when neither tells (the user then sets `format`).
    """
    path = Path(path)
    if explicit:
        if explicit not in STS_FORMATS:
            raise DataError(f"{path}: unknown STS format {explicit!r} (known: {', '.join(STS_FORMATS)})")
        return explicit
    if path.is_dir():
        if any(GOLD_FILE.match(p.name) for p in path.iterdir()):
            return "senteval"
        raise DataError(f"{path}: a directory without SentEval gold files (STS.gs.<subset>.txt or "
                        "STS2016.gs.<subset>.txt); point at the STS<yy>-en-test directory of SentEval's "
                        "data/downstream/STS/")
    name = path.name.lower()
    if name.startswith("sick") and name.endswith(".txt"):
        return "sick"
    if name in ("sts-test.csv", "sts-dev.csv", "sts-train.csv"):
        return "stsbenchmark"
    with reading(path):
        header = first_row(path)
    if "SemEval_set" in header or all(c in header for c in SICK_COLUMNS):
        return "sick"
    if all(c in header for c in ("sentence1", "sentence2", "score")):
        return "tsv"
    raise DataError(f"{path}: cannot tell the STS file format from its name or header; set its `format` "
                    f"({', '.join(STS_FORMATS)}) in suite.sts_files")


def locate_task(suite_dir: str | Path, data_dir: str | Path, task: str, override=None) -> tuple[str | None, str | None]:
    """(path, format) of a task's local data, or (None, None) when there is none.

    `override` is `suite.sts_files.<task>`: a path (relative to `data_dir`) or {path, format}; without
    it the first of `task_candidates` present under `suite_dir` is taken. The format is decided here, while
    planning, so an ambiguous file stops the dry run with the key to set.
    """
    if override:
        spec = override if isinstance(override, dict) else {"path": override}
        candidates, explicit = [Path(data_dir) / spec["path"]], spec.get("format")
    else:
        candidates, explicit = [Path(suite_dir) / c for c in task_candidates(task)], None
    found = next((p for p in candidates if p.exists()), None)
    if found is None:
        return None, None
    if not override and found.name == f"{task}.tsv":  # the project's own layout, by name: a bad header stops
        return str(found), "tsv"                      # the suite job with file and line, not every plan
    try:
        return str(found), detect_format(found, explicit)
    except DataError as err:
        raise ConfigError(f"suite.sts_files.{task}: {err}") from None


MISSING_MTEB = ("suite.suites has `mteb`, but the mteb package is not installed; install the extra: "
                "pip install 'augsbert[mteb]' (or pip install mteb)")
LOCAL_DIR = "mteb"  # <data_dir>/mteb/<TaskName>/: a task's local data unless suite.mteb.local names another


def mteb_version() -> str | None:
    """The installed mteb version, or None; found without importing mteb (a 5-10 s import)."""
    if importlib.util.find_spec("mteb") is None:
        return None
    try:
        return metadata.version("mteb")
    except metadata.PackageNotFoundError:
        return None
