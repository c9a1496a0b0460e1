"""GPL's pseudo labels and what its student reads (Wang et al., NAACL 2022; UKPLab/gpl).

Margins: a Cross-Encoder's scores in the scale `score_scale` states (logits or sigmoid); the targets are the
margins teacher(q, p) - teacher(q, n), as gpl/toolkit/pl.py computes them. With candidate lists
(`negatives.mode: per_step`, GPL) the student's draws are fixed first (one candidate per visit of a pair,
seeded) and each distinct drawn (query, candidate) is scored once (`drawn_margins`); with a fixed table every
(query, negative_i) is scored (`fixed_margins`). The student's rows: (query, positive, negative(s), label)
for MarginMSELoss (the margins) or DistillKLDivLoss (the teacher's scores); with candidate lists every visit
of a pair reads its own drawn negative (`drawn_rows`).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from datasets import Dataset

from ..models.inference import stream_scores
from ..stages.margins import MarginsParams, draws_per_row  # the estimate counts the draws by the same function

log = logging.getLogger(__name__)


def negative_columns(table: pd.DataFrame) -> list[str]:
    return sorted((c for c in table.columns if c.startswith("negative_")), key=lambda c: int(c.split("_")[1]))


def teacher_scores(model, table: pd.DataFrame, batch_size: int, scale: str) -> np.ndarray:
    """(rows, 1 + negatives): the Cross-Encoder's score of (query, positive), then of each (query, negative_i)
    (streamed as the per-step mode's, `stream_scores`)."""
    columns = ["positive", *negative_columns(table)]
    pairs = ((q, p) for column in columns for q, p in zip(table["query"], table[column]))
    return stream_scores(model, pairs, batch_size, scale).reshape(len(columns), len(table)).T


def fixed_margins(model, params: MarginsParams, table: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """A fixed negatives table (`negatives.mode: fixed`) with the teacher's score of (query, positive) and of each
    (query, negative_i), and margin_i = score_positive - score_negative_i; with its metrics."""
    scores = teacher_scores(model, table, params.batch_size, params.score_scale)
    negatives = negative_columns(table)
    out_table = table.copy()
    out_table["score_positive"] = scores[:, 0]
    for i, column in enumerate(negatives, start=1):
        out_table[f"score_{column}"] = scores[:, i]
        out_table[f"margin_{i}"] = scores[:, 0] - scores[:, i]
    margins = scores[:, :1] - scores[:, 1:]
    metrics = {"rows": len(table), "negatives": len(negatives), "score_scale": params.score_scale,
               "margin_mean": float(margins.mean()), "margin_std": float(margins.std()),
               "share_negative_above_positive": float((margins < 0).mean())}
    log.info("margins: %d rows x %d negatives, mean margin %.3f (%s), %.1f %% of negatives scored above "
             "their positive", len(table), len(negatives), metrics["margin_mean"], params.score_scale,
             100 * metrics["share_negative_above_positive"])
    return out_table, metrics


def draw_negatives(lengths: np.ndarray, per_row: int, seed: int) -> np.ndarray:
    """(rows, per_row) candidate positions: the negative of each row's k-th training tuple, uniform over its
    candidates with replacement (GPL's `random.choice`, gpl/toolkit/dataset.py), seeded."""
    rng = np.random.default_rng([seed, 0x6E6567])
    return np.floor(rng.random((len(lengths), per_row)) * lengths[:, None]).astype(np.int32)


def drawn_margins(model, params: MarginsParams, table: pd.DataFrame, passages: list[str]) -> tuple[pd.DataFrame, dict]:
    """GPL's pseudo labels for the negatives the student will draw: the draws are fixed here (seeded), each
    distinct (query, candidate) drawn is scored once, and margin = CE(q, pos) - CE(q, drawn negative); the
    margins table (one row per pair, its draws as arrays) with its metrics."""
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
    out_table = pd.DataFrame({"query": queries, "positive": positives, "score_positive": positive_scores,
                              "negatives": [d.astype(np.int32) for d in drawn], "negative_scores": list(negative_scores),
                              "margins": list(margins)})
    lengths = np.array([len(c) for c in candidates])
    metrics = {"mode": "per_step", "rows": len(table), "draws_per_row": per_row,
               "candidates_per_row": float(lengths.mean()), "scored_pairs": int(len(flat) + len(table)),
               "all_candidate_pairs": int(lengths.sum() + len(table)), "score_scale": params.score_scale,
               "margin_mean": float(margins.mean()), "margin_std": float(margins.std()),
               "share_negative_above_positive": float((margins < 0).mean())}
    log.info("margins: %d rows, %d draws each over %.1f candidates: %d Cross-Encoder pairs scored (all candidates: "
             "%d); mean margin %.3f (%s)", len(table), per_row, lengths.mean(), metrics["scored_pairs"],
             metrics["all_candidate_pairs"], metrics["margin_mean"], params.score_scale)
    return out_table, metrics


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
