"""Stage `gpl`: GPL's student, a Bi-Encoder, learns the margins (`augsbert.training.gpl_data`):
MarginMSELoss (margins, dot product or cosine) or DistillKLDivLoss (the softmax of the teacher's scores over
positive and negatives), for `max_steps` optimizer steps (the step budget) or `epochs`; with candidate lists
every visit of a pair reads its own drawn negative.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..data.pool import read_split
from ..evaluation import correlations, cosine_scores
from ..models import resolve_device
from ..models.architectures import load_bi_encoder
from ..params import read_params
from ..stages.gpl import GplParams
from ..store.artifacts import artifact_dir, write_json
from ..store.model_refs import model_path
from ..training.gpl_data import drawn_rows, training_rows
from ..training.trainers import gpl_student_trainer

log = logging.getLogger(__name__)

NO_TEST_PAIRS = {"spearman": None, "pearson": None, "n_pairs": 0}  # a BEIR target: the retrieval suite scores it


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(GplParams, spec), spec["inputs"]
    table = pd.read_parquet(Path(inputs["margins"]) / "margins.parquet")
    passages = Path(inputs["margins"]) / "passages.parquet"  # present in `per_step` mode
    device = resolve_device(device)
    with artifact_dir(out, spec, force) as tmp:
        start = str(Path(inputs["init"]) / "model") if "init" in inputs else model_path(params, params.model)
        model = load_bi_encoder(start, device, params.max_length)
        if passages.is_file():  # every row is there `draws_per_row` times: one pass over them
            rows = drawn_rows(table, pd.read_parquet(passages)["passage"].tolist(), params.loss)
            params = replace(params, epochs=None if params.max_steps else 1)
        else:
            rows = training_rows(table, params.loss)
        result = gpl_student_trainer(model, rows, params, tmp / "work", device).train()
        model.save(str(tmp / "model"))
        shutil.rmtree(tmp / "work", ignore_errors=True)  # the trainer's scratch folder, no checkpoint kept
        test = read_split(inputs["data"], "test", required=False) if "data" in inputs else None
        scores = dict(NO_TEST_PAIRS)
        if test is not None:  # the target's test pairs (Lee, STS): Spearman of the student's cosine, as every model
            scores = correlations(cosine_scores(model, list(zip(test["sentence1"], test["sentence2"])),
                                                params.eval_batch_size, show_progress=False), test["score"])
            log.info("gpl student: test spearman %.2f", scores["spearman"])
        metrics = {"device": device, "test": scores, "loss": params.loss, "similarity": params.similarity,
                   "train_rows": len(rows), "pairs": len(table), "steps": int(result.global_step),
                   "train_loss": float(result.training_loss)}
        log.info("gpl student: %s (%s) for %d steps on %d rows, final mean loss %.4f", params.loss,
                 params.similarity, metrics["steps"], len(rows), metrics["train_loss"])
        write_json(tmp / "metrics.json", metrics)
    return metrics
