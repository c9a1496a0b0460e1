"""Stage `student`: a Bi-Encoder learns the student training set (`student_training_set`: gold and / or
the teacher's labels), tested and saved by `augsbert.training.pair_job.train_and_save`."""

from __future__ import annotations

from pathlib import Path

from ..params import read_params
from ..stages.student import StudentParams
from ..training.pair_job import student_training_set, train_and_save


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = read_params(StudentParams, spec)
    train = student_training_set(spec["inputs"], params.use_gold_labels)
    return train_and_save("be", spec, params, train, out, device, force)
