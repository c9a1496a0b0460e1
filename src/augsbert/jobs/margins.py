"""Stage `margins`: GPL's pseudo labels. `teacher.pretrained`, a Cross-Encoder used as it is (no training, no
gold), scores the mined negatives (`augsbert.training.gpl_data`: a fixed table, or the student's drawn
candidates in `negatives.mode: per_step`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sentence_transformers import CrossEncoder

from ..data import DataError
from ..models import resolve_device
from ..params import read_params
from ..stages.margins import MarginsParams
from ..store.artifacts import artifact_dir, write_json
from ..store.model_refs import model_path
from ..training.gpl_data import drawn_margins, fixed_margins


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(MarginsParams, spec), spec["inputs"]
    mined = Path(inputs["negatives"])
    per_step = (mined / "candidates.parquet").is_file()  # `negatives.mode: per_step` (GPL)
    table = pd.read_parquet(mined / ("candidates.parquet" if per_step else "negatives.parquet"))
    if table.empty:
        raise DataError(f"{inputs['negatives']}: the mined table is empty (no pair found enough negatives)")
    if per_step and params.draws is None:
        raise DataError(f"{inputs['negatives']}: a candidate list (negatives.mode per_step) needs the student's "
                        "draws (margins params `draws`: seed, batch_size, max_steps or epochs)")
    device = resolve_device(device)
    with artifact_dir(out, spec, force) as tmp:
        path = str(Path(inputs["teacher"]) / "model") if "teacher" in inputs else model_path(params, params.model)
        model = CrossEncoder(path, device=device, max_length=params.max_length)
        if per_step:
            passages = pd.read_parquet(mined / "passages.parquet")
            margins, metrics = drawn_margins(model, params, table, passages["passage"].tolist())
            passages.to_parquet(tmp / "passages.parquet", index=False)
        else:
            margins, metrics = fixed_margins(model, params, table)
        margins.to_parquet(tmp / "margins.parquet", index=False)
        metrics = {"device": device, **metrics}
        write_json(tmp / "metrics.json", metrics)
    return metrics
