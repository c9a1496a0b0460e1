"""Stage `teacher`: a Cross-Encoder / Cross-Bi-Encoder learns the gold train pairs (or, Trans-Encoder, the
scores of its `labels` input), tested and saved by `augsbert.training.pair_job.train_and_save`."""

from __future__ import annotations

from pathlib import Path

from ..data import read_pairs
from ..data.pool import read_split
from ..params import read_params
from ..stages.teacher import TeacherParams
from ..training.pair_job import train_and_save
from ..training.pairs import symmetrise


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    """A teacher learns the gold train pairs, or, with a `labels` input (Trans-Encoder's cross models), the
    scores of those pairs and no gold."""
    params = read_params(TeacherParams, spec)
    if "labels" in spec["inputs"]:
        labelled = read_pairs(Path(spec["inputs"]["labels"]) / "pairs.parquet")
        train = labelled[["sentence1", "sentence2", "score"]].reset_index(drop=True)
    else:
        train = read_split(spec["inputs"]["data"], "train")
    if params.symmetric:
        train = symmetrise(train)
    return train_and_save(params.arch, spec, params, train, out, device, force)
