"""GPL's last two steps (Wang et al., NAACL 2022; UKPLab/gpl): pseudo labels, then the student.

`run_margins`: `teacher.pretrained`, a Cross-Encoder used as it is (no training,
no gold), scores every (query, positive) and (query, negative_i) of the mined
table, in the scale `score_scale` states (logits or sigmoid); the targets are
the margins teacher(q, p) - teacher(q, n_i), as gpl/toolkit/pl.py computes them.
`run_student`: a Bi-Encoder learns them: MarginMSELoss (margins, dot product or
cosine) or DistillKLDivLoss (the softmax of the teacher's scores over positive
and negatives), for `max_steps` optimizer steps (the step budget) or `epochs`.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from datasets import Dataset
from sentence_transformers import CrossEncoder

from ..store.artifacts import artifact_dir, write_json
from ..data import DataError
from ..models import resolve_device
from ..params import read_params
from ..stages.gpl_student import GplStudentParams
from ..stages.margins import MarginsParams
from ..evaluation import correlations, cosine_scores
from ..training.trainers import gpl_student_trainer
from .common import model_path
from ..data.pool import read_split
from .zero_shot import load_bi_encoder

log = logging.getLogger(__name__)

NO_TEST_PAIRS = {"spearman": None, "pearson": None, "n_pairs": 0}  # a BEIR target: the retrieval suite scores it


def negative_columns(table: pd.DataFrame) -> list[str]:
    return sorted((c for c in table.columns if c.startswith("negative_")), key=lambda c: int(c.split("_")[1]))


def teacher_scores(model, table: pd.DataFrame, batch_size: int, scale: str) -> np.ndarray:
    """(rows, 1 + negatives): the Cross-Encoder's score of (query, positive), then of each (query, negative_i)."""
    activation = torch.nn.Sigmoid() if scale == "sigmoid" else torch.nn.Identity()
    columns = ["positive", *negative_columns(table)]
    pairs = [(q, p) for column in columns for q, p in zip(table["query"], table[column])]
    scores = model.predict(pairs, batch_size=batch_size, activation_fn=activation, convert_to_numpy=True,
                           show_progress_bar=len(pairs) > 10000)
    return np.asarray(scores, dtype=np.float64).reshape(len(columns), len(table)).T


def run_margins(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(MarginsParams, spec), spec["inputs"]
    table = pd.read_parquet(Path(inputs["negatives"]) / "negatives.parquet")
    if table.empty:
        raise DataError(f"{inputs['negatives']}: the mined table is empty (no pair found enough negatives)")
    device = resolve_device(device)
    with artifact_dir(out, spec, force) as tmp:
        path = str(Path(inputs["teacher"]) / "model") if "teacher" in inputs else model_path(params, params.model)
        model = CrossEncoder(path, device=device, max_length=params.max_length)
        scores = teacher_scores(model, table, params.batch_size, params.score_scale)
        negatives = negative_columns(table)
        out_table = table.copy()
        out_table["score_positive"] = scores[:, 0]
        for i, column in enumerate(negatives, start=1):
            out_table[f"score_{column}"] = scores[:, i]
            out_table[f"margin_{i}"] = scores[:, 0] - scores[:, i]
        out_table.to_parquet(tmp / "margins.parquet", index=False)
        margins = scores[:, :1] - scores[:, 1:]
        metrics = {"device": device, "rows": len(table), "negatives": len(negatives), "score_scale": params.score_scale,
                   "margin_mean": float(margins.mean()), "margin_std": float(margins.std()),
                   "share_negative_above_positive": float((margins < 0).mean())}
        log.info("margins: %d rows x %d negatives, mean margin %.3f (%s), %.1f %% of negatives scored above "
                 "their positive", len(table), len(negatives), metrics["margin_mean"], params.score_scale,
                 100 * metrics["share_negative_above_positive"])
        write_json(tmp / "metrics.json", metrics)
    return metrics


def training_rows(table: pd.DataFrame, loss: str):
    """The dataset the loss reads: (query, positive, negative_1..n, label); label = the n margins (MarginMSE)
    or the 1 + n teacher scores (KL-divergence)."""
    negatives = negative_columns(table)
    if loss == "margin_mse":
        labels = table[[f"margin_{i}" for i in range(1, len(negatives) + 1)]].to_numpy()
    else:
        labels = table[["score_positive", *(f"score_{c}" for c in negatives)]].to_numpy()
    return Dataset.from_dict({"query": table["query"].tolist(), "positive": table["positive"].tolist(),
                              **{c: table[c].tolist() for c in negatives}, "label": labels.tolist()})


def run_student(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(GplStudentParams, spec), spec["inputs"]
    table = pd.read_parquet(Path(inputs["margins"]) / "margins.parquet")
    device = resolve_device(device)
    with artifact_dir(out, spec, force) as tmp:
        start = str(Path(inputs["init"]) / "model") if "init" in inputs else model_path(params, params.model)
        model = load_bi_encoder(start, device, params.max_length)
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
                   "train_rows": len(rows), "steps": int(result.global_step),
                   "train_loss": float(result.training_loss)}
        log.info("gpl student: %s (%s) for %d steps on %d rows, final mean loss %.4f", params.loss,
                 params.similarity, metrics["steps"], len(rows), metrics["train_loss"])
        write_json(tmp / "metrics.json", metrics)
    return metrics
