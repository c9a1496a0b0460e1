"""Stage `active_label`: a round's chosen pairs labelled (the oracle: augsbert.data.pool.withheld_scores; a person:
augsbert.data.annotations) and the gold after the round written in a data artifact's layout (train.parquet,
unlabeled_pairs.parquet with pair ids, the pool's dev / test / unlabeled tables, metrics.json)."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import rehearsal
from ..data.annotations import content_digest, fill_standin, filled_scores, read_annotations, scale_text, write_request
from ..data.pool import UNLABELED_PAIRS, next_round, withheld_scores
from ..data.tables import write_table
from ..errors import ConfigError, LabellingStop
from ..params import read_params
from ..sampling.active import score_distribution
from ..scheduling.progress import say
from ..scheduling.stops import continue_command
from ..stages.active_label import LabelParams
from ..store.artifacts import artifact_dir, read_json, write_json
from .job_inputs import AGAIN

log = logging.getLogger(__name__)


def _person_scores(params: LabelParams, chosen: pd.DataFrame) -> np.ndarray:
    """The annotation file's scores of the chosen pairs; not there when planned: it is written, and the run stops."""
    path, scale = Path(params.path), (params.scale[0], params.scale[1])
    rows = [(int(i), a, b) for i, a, b in zip(chosen["pair_id"], chosen["sentence1"], chosen["sentence2"])]
    if params.annotations is None:
        if path.exists():
            raise ConfigError(f"{path}: written since this job was planned; {AGAIN}")
        write_request(path, rows, scale)
        if not os.environ.get(rehearsal.STANDINS_ENV):
            raise LabellingStop(f"{path}: round {params.round}'s {len(rows)} pairs to label are written there; fill "
                                f"its score column ({scale_text(scale)}), then continue with `{continue_command()}`")
        fill_standin(path, scale, params.round)  # a rehearsal stands in for the person, as for models and data
        log.warning("rehearsal: %s filled with stand-in scores", path)
    elif not path.is_file():
        raise ConfigError(f"{path}: removed since this job was planned; {AGAIN}")
    data = path.read_bytes()
    if params.annotations is not None and content_digest(read_annotations(path, scale, data)) != params.annotations:
        raise ConfigError(f"{path}: changed since this job was planned (its key holds the content planned); {AGAIN}")
    return np.asarray(filled_scores(path, data, rows, scale, params.round), dtype=np.float64)


def run(spec: dict, out: str | Path, force: bool = False) -> dict:
    params = read_params(LabelParams, spec)
    inputs = spec["inputs"]
    pool = Path(inputs["pool"])
    chosen = pd.read_parquet(Path(inputs["selection"]) / "chosen.parquet")
    if params.annotator == "oracle":
        scores = withheld_scores(inputs["gold"], params.subset_fraction, params.subset_seed,
                                 chosen["pair_id"].to_numpy(), chosen)
    else:
        scores = _person_scores(params, chosen)
    train, rest = next_round(pool, chosen, scores)
    with artifact_dir(out, spec, force) as tmp:
        write_table(train, tmp / "train.parquet")
        write_table(rest, tmp / UNLABELED_PAIRS)
        for name in ("dev.parquet", "test.parquet", "unlabeled.parquet"):
            if (pool / name).is_file():
                shutil.copyfile(pool / name, tmp / name)
        before = read_json(pool / "metrics.json")
        sizes = {**before["sizes"], "train": len(train), "unlabeled_pairs": len(rest)}
        metrics = {"round": params.round, "annotator": params.annotator, "sizes": sizes,
                   "gold_pairs_of": before["gold_pairs_of"], "labels": len(train), "added": len(chosen),
                   "scores": score_distribution(scores)}
        write_json(tmp / "metrics.json", metrics)
        done = (f"round {params.round} ({params.annotator}): {len(chosen)} pairs labelled, {len(train)} gold pairs in "
                f"all, {len(rest)} left unlabelled")
        if params.annotator == "file":  # a person's labels taken in: said on the console too (issue 64)
            say(f"{params.path}: {done}")
        else:
            log.info(done)
    return metrics
