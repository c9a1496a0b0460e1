"""The Bi-Encoder's training objective (`student.loss`): sentence-transformers' losses, and the rows each needs.

| `student.loss` | rows built from the (pair, score) table | loss (sentence-transformers) |
| --- | --- | --- |
| `cosine` | (sentence1, sentence2, score) | CosineSimilarityLoss: MSE of cos(u, v) and the score (thesis, AugSBERT) |
| `cosent` | (sentence1, sentence2, score) | CoSENTLoss: every pair ranked above every lower-scored pair of the batch |
| `angle` | (sentence1, sentence2, score) | AnglELoss: CoSENT on the angle difference in complex space |
| `mnrl` | (anchor, positive[, negative]): pairs scored >= `positive_threshold`; optional hard negative = the anchor's lowest-scored partner below `negative_threshold` | MultipleNegativesRankingLoss (in-batch negatives) |
| `margin_mse` | (anchor, positive, negative, margin): per sentence, its best partner against each lower-scored one, margin = teacher score difference | MarginMSELoss on cosine (`similarity: dot`: dot product) |
| `kl_div` | a GPL student's mined list (query, positive, negative_1..n) with the teacher's scores (stages/gpl.py) | DistillKLDivLoss (cosine or dot) |

Scores are on the project's 0-1 scale (gold rescaled, teacher scores as they come).
"""

from __future__ import annotations

import logging

import pandas as pd

from ..stages.gpl import GplParams
from ..stages.student import StudentParams

log = logging.getLogger(__name__)

LOSSES = ("cosine", "cosent", "angle", "mnrl", "margin_mse", "kl_div")
IN_BATCH = ("mnrl",)  # the batch holds the negatives: length-grouped batches would change them


def _long(table: pd.DataFrame) -> pd.DataFrame:
    """Each pair from both sides: (anchor, partner, score); a pair is symmetric for a cosine student."""
    forward = table[["sentence1", "sentence2", "score"]].set_axis(["anchor", "partner", "score"], axis=1)
    backward = table[["sentence2", "sentence1", "score"]].set_axis(["anchor", "partner", "score"], axis=1)
    return pd.concat([forward, backward], ignore_index=True)


def student_rows(table: pd.DataFrame, params: StudentParams) -> pd.DataFrame:
    """The training rows `params.loss` learns from, built from pairs with scores (see the module table)."""
    loss = params.loss
    if loss in ("cosine", "cosent", "angle"):
        return table[["sentence1", "sentence2", "score"]].reset_index(drop=True)
    if loss == "mnrl":
        positives = table[table["score"] >= params.positive_threshold]
        rows = positives[["sentence1", "sentence2"]].set_axis(["anchor", "positive"], axis=1).reset_index(drop=True)
        if params.hard_negatives:
            low = _long(table[table["score"] < params.negative_threshold])
            hardest = low.sort_values(["anchor", "score", "partner"], kind="stable").drop_duplicates("anchor")
            rows = rows.merge(hardest.set_axis(["anchor", "negative", "_s"], axis=1), on="anchor", how="inner")
            rows = rows.drop(columns="_s")
            log.info("mnrl: %d of %d positive pairs have a hard negative (score < %s) and are kept",
                     len(rows), len(positives), params.negative_threshold)
        if rows.empty:
            raise ValueError(f"student.loss mnrl: no pair scores >= positive_threshold {params.positive_threshold}"
                             + (" with a hard negative" if params.hard_negatives else ""))
        return rows
    if loss == "margin_mse":
        long = _long(table).drop_duplicates(["anchor", "partner"])
        long = long.sort_values(["anchor", "score", "partner"], ascending=[True, False, True], kind="stable")
        best = long.drop_duplicates("anchor").set_axis(["anchor", "positive", "positive_score"], axis=1)
        rest = long[long.duplicated("anchor")].set_axis(["anchor", "negative", "negative_score"], axis=1)
        rows = best.merge(rest, on="anchor")
        rows["label"] = rows["positive_score"] - rows["negative_score"]
        rows = rows[rows["positive"] != rows["negative"]]
        if rows.empty:
            raise ValueError("student.loss margin_mse: no sentence has two partners to compare")
        return rows[["anchor", "positive", "negative", "label"]].reset_index(drop=True)
    if loss == "kl_div":
        raise ValueError("student.loss kl_div learns from a mined list with teacher scores (a GPL student), "
                         "not from scored pairs")
    raise ValueError(f"unknown student.loss {loss!r} (one of {', '.join(LOSSES)})")


def student_loss(model, params: StudentParams | GplParams):
    """The sentence-transformers loss object of `params.loss` for `model`."""
    from sentence_transformers import util
    from sentence_transformers.sentence_transformer import losses

    loss = params.loss
    if loss == "cosine":
        return losses.CosineSimilarityLoss(model)
    if loss == "cosent":
        return losses.CoSENTLoss(model, scale=params.scale)
    if loss == "angle":
        return losses.AnglELoss(model, scale=params.scale)
    if loss == "mnrl":
        return losses.MultipleNegativesRankingLoss(model, scale=params.scale)
    similarity = util.pairwise_dot_score if params.similarity == "dot" else util.pairwise_cos_sim
    if loss == "margin_mse":  # cosine by default, as AugSBERT's teacher scores are cosine-scale; GPL: dot
        return losses.MarginMSELoss(model, similarity_fct=similarity)
    if loss == "kl_div":  # the library's temperature 1.0 (its default since v5.0.1)
        return losses.DistillKLDivLoss(model, similarity_fct=similarity)
    raise ValueError(f"unknown student.loss {loss!r} (one of {', '.join(LOSSES)})")
