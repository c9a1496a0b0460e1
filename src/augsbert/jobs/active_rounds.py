"""Stage `active_rounds`: one run's rounds of active learning side by side (`rounds.json`): per round the gold labels
its teacher learned, the teacher's and (where trained) the student's test scores, and the chosen pairs' mean
uncertainty (the strategy's statistic) and score distribution, all read from the rounds' artifacts."""

from __future__ import annotations

from pathlib import Path

from ..params import read_params
from ..data.pool import read_split
from ..sampling.active import STRATEGIES, score_distribution
from ..stages.active_rounds import ROUND_INPUTS, RoundsParams
from ..store.artifacts import artifact_dir, read_json, write_json


def _test(inputs: dict, role: str) -> dict | None:
    """Spearman and Pearson x 100 on the test split of the model in input `role`; None without one."""
    if role not in inputs:
        return None
    test = read_json(Path(inputs[role]) / "metrics.json")["test"]
    return {"spearman": test.get("spearman"), "pearson": test.get("pearson"), "key": Path(inputs[role]).name}


def run(spec: dict, out: str | Path, force: bool = False) -> dict:
    params = read_params(RoundsParams, spec)
    inputs = spec["inputs"]
    rounds = []
    for r in range(params.last_round + 1):
        labelled = read_json(Path(inputs[ROUND_INPUTS["labels"].format(r)]) / "metrics.json")
        entry = {"round": r, "gold_labels": int(labelled["sizes"]["train"]),
                 "added": int(labelled.get("added", labelled["sizes"]["train"])),
                 "teacher_test": _test(inputs, ROUND_INPUTS["teacher"].format(r)),
                 "student_test": _test(inputs, ROUND_INPUTS["student"].format(r)),
                 "chosen": {"mean_uncertainty": None, "scored_mean_uncertainty": None, "teacher_score_mean": None,
                            "scores": labelled.get("scores") or score_distribution(
                                read_split(inputs[ROUND_INPUTS["labels"].format(r)], "train")["score"])}}
        if r:
            choice = read_json(Path(inputs[ROUND_INPUTS["select"].format(r)]) / "metrics.json")
            entry["chosen"].update(mean_uncertainty=choice["chosen"]["mean_uncertainty"],
                                   teacher_score_mean=choice["chosen"]["teacher_score_mean"],
                                   scored_mean_uncertainty=choice["scored_mean_uncertainty"],
                                   scored=choice["scored"], unlabelled=choice["unlabelled"])
        rounds.append(entry)
    result = {"strategy": params.chosen_by, "statistic": STRATEGIES[params.chosen_by].statistic,
              "annotator": params.labelled_by, "rounds": rounds}
    with artifact_dir(out, spec, force) as tmp:
        write_json(tmp / "rounds.json", result)
        write_json(tmp / "metrics.json", {"rounds": params.last_round,
                                          "gold_labels": [e["gold_labels"] for e in rounds],
                                          "teacher_spearman": [(e["teacher_test"] or {}).get("spearman")
                                                               for e in rounds]})
    return result
