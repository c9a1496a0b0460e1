"""Stage `teacher`: a Cross-Encoder / Cross-Bi-Encoder learns the gold train pairs (or, Trans-Encoder, the
scores of its `labels` input), tested and saved by `augsbert.training.pair_job.train_and_save`."""

from __future__ import annotations

import logging
from pathlib import Path

from ..data import read_pairs
from ..data.pool import read_split, subset_rows
from ..params import read_params
from ..stages.teacher import TeacherParams
from ..training.pair_job import train_and_save
from ..training.pairs import symmetrise

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    """A teacher learns the gold train pairs (an ensemble member with `bag`: its seeded share of them), or, with a
    `labels` input (Trans-Encoder's cross models), the scores of those pairs and no gold."""
    params = read_params(TeacherParams, spec)
    if "labels" in spec["inputs"]:
        labelled = read_pairs(Path(spec["inputs"]["labels"]) / "pairs.parquet")
        train = labelled[["sentence1", "sentence2", "score"]].reset_index(drop=True)
    else:
        train = read_split(spec["inputs"]["data"], "train")
    if params.bag is not None:  # an ensemble member's own seeded share of the gold (teacher.ensemble[k].bag)
        rows = subset_rows(len(train), params.bag, params.seed)
        log.info("bagging: %d of the %d gold train pairs (bag %g, seed %d)", len(rows), len(train), params.bag,
                 params.seed)
        train = train.iloc[rows].reset_index(drop=True)
    if params.symmetric:
        train = symmetrise(train)
    return train_and_save(params.arch, spec, params, train, out, device, force)
