"""GPL's last two steps (Wang et al., NAACL 2022; UKPLab/gpl): pseudo labels, then the student.

`run_margins`: `teacher.pretrained`, a Cross-Encoder used as it is (no training,
no gold), scores in the scale `score_scale` states (logits or sigmoid); the
targets are the margins teacher(q, p) - teacher(q, n), as gpl/toolkit/pl.py
computes them. With candidate lists (`negatives.mode: per_step`, GPL) it first
fixes the student's draws (one candidate per visit of a pair, seeded) and
scores each distinct drawn (query, candidate) once; with a fixed table it
scores every (query, negative_i).
`run_student`: a Bi-Encoder learns them: MarginMSELoss (margins, dot product or
cosine) or DistillKLDivLoss (the softmax of the teacher's scores over positive
and negatives), for `max_steps` optimizer steps (the step budget) or `epochs`;
with candidate lists every visit of a pair reads its own drawn negative.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import replace
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
from ..stages.gpl import GplParams
from ..stages.margins import MarginsParams
from ..evaluation import correlations, cosine_scores
from ..training.trainers import gpl_student_trainer
from .common import model_path
from ..data.pool import read_split
from .zero_shot import load_bi_encoder

log = logging.getLogger(__name__)

SCORE_CHUNK = 65_536  # (query, passage) pairs held for the Cross-Encoder at a time
NO_TEST_PAIRS = {"spearman": None, "pearson": None, "n_pairs": 0}  # a BEIR target: the retrieval suite scores it


def negative_columns(table: pd.DataFrame) -> list[str]:
    return sorted((c for c in table.columns if c.startswith("negative_")), key=lambda c: int(c.split("_")[1]))


def teacher_scores(model, table: pd.DataFrame, batch_size: int, scale: str) -> np.ndarray:
    """(rows, 1 + negatives): the Cross-Encoder's score of (query, positive), then of each (query, negative_i)
    (streamed as the per-step mode's, `stream_scores`)."""
    columns = ["positive", *negative_columns(table)]
    pairs = ((q, p) for column in columns for q, p in zip(table["query"], table[column]))
    return stream_scores(model, pairs, batch_size, scale).reshape(len(columns), len(table)).T


def run_margins(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params, inputs = read_params(MarginsParams, spec), spec["inputs"]
    per_step = (Path(inputs["negatives"]) / "candidates.parquet").is_file()  # `negatives.mode: per_step` (GPL)
    table = pd.read_parquet(Path(inputs["negatives"]) / ("candidates.parquet" if per_step else "negatives.parquet"))
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
            return drawn_margins(model, params, table, Path(inputs["negatives"]), tmp, device)
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


def draws_per_row(rows: int, draws: dict) -> int:
    """How often the student can see each row: `epochs`, or the passes its `max_steps` x `batch_size` tuples
    make over `rows` (the last one partial)."""
    if draws.get("max_steps"):
        return max(1, -(-draws["max_steps"] * draws["batch_size"] // rows))
    return int(draws.get("epochs") or 1)


def draw_negatives(lengths: np.ndarray, per_row: int, seed: int) -> np.ndarray:
    """(rows, per_row) candidate positions: the negative of each row's k-th training tuple, uniform over its
    candidates with replacement (GPL's `random.choice`, gpl/toolkit/dataset.py), seeded."""
    rng = np.random.default_rng([seed, 0x6E6567])
    return np.floor(rng.random((len(lengths), per_row)) * lengths[:, None]).astype(np.int32)


def stream_scores(model, pairs, batch_size: int, scale: str, chunk: int = SCORE_CHUNK) -> np.ndarray:
    """The Cross-Encoder's scores of an iterable of (query, passage) pairs, `chunk` pairs in memory at a time."""
    activation = torch.nn.Sigmoid() if scale == "sigmoid" else torch.nn.Identity()
    out, buffer = [], []

    def flush():
        out.append(np.asarray(model.predict(buffer, batch_size=batch_size, activation_fn=activation,
                                            convert_to_numpy=True, show_progress_bar=False), dtype=np.float64))
        buffer.clear()

    for pair in pairs:
        buffer.append(pair)
        if len(buffer) == chunk:
            flush()
    if buffer:
        flush()
    return np.concatenate(out) if out else np.zeros(0)


def drawn_margins(model, params: MarginsParams, table: pd.DataFrame, mined: Path, tmp: Path, device: str) -> dict:
    """GPL's pseudo labels for the negatives the student will draw: the draws are fixed here (seeded), each
    distinct (query, candidate) drawn is scored once, and margin = CE(q, pos) - CE(q, drawn negative)."""
    passages = pd.read_parquet(mined / "passages.parquet")["passage"].tolist()
    candidates = [np.asarray(c, dtype=np.int64) for c in table["candidates"]]
    per_row = draws_per_row(len(table), params.draws)
    positions = draw_negatives(np.array([len(c) for c in candidates]), per_row, params.draws["seed"])
    drawn = [c[p] for c, p in zip(candidates, positions)]  # passage indices, (rows, per_row)
    distinct = [np.unique(d) for d in drawn]
    queries, positives = table["query"].tolist(), table["positive"].tolist()
    positive_scores = stream_scores(model, zip(queries, positives), params.batch_size, params.score_scale)
    flat = stream_scores(model, ((queries[r], passages[i]) for r, ids in enumerate(distinct) for i in ids),
                         params.batch_size, params.score_scale)
    cuts = np.cumsum([0, *(len(d) for d in distinct)])
    negative_scores = np.stack([flat[cuts[r]:cuts[r + 1]][np.searchsorted(distinct[r], drawn[r])]
                                for r in range(len(table))])
    margins = positive_scores[:, None] - negative_scores
    pd.DataFrame({"query": queries, "positive": positives, "score_positive": positive_scores,
                  "negatives": [d.astype(np.int32) for d in drawn], "negative_scores": list(negative_scores),
                  "margins": list(margins)}).to_parquet(tmp / "margins.parquet", index=False)
    pd.DataFrame({"passage": passages}).to_parquet(tmp / "passages.parquet", index=False)
    lengths = np.array([len(c) for c in candidates])
    metrics = {"device": device, "mode": "per_step", "rows": len(table), "draws_per_row": per_row,
               "candidates_per_row": float(lengths.mean()), "scored_pairs": int(len(flat) + len(table)),
               "all_candidate_pairs": int(lengths.sum() + len(table)), "score_scale": params.score_scale,
               "margin_mean": float(margins.mean()), "margin_std": float(margins.std()),
               "share_negative_above_positive": float((margins < 0).mean())}
    log.info("margins: %d rows, %d draws each over %.1f candidates: %d Cross-Encoder pairs scored (all candidates: "
             "%d); mean margin %.3f (%s)", len(table), per_row, lengths.mean(), metrics["scored_pairs"],
             metrics["all_candidate_pairs"], metrics["margin_mean"], params.score_scale)
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


class DrawnTuples:
    """The transform of the student's dataset in `per_step` mode: entry (row, k) is the row's query and
    positive with its k-th drawn negative and that draw's label (the margin; KL-divergence: the teacher's two
    scores). The dataset holds every row `draws_per_row` times, so the trainer's seeded shuffle over it gives
    each (query, positive) a fresh negative at each visit, as GPL's dataset draws one per tuple."""

    def __init__(self, table: pd.DataFrame, passages: list[str], loss: str):
        self.queries, self.positives, self.passages = table["query"].tolist(), table["positive"].tolist(), passages
        self.negatives = np.stack(table["negatives"].to_numpy())
        if loss == "margin_mse":
            self.labels = np.stack(table["margins"].to_numpy())[:, :, None]
        else:
            scores = np.stack(table["negative_scores"].to_numpy())
            positive = np.repeat(table["score_positive"].to_numpy()[:, None], scores.shape[1], axis=1)
            self.labels = np.stack([positive, scores], axis=2)

    def __call__(self, batch: dict) -> dict:
        rows, draws = batch["row"], batch["draw"]
        return {"query": [self.queries[r] for r in rows], "positive": [self.positives[r] for r in rows],
                "negative": [self.passages[self.negatives[r, k]] for r, k in zip(rows, draws)],
                "label": [self.labels[r, k].tolist() for r, k in zip(rows, draws)]}


def drawn_rows(table: pd.DataFrame, passages: list[str], loss: str) -> Dataset:
    """The (row, draw) entries of a `per_step` margins table, read through `DrawnTuples`."""
    per_row = len(table["negatives"].iloc[0])
    rows = Dataset.from_dict({"row": np.repeat(np.arange(len(table)), per_row),
                              "draw": np.tile(np.arange(per_row), len(table))})
    rows.set_transform(DrawnTuples(table, passages, loss))
    return rows


def run_student(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
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
