"""Stage `label_pairs`: the teacher scores pairs for the student ("silver" labels).

With `relabel_gold` the gold train pairs are re-scored by the teacher
("label regularisation", thesis 5.2); the sampling strategies of the next
stage add further candidate pairs here.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..artifacts import artifact_dir, read_json, write_json
from ..models import resolve_device
from ..models.architectures import ARCHITECTURES
from ..training import pairs_of
from .common import read_split

log = logging.getLogger(__name__)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = spec["params"]
    teacher_dir = Path(spec["inputs"]["teacher"])
    teacher_params = read_json(teacher_dir / "spec.json")["params"]
    arch_name = teacher_params["arch"]
    device = resolve_device(device)
    with artifact_dir(out, spec, force) as tmp:
        candidates = []
        if params["relabel_gold"]:
            gold = read_split(spec["inputs"]["data"], "train")
            candidates.append(gold[["sentence1", "sentence2"]].assign(strategy="gold", gold_score=gold["score"]))
        pairs = pd.concat(candidates, ignore_index=True)
        arch = ARCHITECTURES[arch_name]
        model = arch.load(teacher_dir / "model", device)
        pairs["score"] = arch.predict(model, pairs_of(pairs), params["batch_size"], teacher_params)
        pairs["teacher"] = teacher_dir.name
        pairs.to_parquet(tmp / "pairs.parquet", index=False)
        counts = pairs["strategy"].value_counts().to_dict()
        metrics = {"teacher": teacher_dir.name, "teacher_arch": arch_name, "device": device, "pairs": len(pairs),
                   "per_strategy": {k: int(v) for k, v in counts.items()},
                   "score": {"mean": float(pairs["score"].mean()), "std": float(pairs["score"].std(ddof=0)),
                             "min": float(pairs["score"].min()), "max": float(pairs["score"].max())}}
        log.info("labelled %d pairs with teacher %s (%s)", len(pairs), teacher_dir.name, arch_name)
        write_json(tmp / "metrics.json", metrics)
    return metrics
