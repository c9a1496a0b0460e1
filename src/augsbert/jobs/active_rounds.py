"""Stage `active_rounds`: one run's rounds of active learning side by side (`rounds.json`): per round the gold labels
its teacher learned, the teacher's and (where trained) the student's test scores (with the test pairs scored, and
the steps the teacher trained), and the chosen pairs' mean uncertainty (the strategy's statistic) and score
distribution, all read from the rounds' artifacts."""

from __future__ import annotations

from pathlib import Path

from ..params import read_params
from ..data.pool import read_split
from ..sampling.active import STRATEGIES, score_distribution
from ..stages.active_rounds import ROUND_INPUTS, RoundsParams
from ..store.artifacts import artifact_dir, read_json, write_json


def _trained_steps(folder: Path) -> list[int] | None:
    """The optimizer steps of the pair model in `folder` (an ensemble: of each member, read through its spec's
    inputs), or None where its metrics do not say."""
    metrics = read_json(folder / "metrics.json")
    if isinstance(metrics.get("steps"), int):
        return [metrics["steps"]]
    members = sorted((k, v) for k, v in (read_json(folder / "spec.json").get("inputs") or {}).items()
                     if k.startswith("member_"))
    steps = [read_json(Path(path) / "metrics.json").get("steps") for _, path in members]
    return steps if steps and all(isinstance(s, int) for s in steps) else None


def _test(inputs: dict, role: str) -> dict | None:
    """Spearman and Pearson x 100 on the test split of the model in input `role` (with the test pairs scored, and
    for a teacher the steps it trained: an ensemble's members' each); None without one."""
    if role not in inputs:
        return None
    metrics = read_json(Path(inputs[role]) / "metrics.json")
    test = metrics["test"]
    entry = {"spearman": test.get("spearman"), "pearson": test.get("pearson"), "key": Path(inputs[role]).name,
             "test_pairs": test.get("n_pairs")}
    if "test_subset" in metrics:  # a seeded subset of the test split (active.test_pairs)
        entry["test_subset"] = metrics["test_subset"]
    if role.startswith("teacher_"):
        entry["steps"] = _trained_steps(Path(inputs[role]))
    return entry


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
