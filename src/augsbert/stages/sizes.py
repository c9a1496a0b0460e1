"""How many items a stage's job iterates over, estimated before it runs (its `items` hook; the scheduler's
formulas are augsbert.scheduling.resources').

Once a stage's input artifact exists its own counts are read (`data` metrics.json sizes, `candidates`
metrics.json counts, `labels` pairs.parquet rows); before that, `DATASET_SIZES` (the sizes of the corpora
this workflow knows) or `DEFAULT_SIZE` for a dataset of your own.
"""

from __future__ import annotations

import json
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
    return dict(DATASET_SIZES.get(node.params.get("dataset"), DEFAULT_SIZE))


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
    (a Trans-Encoder `pair_scores` node: its unlabelled pairs)."""
    node = plan.nodes[labels_key]
    path = Path(node.path) / "pairs.parquet"
    if path.is_file():
        import pyarrow.parquet as pq  # pyarrow is heavy to import, and read only once an artifact exists

        return pq.ParquetFile(path).metadata.num_rows
    inputs = dict(node.inputs)
    if "labels" in inputs:  # a stage over labelled pairs (a filter between labels and student): at most theirs
        return label_pairs(plan, inputs["labels"])
    if node.stage == "pair_scores":
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
