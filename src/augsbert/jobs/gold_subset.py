"""Stage `gold_subset`: a seeded fraction of a data artifact's gold train pairs, in a data artifact's layout.

`train.parquet` holds the kept pairs (with their scores); `unlabeled_pairs.parquet` the others without
their scores (sentence1, sentence2 and the topic where the dataset has one), so no stage after this one
can read a label that is not in the subset; dev, test and the unlabeled corpus are the dataset's own.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np

from ..data import DataError
from ..data.pool import UNLABELED_PAIRS, read_split, subset_rows
from ..data.tables import write_table
from ..params import read_params
from ..stages.gold_subset import GoldSubsetParams
from ..store.artifacts import artifact_dir, read_json, write_json

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, force: bool = False) -> dict:
    params = read_params(GoldSubsetParams, spec)
    data = Path(spec["inputs"]["data"])
    train = read_split(data, "train")
    if len(train) < 2:
        raise DataError(f"{data}/train.parquet: {len(train)} gold pair(s); gold_fraction needs at least 2")
    kept = subset_rows(len(train), params.fraction, params.seed)
    mask = np.zeros(len(train), dtype=bool)
    mask[kept] = True
    with artifact_dir(out, spec, force) as tmp:
        write_table(train[mask], tmp / "train.parquet")
        # the left-out pairs as unlabelled pairs: the score column is dropped here, before any stage reads them
        rest = train.loc[~mask, [c for c in ("sentence1", "sentence2", "topic") if c in train.columns]]
        write_table(rest, tmp / UNLABELED_PAIRS)
        for name in ("dev.parquet", "test.parquet", "unlabeled.parquet"):
            if (data / name).is_file():
                shutil.copyfile(data / name, tmp / name)
        sizes = dict(read_json(data / "metrics.json")["sizes"])
        sizes.update(train=int(mask.sum()), unlabeled_pairs=int((~mask).sum()))
        metrics = {"dataset_artifact": data.name, "fraction": params.fraction, "seed": params.seed,
                   "sizes": sizes, "gold_pairs_of": len(train)}
        write_json(tmp / "metrics.json", metrics)
        log.info("gold_fraction %g (seed %d): %d of %d gold train pairs kept, %d unlabelled", params.fraction,
                 params.seed, int(mask.sum()), len(train), int((~mask).sum()))
    return metrics
