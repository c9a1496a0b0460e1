"""How many items a stage's job iterates over, estimated before it runs (its `items` hook; the scheduler's
formulas are augsbert.scheduling.resources').

Once a stage's input artifact exists its own counts are read (`data` metrics.json sizes, `candidates`
metrics.json counts, `labels` pairs.parquet rows); before that, `DATASET_SIZES` (the sizes of the corpora
this workflow knows) or `DEFAULT_SIZE` for a dataset of your own.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# train pairs and unlabeled sentences of the corpora config/config.yaml defines (docs/guide/data.md)
DATASET_SIZES = {
    "lee": {"train": 300, "unlabeled": 300},
    "stsb": {"train": 5749, "unlabeled": 0},
    "bws_cross_topic": {"train": 2125, "unlabeled": 0},
    "bws_in_topic": {"train": 2125, "unlabeled": 0},
    "spanish_sts": {"train": 1400, "unlabeled": 0},
}
DEFAULT_SIZE = {"train": 10000, "unlabeled": 0}  # a dataset of your own, before its data job has run
# dev and test pairs of the same corpora (the time estimate scores them; augsbert.scheduling.estimate)
EVAL_SIZES = {"lee": {"dev": 45, "test": 105}, "stsb": {"dev": 1500, "test": 1379}}
COUNT_LIMIT_BYTES = 256 * 2**20  # files counted line by line while planning; a larger one: DEFAULT_SIZE


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def data_sizes(node) -> dict[str, int]:
    """Train pairs and unlabeled sentences of a data node: its artifact's counts, else the estimate."""
    metrics = _read_json(Path(node.path) / "metrics.json")
    if metrics and isinstance(metrics.get("sizes"), dict):
        sizes = metrics["sizes"]
        return {"train": int(sizes.get("train") or 0), "unlabeled": int(sizes.get("unlabeled") or 0)}
    if node.params.get("dataset") not in DATASET_SIZES:  # a dataset of your own: its files' rows where countable
        counted = counted_sizes(node)
        if counted:
            return {"train": counted["train"], "unlabeled": counted["unlabeled"]}
    return dict(DATASET_SIZES.get(node.params.get("dataset"), DEFAULT_SIZE))


def _lines(path: Path) -> int | None:
    try:
        if path.stat().st_size > COUNT_LIMIT_BYTES or path.suffix in (".parquet", ".gz"):
            return None
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def counted_sizes(node) -> dict[str, int] | None:
    """The rows of a `pairs_file` dataset's files (lines, less the header), before its data job has run: what a
    dataset of your own holds. None for another loader or a file that cannot be counted cheaply."""
    settings = node.settings
    if settings.get("loader") != "pairs_file":
        return None
    base = Path(settings.get("data_dir") or ".")
    sizes = {}
    for split in ("train", "dev", "test", "unlabeled"):
        if not settings.get(split):
            sizes[split] = 0
            continue
        path = Path(os.path.expanduser(settings[split]))
        lines = _lines(path if path.is_absolute() else base / path)
        if lines is None:
            return None
        header = split != "unlabeled" and settings.get("header", True) and path.suffix.lower() in (".csv", ".tsv")
        sizes[split] = max(0, lines - (1 if header else 0))
    return sizes


def split_sizes(node) -> dict[str, int]:
    """Train, dev, test pairs and unlabeled sentences of a data node: its artifact's counts, else the files' rows
    (counted_sizes), else the known corpora's sizes, else DEFAULT_SIZE with dev and test a tenth of it."""
    metrics = _read_json(Path(node.path) / "metrics.json")
    if metrics and isinstance(metrics.get("sizes"), dict):
        return {k: int(metrics["sizes"].get(k) or 0) for k in ("train", "dev", "test", "unlabeled")}
    counted = counted_sizes(node)
    if counted:
        return counted
    known = DATASET_SIZES.get(node.params.get("dataset"), DEFAULT_SIZE)
    guess = {"dev": known["train"] // 10, "test": known["train"] // 10}
    return {**known, **EVAL_SIZES.get(node.params.get("dataset"), guess)}


def dataset_items(node) -> int:
    """A data job's rows: train pairs and unlabeled sentences of the corpus (the estimate: its job makes them)."""
    sizes = DATASET_SIZES.get(node.params.get("dataset"), DEFAULT_SIZE)
    return sizes["train"] + sizes["unlabeled"]


def pool_sentences(node) -> int:
    """Sentences a sampling or pre-training stage reads: both sides of every train pair plus the unlabeled ones."""
    sizes = data_sizes(node)
    return 2 * sizes["train"] + sizes["unlabeled"]


def silver_pairs(plan, candidates_key: str) -> int:
    """Candidate pairs of a sampling node: counted in its metrics.json, else top_k per pool sentence and strategy."""
    node = plan.nodes[candidates_key]
    metrics = _read_json(Path(node.path) / "metrics.json")
    if metrics and isinstance(metrics.get("candidates"), dict):
        return sum(int(v) for v in metrics["candidates"].values())
    data = plan.nodes[dict(node.inputs)["data"]]
    return pool_sentences(data) * int(node.params.get("top_k") or 1) * max(1, len(node.params.get("strategies") or []))


def label_pairs(plan, labels_key: str) -> int:
    """Pairs a labels node scores: its pairs.parquet rows once written, else its candidates plus the gold pairs
    (a Trans-Encoder `trans_encoder` node: its unlabelled pairs)."""
    node = plan.nodes[labels_key]
    path = Path(node.path) / "pairs.parquet"
    if path.is_file():
        import pyarrow.parquet as pq  # pyarrow is heavy to import, and read only once an artifact exists

        return pq.ParquetFile(path).metadata.num_rows
    inputs = dict(node.inputs)
    if "labels" in inputs:  # a stage over labelled pairs (a filter between labels and student): at most theirs
        return label_pairs(plan, inputs["labels"])
    if node.stage == "trans_encoder":
        source = plan.nodes[inputs["pairs"]]
        pairs = silver_pairs(plan, source.key) if source.stage == "candidates" else data_sizes(source)["train"]
        return min(pairs, node.params.get("max_pairs") or pairs)
    pairs = data_sizes(plan.nodes[inputs["gold"]])["train"]
    if "candidates" in inputs:
        pairs += silver_pairs(plan, inputs["candidates"])
    return pairs


def default_items(plan, node) -> int:
    """Training on gold, or evaluating: the train pairs of its `data` input stand for the data's size."""
    inputs = dict(node.inputs)
    if "data" in inputs:
        return data_sizes(plan.nodes[inputs["data"]])["train"]
    if "eval" in inputs:  # an RCL entropy model trained on an NLI triples file, evaluated on the target
        return data_sizes(plan.nodes[inputs["eval"]])["train"]
    return DEFAULT_SIZE["train"]


def pool_items(plan, node) -> int:
    """A sampling or pre-training job: the sentences of its `data` input's pool."""
    inputs = dict(node.inputs)
    return pool_sentences(plan.nodes[inputs["data"]]) if "data" in inputs else default_items(plan, node)


def trained_items(plan, node) -> int:
    """A pair model: the pairs of its `labels` input (teacher-scored), else its gold train pairs."""
    inputs = dict(node.inputs)
    return label_pairs(plan, inputs["labels"]) if "labels" in inputs else default_items(plan, node)
