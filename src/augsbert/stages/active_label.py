"""The `active_label` stage: an active-learning round's chosen pairs labelled, and the gold after the round written
in a data artifact's layout (job: augsbert.jobs.active_label; planned by augsbert.stages.active_select).

`train.parquet` is the pool's gold and the chosen pairs with their labels; `unlabeled_pairs.parquet` the pool's
unlabelled pairs but the chosen ones, still without a score, each with its `pair_id` (its row in the gold subset's
table); dev, test and the unlabeled corpus are the pool's. So the next round's teacher (and, after the last round,
the experiment's teacher, lower bound, candidates and student) read it in place of the gold subset.

- `annotator: oracle`: the dataset's own gold scores of exactly the chosen pairs, read from the data artifact the
  gold subset was drawn from (augsbert.data.pool.withheld_scores, the only reader of a withheld score; its input
  `gold`).
- `annotator: file`: a person's scores from annotate/<experiment>/round_<r>.csv. The file is a raw input keyed by
  content: while planning, a filled file is read and checked (a missing, non-numeric or out-of-range score stops
  the plan with its file and line) and the digest of what it says (each row's pair id, texts and score:
  augsbert.data.annotations.content_digest, not its bytes) enters the key, so a changed score reruns this round and
  everything after it, nothing before, and the file saved again unchanged (CRLF, a BOM, `;`) reruns nothing. A
  file not there yet is planned as such: the job writes it with the chosen pairs and an empty score column, and
  stops the run for the person (augsbert.errors.LabellingStop), naming the file and how to continue.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..params import Params
from ..planning.graph import Node
from .base import Stage
from .sizes import data_sizes

ANNOTATE_DIR = "annotate"  # relative to the folder the workflow runs in (a rehearsal's root below it)


@dataclass(frozen=True, kw_only=True)
class LabelParams(Params):
    """Round `round`'s labels: the oracle's (the gold subset's draw `subset_fraction`, `subset_seed`, which the
    pair ids refer to) or a person's (`experiment`'s annotation file at `path`, scored on `scale`; `annotations`:
    its content digest when planned, None while it was not there)."""

    annotator: Literal["oracle", "file"]
    round: int
    subset_fraction: float | None = None
    subset_seed: int | None = None
    experiment: str | None = None
    scale: list[float] | None = None
    annotations: str | None = None
    path: str | None = None


def annotation_path(experiment: str, round_: int) -> str:
    """Where round `round_`'s pairs of `experiment` are written for a person (relative to the run's folder)."""
    return f"{ANNOTATE_DIR}/{experiment}/round_{round_}.csv"


def label_params(experiment: str, exp: dict, round_: int, subset: Node) -> dict:
    """The labelling node's params of round `round_` (a DataError names the line of a filled file's bad row)."""
    active = exp["active"]
    if active["annotator"] == "oracle":
        return {"annotator": "oracle", "round": round_, "subset_fraction": subset.params["fraction"],
                "subset_seed": subset.params["seed"]}
    from ..data.annotations import annotation_digest  # read only for a person's file

    path = annotation_path(experiment, round_)
    scale = [float(v) for v in active["scale"]]
    return {"annotator": "file", "round": round_, "experiment": experiment, "scale": scale,
            "annotations": annotation_digest(path, (scale[0], scale[1])), "path": path}


def awaited(node) -> str | None:
    """A person's round whose file is not filled yet (the node was planned without it): "round <r>"."""
    params = node.params
    return f"round {params['round']}" if params["annotator"] == "file" and params.get("annotations") is None else None


def annotation_files(node) -> list[str]:
    """A person's filled annotation file, the raw input of a `file` node planned with it (by content in its key)."""
    path = node.settings.get("path")
    return [path] if path and node.params.get("annotations") and Path(path).is_file() else []


ACTIVE_LABEL = Stage("active_label", 1, "active learning: label a round's chosen pairs (the dataset's withheld gold, "
                     "or a person's file) and write the gold after the round", "augsbert.jobs.active_label:run",
                     section="active", runtime=("path",), roles=("active_label_1",), gpu=False, device=False,
                     seconds_per_item=0.0001, base_mem_mb=4000, mb_per_item=0.002, env="cpu", threads=1, cache=False,
                     params=LabelParams,
                     raw_inputs=annotation_files, awaits=awaited,
                     items=lambda plan, node: data_sizes(node, plan)["train"],
                     holds=("train.parquet", "unlabeled_pairs.parquet"), estimate="read")
STAGES = (ACTIVE_LABEL,)
