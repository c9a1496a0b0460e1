"""Combining several teachers' scores of the same pairs (`teacher.ensemble`, `teacher.combine`).

- `mean`: the plain mean of the members' scores;
- `zscore`: each member's score standardised with that member's mean and standard deviation over a fixed
  reference set (its scores of the gold train pairs), the standardised scores averaged, and the average
  mapped back to the gold scale with the gold train scores' mean and standard deviation:

      s(x) = mean_g + std_g * (1/M) * sum_m (s_m(x) - mean_m) / std_m

  A fixed reference, not the pairs being scored, so a pair gets the same score whichever set it is scored
  in (test split, candidates, a shard of them). Standard deviations are population ones (ddof 0).

numpy only: the ensemble stage and the labelling stage both call it on score matrices (members x pairs).
"""

from __future__ import annotations

import numpy as np

from ..errors import DataError

COMBINATIONS = ("mean", "zscore")


def reference_statistics(member_scores: list[np.ndarray], gold: np.ndarray) -> dict:
    """Mean and std of each member's reference scores and of the gold scores (what `zscore` needs)."""
    def stats(values, what):
        values = np.asarray(values, dtype=np.float64)
        std = float(values.std())
        if not np.isfinite(std) or std == 0:
            raise DataError(f"teacher ensemble: {what} has no spread over the {len(values)} gold train pairs "
                            "(standard deviation 0): the z-score combination is undefined; use combine: mean")
        return {"mean": float(values.mean()), "std": std}

    return {"members": [stats(s, f"member {k}'s scores") for k, s in enumerate(member_scores)],
            "gold": stats(gold, "the gold score")}


def combine(scores: np.ndarray, method: str, statistics: dict | None = None) -> np.ndarray:
    """The ensemble's score of each pair: `scores` has one row per member, one column per pair."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"expected a members x pairs matrix, got shape {scores.shape}")
    if method == "mean":
        return scores.mean(axis=0)
    if method != "zscore":
        raise ValueError(f"unknown combination {method!r} (one of {', '.join(COMBINATIONS)})")
    members = statistics["members"]
    if len(members) != len(scores):
        raise ValueError(f"{len(scores)} members' scores, but statistics of {len(members)}")
    means = np.array([m["mean"] for m in members])[:, None]
    stds = np.array([m["std"] for m in members])[:, None]
    gold = statistics["gold"]
    return gold["mean"] + gold["std"] * ((scores - means) / stds).mean(axis=0)
