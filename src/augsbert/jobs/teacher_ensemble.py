"""Stage `teacher_ensemble`: the members' test predictions combined, and what labelling combines with.

Each member scores the gold train pairs it learned (as it saw them in training: topic-prompted where it
was) for the z-score statistics (augsbert.models.ensemble); the ensemble's test score combines the test
predictions each member saved in its own artifact (`predictions.parquet`), so the table's ensemble row is
exactly the combination of its member rows' predictions. Writes `ensemble.json` (combination, members,
statistics), `predictions.parquet` (test pairs, gold, every member's score and the ensemble's) and
`metrics.json` (the ensemble's and each member's test scores).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..data.pool import read_split
from ..evaluation import correlations
from ..models import resolve_device
from ..models.ensemble import combine, reference_statistics
from ..models.teacher import TrainedPairModel, gold_scores, test_predictions
from ..params import read_params
from ..stages.teacher_ensemble import MEMBER_INPUT, EnsembleParams
from ..store.artifacts import artifact_dir, read_json, write_json

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = read_params(EnsembleParams, spec)
    members = [Path(spec["inputs"][MEMBER_INPUT.format(k)]) for k in range(params.members)]
    gold = read_split(spec["inputs"]["data"], "train")
    test, predicted = test_predictions(members)
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        statistics = None
        if params.combine == "zscore":
            reference = []
            for directory in members:
                model = TrainedPairModel(directory, device)
                reference.append(gold_scores(model, gold, params.eval_batch_size))
                del model
            statistics = reference_statistics(reference, gold["score"].to_numpy(np.float64))
        combined = combine(predicted, params.combine, statistics)
        member_metrics = []
        for directory in members:
            metrics = read_json(directory / "metrics.json")
            member_metrics.append({"key": directory.name, "arch": metrics["arch"], "test": metrics["test"]})
        archs = "+".join(m["arch"] for m in member_metrics)
        ensemble = {"combine": params.combine, "members": [{"key": m["key"], "arch": m["arch"]} for m in member_metrics],
                    "statistics": statistics, "reference_pairs": len(gold) if statistics else None}
        write_json(tmp / "ensemble.json", ensemble)
        table = test.assign(**{f"member_{k}": predicted[k] for k in range(len(members))}, predicted=combined)
        table.to_parquet(tmp / "predictions.parquet", index=False)
        test_metrics = correlations(combined, test["gold"].to_numpy(np.float64))
        result = {"arch": archs, "device": device, "combine": params.combine, "test": test_metrics,
                  "members": member_metrics, "statistics": statistics}
        write_json(tmp / "metrics.json", result)
        log.info("ensemble of %d (%s, %s): test spearman %.2f; members %s", len(members), archs, params.combine,
                 test_metrics["spearman"], ", ".join(f"{m['test']['spearman']:.2f}" for m in member_metrics))
    return result
