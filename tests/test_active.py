"""Active learning (issue 57, docs/methods/active.md): the strategies pick what their statistic says, the oracle
reveals exactly the chosen pairs, a person's file stops and resumes the rounds, and the curves are drawn.

The strategy tests give a strategy constructed scores (`Arrays`, a Scorer of arrays) and compare its pick with the
ids the statistic names; the dropout passes run on the tiny BERT; the oracle runs the three jobs in this process on
a hand-made data artifact (no model: `random` scores nothing); two Snakemake runs on the tiny model cover the file
annotator and a CI-sized cut of `demo_active` (the shipped grid is planned whole by test_rehearsal.py and rehearsed
by its every-kind test).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import sys
import typing
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from augsbert.errors import ConfigError, DataError, LabellingStop
from augsbert.scheduling import progress, stops
from augsbert.sampling import active as al
from conftest import REPO, plan_shipped
from workflow_helpers import JOB_SLOTS, checkout, job_stats, keep_experiments, planned, run, snakemake


def pairs_of(n: int, prefix: str = "") -> list[tuple[str, str]]:
    return [(f"{prefix}a{i}", f"{prefix}b{i}") for i in range(n)]


class Arrays:
    """A Scorer of constructed arrays: member scores, dropout passes, teacher scores by pair, pair vectors."""

    def __init__(self, members=None, passes=None, teacher: dict | None = None, vectors=None):
        self._members, self._passes, self._teacher, self._vectors = members, passes, teacher or {}, vectors
        self.calls = []

    def members(self, pairs):
        return np.asarray(self._members, dtype=float)

    def passes(self, pairs, passes, seed):
        self.calls.append(("passes", passes, seed))
        return np.asarray(self._passes, dtype=float)

    def teacher(self, pairs):
        return np.array([self._teacher.get(p, np.nan) for p in pairs])

    def embed(self, pairs):
        return np.asarray(self._vectors, dtype=float)[[int(a[1:]) for a, _ in pairs]]


def test_every_strategy_of_the_section_is_in_the_registry_with_its_source():
    from augsbert.stages.active_select import ActiveOptions

    assert set(typing.get_args(typing.get_type_hints(ActiveOptions)["strategy"])) == set(al.STRATEGIES)
    assert all(s.citation and s.statistic for s in al.STRATEGIES.values())


def test_random_is_its_seeded_draw():
    pairs = pairs_of(50)
    picked = al.choose("random", al.Request(pairs, 7, seed=42, round=3, labelled=[]), None)
    assert picked.positions.tolist() == np.random.default_rng([42, 3]).choice(50, size=7, replace=False).tolist()
    assert np.isnan(picked.statistic).all()
    again = al.choose("random", al.Request(pairs, 7, seed=42, round=4, labelled=[]), None)
    assert again.positions.tolist() != picked.positions.tolist()  # each round draws anew


def test_committee_picks_the_pairs_its_z_scored_members_disagree_on():
    a = np.arange(8.0)
    b = 10 * a
    b[2], b[5] = 60.0, 0.0  # the second member disagrees on pairs 2 and 5, on a scale ten times the first's
    scores = np.stack([a, b, a + 100])  # the third: the first member shifted (z-scored, the same)
    picked = al.choose("committee", al.Request(pairs_of(8), 2, 1, 1, []), Arrays(members=scores))
    assert picked.positions.tolist() == [5, 2]
    z = (scores - scores.mean(1, keepdims=True)) / scores.std(1, keepdims=True)
    np.testing.assert_allclose(picked.statistic, z.std(0))
    # the spread of the raw scores would have taken pair 0, where the members differ only by their scales
    assert np.argsort(-scores.std(0), kind="stable")[:2].tolist() == [5, 0]
    rescaled = al.choose("committee", al.Request(pairs_of(8), 2, 1, 1, []), Arrays(members=scores * [[1], [1e3], [1]]))
    assert rescaled.positions.tolist() == [5, 2]


def test_mc_dropout_picks_the_pairs_of_largest_variance_over_its_passes():
    passes = np.array([[0.5, 0.1, 0.4, 0.25, 0.0, 0.3],
                       [0.5, 0.9, 0.6, 0.35, 1.0, 0.3],
                       [0.5, 0.1, 0.4, 0.25, 0.0, 0.3],
                       [0.5, 0.9, 0.6, 0.35, 1.0, 0.3]])  # variances 0, .16, .01, .0025, .25, 0
    scorer = Arrays(passes=passes)
    picked = al.choose("mc_dropout", al.Request(pairs_of(6), 3, seed=9, round=2, labelled=[], passes=4), scorer)
    assert picked.positions.tolist() == [4, 1, 2]
    np.testing.assert_allclose(picked.statistic, passes.var(0))
    assert scorer.calls == [("passes", 4, al.round_seed(9, 2))]


def test_one_per_cluster_never_takes_a_second_pair_of_a_cluster_while_another_has_one():
    """In turns: a cluster gives its (j+1)-th pair only once every other cluster has given j or has no candidate
    left; so no cluster gives a second pair while another that still has a candidate has given none, and each
    cluster's pairs go most uncertain first."""
    assert al.one_per_cluster(np.array([9, 8, 7, 1, 2, 0.5]), np.array([0, 0, 0, 1, 1, 2]), 4).tolist() == [0, 4, 5, 1]
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(1, 25))
        clusters, statistic = rng.integers(0, 5, n), rng.random(n).round(1)  # ties too
        k = int(rng.integers(1, n + 1))
        picked = al.one_per_cluster(statistic, clusters, k).tolist()
        assert len(picked) == k == len(set(picked))
        for i, position in enumerate(picked):
            taken = picked[:i]
            given = {c: sum(clusters[t] == c for t in taken) for c in set(clusters.tolist())}
            mine = given[clusters[position]]
            for other, count in given.items():
                left = any(clusters[j] == other and j not in taken for j in range(n))
                assert other == clusters[position] or count >= mine or not left
            same = [j for j in range(n) if clusters[j] == clusters[position] and j not in taken]
            assert statistic[position] == max(statistic[same])  # the cluster's most uncertain pair left


def test_diverse_spreads_the_batch_over_the_clusters_of_its_most_uncertain_pairs():
    variance = np.array([9, 8.5, 8, 7.5, 7, 6.5, 3, 2.5, 2, 1, 0.5, 0.25])  # pairs 0-5 most uncertain
    passes = np.stack([np.zeros(12), 2 * np.sqrt(variance)])  # variance over the two passes: `variance`
    centres = np.array([[10.0, 0, 0], [0, 10.0, 0], [0, 0, 10.0]])
    vectors = np.repeat(centres, [6, 3, 3], axis=0) + np.random.default_rng(1).normal(0, 0.1, (12, 3))
    request = al.Request(pairs_of(12), 3, seed=4, round=1, labelled=[], passes=2, candidate_factor=4)
    picked = al.choose("diverse", request, Arrays(passes=passes, vectors=vectors))
    assert picked.positions.tolist() == [0, 6, 9]  # the most uncertain pair of each of the three groups
    assert al.choose("mc_dropout", request, Arrays(passes=passes)).positions.tolist() == [0, 1, 2]
    assert len(set(picked.cluster[[0, 6, 9]])) == 3


def test_kde_picks_where_the_labelled_pairs_scores_are_thinnest():
    labelled = pairs_of(10, "l")
    candidates = pairs_of(5)
    scores = {**{p: 0.5 for p in labelled}, **dict(zip(candidates, [0.5, 0.55, 0.9, 0.1, 0.92]))}
    picked = al.choose("kde", al.Request(candidates, 2, 1, 1, labelled), Arrays(teacher=scores))
    # 0.92 lies farthest from the labelled 0.5s; once it counts as labelled, 0.9 is dense and 0.1 is next
    assert picked.positions.tolist() == [4, 3]


def test_a_batch_larger_than_what_is_left_is_refused():
    with pytest.raises(DataError, match="7 pairs to choose in round 2, but only 5 unlabelled"):
        al.choose("random", al.Request(pairs_of(5), 7, 1, 2, []), None)


@pytest.mark.parametrize("arch", ["cbe", "ce"])
def test_mc_dropout_passes_are_seeded_and_leave_the_model_as_it_was(tiny_model, arch):
    from augsbert.models.architectures import ARCHITECTURES
    from augsbert.models.uncertainty import dropout_passes

    architecture = ARCHITECTURES[arch]
    params = SimpleNamespace(max_length=32, config_kwargs=None, activation="sigmoid")
    model = architecture.build(tiny_model, params, "cpu")
    model.eval()
    pairs = [(f"dog cat {i}", f"bank loan {i % 3}") for i in range(10)]
    plain = architecture.predict(model, pairs, 4, params)
    first = dropout_passes(architecture, model, pairs, 3, 5, 4, params)
    assert first.shape == (3, 10) and (first.var(axis=0) > 0).all()  # dropout on: every pair's passes differ
    np.testing.assert_array_equal(dropout_passes(architecture, model, pairs, 3, 5, 4, params), first)
    assert not np.array_equal(dropout_passes(architecture, model, pairs, 3, 6, 4, params), first)
    assert not any(m.training for m in model.modules())  # every module back in eval mode
    np.testing.assert_array_equal(architecture.predict(model, pairs, 4, params), plain)


# ---- the oracle ---------------------------------------------------------------------------------------------------

def _data_artifact(folder: Path, n: int = 40) -> pd.DataFrame:
    folder.mkdir(parents=True)
    train = pd.DataFrame({"sentence1": [f"first {i}" for i in range(n)], "sentence2": [f"second {i}" for i in range(n)],
                          "score": np.arange(n) / n})
    train.to_parquet(folder / "train.parquet", index=False)
    for split in ("dev", "test"):
        train.head(8).to_parquet(folder / f"{split}.parquet", index=False)
    (folder / "metrics.json").write_text(json.dumps({"sizes": {"train": n, "dev": 8, "test": 8, "unlabeled": 0}}))
    return train


def test_the_oracle_reveals_exactly_the_chosen_pairs(tmp_path):
    """A withheld score is poisoned (NaN) in the data artifact: the oracle, the only reader of withheld scores,
    still labels its round, since it reveals the chosen pairs' scores and no other; poisoning a chosen pair's score
    stops it. Nothing written after the gold subset holds a withheld score."""
    from augsbert.jobs import active_label, active_select, gold_subset

    data = tmp_path / "data"
    train = _data_artifact(data)
    subset, choice, labelled = (tmp_path / name for name in ("subset", "choice", "labelled"))
    gold_subset.run({"params": {"fraction": 0.25, "seed": 7}, "inputs": {"data": str(data)}}, subset)
    active_select.run({"params": {"strategy": "random", "batch": 0.1, "round": 1, "seed": 7},
                       "inputs": {"pool": str(subset)}}, choice)
    chosen = pd.read_parquet(choice / "chosen.parquet")
    rest = pd.read_parquet(subset / "unlabeled_pairs.parquet")
    assert "score" not in chosen and "score" not in rest
    draw = np.random.default_rng([7, 1]).choice(len(rest), size=4, replace=False)  # random: its seeded draw
    assert chosen["pair_id"].tolist() == draw.tolist()
    assert chosen["sentence1"].tolist() == rest["sentence1"].iloc[draw].tolist()

    kept = set(pd.read_parquet(subset / "train.parquet")["sentence1"])
    revealed = set(chosen["sentence1"])
    poisoned = train.assign(score=[s if t in kept | revealed else np.nan for t, s in zip(train["sentence1"],
                                                                                         train["score"])])
    poisoned.to_parquet(data / "train.parquet", index=False)
    spec = {"params": {"annotator": "oracle", "round": 1, "subset_fraction": 0.25, "subset_seed": 7},
            "inputs": {"pool": str(subset), "selection": str(choice), "gold": str(data)}}
    metrics = active_label.run(spec, labelled)
    after = pd.read_parquet(labelled / "train.parquet")
    truth = dict(zip(train["sentence1"], train["score"]))
    assert len(after) == 10 + 4 and set(after["sentence1"]) == kept | revealed
    assert after["score"].tolist() == [truth[t] for t in after["sentence1"]]  # the dataset's own scores, exactly
    assert after["sentence1"].tolist()[10:] == chosen["sentence1"].tolist()  # in the order chosen
    left = pd.read_parquet(labelled / "unlabeled_pairs.parquet")
    assert "score" not in left and len(left) == 26 and not set(left["sentence1"]) & revealed
    assert sorted(left["pair_id"]) == sorted(set(range(30)) - set(draw.tolist()))
    assert metrics["gold_pairs_of"] == 40 and metrics["added"] == 4 and metrics["sizes"]["train"] == 14

    poisoned.loc[poisoned["sentence1"] == chosen["sentence1"].iloc[2], "score"] = np.nan
    poisoned.to_parquet(data / "train.parquet", index=False)
    with pytest.raises(DataError, match=f"no score for pair id {chosen['pair_id'].iloc[2]} "):
        active_label.run(spec, tmp_path / "again")


def test_a_file_round_stops_for_a_person_and_a_rehearsal_stands_in(tmp_path, monkeypatch):
    """Not there when planned: the labelling job writes the round's pairs and stops; in a rehearsal it fills them with
    seeded stand-in scores within the scale and goes on, as it stands in for models and data."""
    from augsbert.config import rehearsal
    from augsbert.jobs import active_label, active_select, gold_subset

    data = tmp_path / "data"
    _data_artifact(data)
    gold_subset.run({"params": {"fraction": 0.25, "seed": 7}, "inputs": {"data": str(data)}}, tmp_path / "subset")
    active_select.run({"params": {"strategy": "random", "batch": 0.1, "round": 1, "seed": 7},
                       "inputs": {"pool": str(tmp_path / "subset")}}, tmp_path / "choice")
    monkeypatch.chdir(tmp_path)
    spec = {"params": {"annotator": "file", "round": 1, "experiment": "mine", "scale": [0, 5], "annotations": None,
                       "path": "annotate/mine/round_1.csv"},
            "inputs": {"pool": str(tmp_path / "subset"), "selection": str(tmp_path / "choice")}}
    monkeypatch.delenv(rehearsal.STANDINS_ENV, raising=False)
    monkeypatch.setenv(stops.CONTINUE_ENV, ".venv/bin/augsbert run my.yaml mine")  # as `augsbert run` hands it down
    with pytest.raises(LabellingStop) as stop:  # a stop for a person, not a DataError (issue 64, 11)
        active_label.run(spec, tmp_path / "labelled")
    assert str(stop.value) == ("annotate/mine/round_1.csv: round 1's 4 pairs to label are written there; fill its "
                               "score column (0 to 5), then continue with `.venv/bin/augsbert run my.yaml mine`")
    written = pd.read_csv(tmp_path / "annotate" / "mine" / "round_1.csv")
    assert written["score"].isna().all() and len(written) == 4 and not (tmp_path / "labelled").exists()
    with pytest.raises(ConfigError, match="written since this job was planned"):  # never over a person's file
        active_label.run(spec, tmp_path / "labelled")

    (tmp_path / "annotate" / "mine" / "round_1.csv").unlink()
    monkeypatch.setenv(rehearsal.STANDINS_ENV, str(tmp_path / "standins"))
    read, write = os.pipe()  # the workflow's console (a stage rule's fd 3)
    monkeypatch.setenv(progress.PROGRESS_FD_ENV, str(write))
    metrics = active_label.run(spec, tmp_path / "labelled")
    os.close(write)
    console = os.read(read, 100000).decode()
    os.close(read)
    # the person's labels taken in, on the console, not only in the job's log (issue 64, 13)
    assert console == ("augsbert: annotate/mine/round_1.csv: round 1 (file): 4 pairs labelled, 14 gold pairs in all, "
                       "26 left unlabelled\n")
    filled = pd.read_csv(tmp_path / "annotate" / "mine" / "round_1.csv")
    added = pd.read_parquet(tmp_path / "labelled" / "train.parquet").tail(4)
    assert filled["score"].between(0, 5).all() and metrics["added"] == 4
    np.testing.assert_allclose(added["score"], filled["score"] / 5)


def _reachable(plan, keys) -> set[str]:
    seen, todo = set(), list(keys)
    while todo:
        key = todo.pop()
        if key not in seen:
            seen.add(key)
            todo += [k for _, k in plan.nodes[key].inputs]
    return seen


def test_only_the_oracle_and_the_gold_subset_read_the_dataset_s_train_scores():
    """In every active cell of the shipped demo, the data artifact (the only place a withheld score is) is an
    input of the gold subset and of the oracle (as `gold`), and of no other node the run needs."""
    plan = plan_shipped(plan=())
    for name in ("demo_active.random.lee", "demo_active.committee.lee", "demo_active.diverse.lee"):
        experiment = plan.experiment(name)
        runs = experiment.runs[42]
        readers = {(plan.nodes[key].stage, role) for key in _reachable(plan, runs.values())
                   for role, k in plan.nodes[key].inputs if k == runs["data"]}
        assert readers == {("gold_subset", "data"), ("active_label", "gold")}, name


# ---- planning ------------------------------------------------------------------------------------------------------

def _experiment(**options) -> dict:
    return {"experiments": {"x": {"dataset": "lee", "models": ["teacher"], "gold_fraction": 0.1,
                                  "active": {"rounds": 2, "batch": 0.1}, **options}}}


@pytest.mark.parametrize("options, message", [
    ({"gold_fraction": 1},
     "experiments.x.active.rounds: 2 rounds of active learning start from a gold_fraction subset"),
    ({"active": {"rounds": 4, "batch": 0.3}}, "gold_fraction 0.1 + 4 rounds x batch 0.3 = 1.3 of the gold train"),
    ({"active": {"rounds": 1, "strategy": "committee"}}, "experiments.x.active.strategy: committee: the committee is "
                                                         "teacher.ensemble, which is empty"),
    ({"active": {"rounds": 1, "strategy": "mc_dropout"}, "teacher": {"ensemble": [{}, {"seed": 1}]}},
     "mc_dropout scores with one teacher's dropout"),
    ({"active": {"rounds": 1, "annotator": "file"}, "seeds": [1, 2]}, "a person labels one sequence of rounds"),
    ({"models": ["zero_shot"]}, "models lists neither teacher nor student"),
])
def test_settings_active_learning_cannot_run_with_stop_the_plan(options, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("+", r"\+")):
        plan_shipped(_experiment(**options), grids=False, plan=())


def test_off_plans_nothing_and_the_rounds_are_sized_before_they_run(tmp_path, monkeypatch):
    from augsbert.stages.sizes import data_sizes

    monkeypatch.chdir(tmp_path)
    plan = plan_shipped(_experiment(active={"rounds": 2, "batch": 0.1, "strategy": "mc_dropout"}), grids=False,
                        plan=())
    runs = plan.experiment("x").runs[42]
    assert plan.nodes[runs["gold_subset"]].stage == "active_label"  # the last round's gold is the run's gold
    assert [data_sizes(plan.nodes[runs[r]], plan)["train"] for r in ("active_label_1", "active_label_2")] == [60, 90]
    teacher = plan.nodes[runs["teacher"]]
    assert dict(teacher.inputs)["data"] == runs["active_label_2"]
    off = plan_shipped({"experiments": {"y": {"dataset": "lee", "models": ["teacher"], "gold_fraction": 0.1}}},
                       grids=False, plan=()).experiment("y").runs[42]
    assert not [role for role in off if role.startswith("active")]
    assert plan.nodes[off["teacher"]].key == plan.nodes[runs["active_teacher_0"]].key  # round 0: the few-label teacher


def test_every_round_trains_a_student_on_its_own_teacher_s_labels():
    plan = plan_shipped(_experiment(models=["teacher", "student"], candidates={"strategies": ["target_pairs"]},
                                    active={"rounds": 2, "batch": 0.1, "students": "every_round"}), grids=False,
                        plan=())
    runs = plan.experiment("x").runs[42]
    node = plan.nodes
    for r in (0, 1):
        student = node[runs[f"active_student_{r}"]]
        labels = node[dict(student.inputs)["labels"]]
        assert dict(labels.inputs)["teacher"] == runs[f"active_teacher_{r}"]
        assert dict(student.inputs)["data"] == runs[f"active_label_{r}"]  # its round's gold
    summary = dict(node[runs["active_rounds"]].inputs)
    assert [summary[f"student_{r}"] for r in range(3)] == [runs["active_student_0"], runs["active_student_1"],
                                                           runs["student"]]
    assert [summary[f"teacher_{r}"] for r in range(3)] == [runs["active_teacher_0"], runs["active_teacher_1"],
                                                           runs["teacher"]]


def test_a_strategy_without_its_random_baseline_has_no_curve():
    from augsbert.reporting.curves import curve_spec

    grid = {"description": "g", "columns": {"lee": {"dataset": "lee"}},
            "options": {"models": ["teacher"], "gold_fraction": 0.1, "active": {"rounds": 1, "batch": 0.1}},
            "axes": {"strategy": {"mc": {"active": {"strategy": "mc_dropout"}},
                                  "kde": {"active": {"strategy": "kde"}}}}}
    plan = plan_shipped({"grids": {"g": grid}}, grids=False, plan=())
    with pytest.raises(ConfigError, match="g.mc.lee \\(mc_dropout\\) has no random baseline in column lee"):
        curve_spec(plan, "g")
    grid["axes"]["strategy"]["random"] = {"active": {"strategy": "random"}}
    spec = curve_spec(plan_shipped({"grids": {"g": grid}}, grids=False, plan=()), "g")
    assert {line["experiment"]: line["baseline"] for line in spec["columns"][0]["lines"]} == {
        "g.mc.lee": "g.random.lee", "g.kde.lee": "g.random.lee", "g.random.lee": "g.random.lee"}


# ---- the round protocol (issue 65) ---------------------------------------------------------------------------------

def test_dev_selection_is_keyed_only_where_a_pass_can_end_inside_warm_up():
    """Dev selection keeps only passes after warm-up: that can change a teacher only where a pass can end inside
    warm-up (epochs E with warmup_ratio x E > 1; a budget whose warm-up holds 2 steps or more), so `selection: dev`
    enters the key there and nowhere else (every shipped key unchanged: tests/test_plan.py -k shipped)."""
    from augsbert.stages.teacher import dev_may_meet_warmup

    def may(**options):
        return dev_may_meet_warmup({"max_steps": None, "epochs": 3, "warmup_ratio": 0.1, **options})

    assert not may() and not may(epochs=10) and may(epochs=11) and may(warmup_ratio=0.5)
    assert may(max_steps=360) and may(max_steps=15) and not may(max_steps=10) and not may(max_steps=0)
    assert not may(max_steps=360, warmup_ratio=0)

    def params(teacher: dict) -> dict:
        plan = plan_shipped(_experiment(teacher=teacher), grids=False, plan=())
        return plan.nodes[plan.experiment("x").runs[42]["teacher"]].params

    assert "selection" not in params({}) and "selection" not in params({"epochs": 10})
    assert params({"max_steps": 360})["selection"] == "dev" and params({"epochs": 11})["selection"] == "dev"
    assert params({"max_steps": 360, "selection": "last"})["selection"] == "last"


def _protocol_plan(**active):
    teacher = {"max_steps": 120, "selection": "last"}
    bagged = {"ensemble": [{"bag": 0.8}, {"seed": 1, "bag": 0.8}], **teacher}
    base = {"dataset": "lee", "models": ["teacher"], "gold_fraction": 0.1, "seeds": [42, 43], "teacher": teacher,
            "active": {"rounds": 2, "batch": 0.1, **active}}
    experiments = {"x": base, "y": {**base, "active": {**base["active"], "strategy": "kde"}},
                   "c": {**base, "teacher": bagged, "active": {**base["active"], "strategy": "committee"}},
                   "ce": {**base, "teacher": {**bagged, "arch": "ce"}, "active": {**base["active"],
                                                                                    "strategy": "committee"}}}
    plan = plan_shipped({"experiments": experiments}, grids=False, plan=())
    return plan, {name: plan.experiment(name).runs for name in experiments}


def test_the_untrained_teacher_is_one_node_per_curve_and_the_options_key_what_they_change():
    """The untrained teacher (max_steps 0) is planned beside every run's rounds: a CBE's has no seeded part, so every
    strategy, ensemble member and seed of the same settings and round 0 shares it; a Cross-Encoder's members differ
    by their seeded head. `active.test_pairs` keys the rounds' teachers but the last; `bag` keys each member."""
    plan, runs = _protocol_plan(test_pairs=20)
    node = plan.nodes
    untrained = node[runs["x"][42]["active_teacher_untrained"]]
    assert untrained.stage == "teacher" and untrained.params["max_steps"] == 0 and untrained.params["seed"] == 0
    assert not {"lr", "batch_size", "warmup_ratio", "selection", "bag", "test_pairs", "epochs"} & set(untrained.params)
    assert dict(untrained.inputs)["data"] == runs["x"][42]["active_label_0"]  # round 0's gold (not learned)
    assert {runs[e][42]["active_teacher_untrained"] for e in ("x", "y", "c")} == {untrained.key}
    ce = node[runs["ce"][42]["active_teacher_untrained"]]
    assert ce.stage == "teacher_ensemble" and len(
        {node[k].params["seed"] for r, k in ce.inputs if r.startswith("member_")}) == 2
    for r in (0, 1):
        assert node[runs["x"][42][f"active_teacher_{r}"]].params["test_pairs"] == 20
        assert node[runs["c"][42][f"active_member_{r}_1"]].params["bag"] == 0.8
    assert "test_pairs" not in node[runs["x"][42]["teacher"]].params  # the last round: the whole test split
    assert node[runs["c"][42]["teacher_member_0"]].params["bag"] == 0.8
    plain, plain_runs = _protocol_plan()
    assert "test_pairs" not in plain.nodes[plain_runs["x"][42]["active_teacher_0"]].params
    assert plain_runs["x"][42]["active_teacher_untrained"] == untrained.key


def test_the_estimate_prices_the_untrained_teacher_and_a_round_s_test_subset(tmp_path, monkeypatch):
    """The untrained teacher trains nothing: its estimate is its test scoring (0 steps); a round's teacher with
    `active.test_pairs` prices the subset it scores, the last round the whole test split."""
    from augsbert.scheduling.estimate import job_estimate

    monkeypatch.chdir(tmp_path)
    plan, runs = _protocol_plan(test_pairs=20)
    untrained = job_estimate(plan, runs["x"][42]["active_teacher_untrained"])
    assert untrained.steps == 0 and untrained.what == "no training step; scoring 105 test pairs"
    assert job_estimate(plan, runs["x"][42]["active_teacher_0"]).what == "120 steps of 16; scoring 20 dev/test pairs"
    assert job_estimate(plan, runs["x"][42]["teacher"]).what == "120 steps of 16; scoring 105 dev/test pairs"


def test_a_round_teacher_of_few_steps_is_warned_once_per_experiment(capsys):
    """One line per experiment (two seeds plan it twice), not an error; a step budget of 100 or more says nothing."""
    plan_shipped(_experiment(seeds=[1, 2], teacher={"epochs": 1}), grids=False, plan=("x",))
    err = capsys.readouterr().err
    assert err.count("warning: experiments.x: active round 0's teacher trains 4 steps (1 epoch(s) of 30 pairs, "
                     "both orders, at batch 16), fewer than 100") == 1
    plan_shipped(_experiment(teacher={"max_steps": 100, "selection": "last"}), grids=False, plan=("x",))
    assert "warning" not in capsys.readouterr().err


def test_the_measurement_running_on_cpu_active_keeps_its_keys(tmp_path, monkeypatch):
    """config/measure/active_cpu.yaml's `cpu_active` (the STS-B measurement of the round protocol) was planned and
    started before the protocol's options: every key it had (tests/data/cpu_active_keys.json, planned with an
    empty data_dir at ec4bc9d) is unchanged; new nodes (the untrained teacher) may be added."""
    from augsbert.config.load import merged_files, prepare_config
    from augsbert.plan import Plan

    monkeypatch.chdir(tmp_path)
    repo = Path(__file__).resolve().parents[1]
    raw = merged_files([repo / "config" / "config.yaml", repo / "config" / "measure" / "active_cpu.yaml"])
    plan = Plan(prepare_config({**raw, "data_dir": str(tmp_path / "raw")}, lazy=True))
    pinned = json.loads((repo / "tests" / "data" / "cpu_active_keys.json").read_text())
    changed = [f"{name} {seed} {role}" for name, seeds in pinned.items() for seed, roles in seeds.items()
               for role, key in roles.items() if plan.experiment(name).runs[int(seed)].get(role) != key]
    assert not changed and len(pinned) == 5
    assert plan.experiment("cpu_active.random.stsb").runs[42]["active_teacher_untrained"]


def test_a_round_s_teacher_job_bags_scores_a_test_subset_and_the_rounds_say_its_steps(tiny_model, tmp_path):
    """The teacher job: an untrained one (max_steps 0) reads no dev label (its dev split here is not even a parquet
    file) and scores the whole test split; a bagged member learns its seeded share of the gold; a round's teacher
    with `test_pairs` scores the seeded subset (augsbert.data.pool.test_draw); `active_rounds` records each round's
    steps and test pairs."""
    from augsbert.data.pool import subset_rows, test_draw
    from augsbert.jobs import active_rounds
    from augsbert.jobs.teacher import run as run_teacher
    from conftest import theme_pairs, train_params

    data = tmp_path / "data"
    data.mkdir()
    theme_pairs(20, 5).to_parquet(data / "train.parquet")
    test = theme_pairs(24, 7)
    test.to_parquet(data / "test.parquet")
    (data / "dev.parquet").write_bytes(b"not a parquet file: an untrained teacher must not read it")
    (data / "metrics.json").write_text(json.dumps({"sizes": {"train": 20, "dev": 8, "test": 24, "unlabeled": 0}}))

    def teacher(name: str, **params) -> dict:
        spec = {"stage": "teacher", "key": name, "inputs": {"data": str(data)},
                "params": {**train_params("cbe", batch_size=8, symmetric=False, selection="last").to_json(),
                           "model": tiny_model, **params}}
        return run_teacher(spec, tmp_path / "teacher" / name, device="cpu")

    untrained = teacher("untrained", max_steps=0)
    assert untrained["steps"] == 0 and untrained["selection"] == "untrained" and untrained["test"]["n_pairs"] == 24
    assert "test_subset" not in untrained
    bagged = teacher("bagged", max_steps=3, bag=0.5, seed=42001)
    assert bagged["train_pairs"] == 10 and len(subset_rows(20, 0.5, 42001)) == 10 and bagged["steps"] == 3
    subset = teacher("round", max_steps=3, test_pairs=10)
    assert subset["test"]["n_pairs"] == 10 and subset["test_subset"] == {"pairs": 10, "of": 24}
    scored = pd.read_parquet(tmp_path / "teacher" / "round" / "predictions.parquet")
    assert scored["sentence1"].tolist() == test["sentence1"].iloc[test_draw(24, 10)].tolist()
    assert list(test_draw(24, 10)) == list(test_draw(24, 10)) and len(test_draw(5, 10)) == 5

    labelled = tmp_path / "labelled"
    labelled.mkdir()
    (labelled / "metrics.json").write_text(json.dumps({"sizes": {"train": 20}, "scores": {"mean": 0.5}}))
    rounds = active_rounds.run({"stage": "active_rounds", "key": "k", "params": {
        "last_round": 0, "chosen_by": "random", "labelled_by": "oracle"}, "inputs": {
        "labelled_0": str(labelled), "teacher_0": str(tmp_path / "teacher" / "round")}}, tmp_path / "rounds")
    assert rounds["rounds"][0]["teacher_test"]["steps"] == [3]
    assert rounds["rounds"][0]["teacher_test"]["test_subset"] == {"pairs": 10, "of": 24}


def _doc(name: str, strategy: str, means: list[float], stds: list[float], untrained: float | None = 50.0,
         seeds=(1, 2), steps: int = 100, subset: dict | None = None) -> dict:
    """A results document of an active experiment whose round r teacher scores means[r] ± stds[r] (two seeds)."""
    active, per_seed = {}, {}
    for k, seed in enumerate(seeds):
        sign = 1 if k % 2 == 0 else -1
        rounds = [{"round": r, "gold_labels": 30 * (r + 1), "added": 30, "student_test": None, "chosen": {},
                   "teacher_test": {"spearman": m + sign * s / 2 ** 0.5 if len(seeds) > 1 else m, "steps": [steps],
                                    **({"test_subset": subset} if subset and r < len(means) - 1 else {})}}
                  for r, (m, s) in enumerate(zip(means, stds))]
        active[str(seed)] = {"strategy": strategy, "rounds": rounds}
        per_seed[str(seed)] = {"spearman": untrained, "steps": 0}
    models = {} if untrained is None else {"active_teacher_untrained": {
        "per_seed": per_seed, "summary": {"spearman": {"mean": untrained, "std": 0.0, "n": len(seeds)}}}}
    return {"experiment": name, "active": active, "models": models, "seeds": list(seeds), "config_hash": "h",
            "data": {"sizes": {"train": 300}}}


def _curve(random: dict, other: dict | None = None):
    from augsbert.reporting.curves import assemble

    lines = [{"experiment": "r", "label": "random", "strategy": "random", "baseline": "r"}]
    docs = {"r": random}
    if other:
        lines.append({"experiment": "m", "label": "MC dropout", "strategy": "mc_dropout", "baseline": "r"})
        docs["m"] = other
    spec = {"grid": "g", "description": "", "columns": [{"column": "lee", "lines": lines, "ceilings": []}],
            "experiments": sorted(docs)}
    return spec, assemble(spec, docs), docs


@pytest.mark.parametrize("falls", [False, True])
def test_the_curve_starts_at_the_untrained_teacher_and_says_when_its_baseline_falls(falls, tmp_path):
    """Issue 65's sanity line: every curve starts at 0 labels with the untrained teacher (table, CSV, chart), and a
    random baseline whose mean falls between two budgets by more than its seed spread says it cannot be read (in
    the table, the CSV, on the chart and on the console); a curve that rises within its spread says nothing. The
    rising one: 50 (untrained), 55 ± 1, 60 ± 1, 59.5 ± 1 (a dip of 0.5 within the spread); the falling one: 55 ± 1
    then 52 ± 0.5 (a fall of 3). Fails on the old curve code (no untrained column, no flag)."""
    from augsbert.reporting import console
    from augsbert.reporting.curves import line_chart, long_table, markdown

    means = [55.0, 52.0, 60.0] if falls else [55.0, 60.0, 59.5]
    stds = [1.0, 0.5, 1.0] if falls else [1.0, 1.0, 1.0]
    spec, columns, docs = _curve(_doc("r", "random", means, stds, subset={"pairs": 20, "of": 105}),
                                 _doc("m", "mc_dropout", [55.0, 61.0, 62.0], [1.0, 1.0, 1.0]))
    text = markdown(spec, columns, docs)
    assert "| Strategy | 0 | 30 | 60 | 90 |" in text
    assert "| MC dropout | 50.00 ± 0.00 | 55.00 ± 1.00 | 61.00 ± 1.00 | 62.00 ± 1.00 |" in text
    row = "| random ⚠ |" if falls else "| random |"
    assert f"{row} 50.00 ± 0.00 | 55.00 ± 1.00 † |" in text  # the rounds but the last on a test subset
    assert "† scored on a seeded 20 of the 105 test pairs" in text
    assert "| random | 0 | 100 | 100 | 100 |" in text  # the steps each teacher trained
    flag = ("random (the random baseline) cannot be read: its mean teacher Spearman falls from 55.00 at 30 labels "
            "to 52.00 at 60, by 3.00 (its seed spread is 1.00, the larger sample std of the two)")
    assert (flag in text) == falls and ("cannot be read" in text) == falls
    assert ("| MC dropout | random | 60.00 (90) | 55 | 35 (39 %) ⚠ (its baseline cannot be read) |" in text) \
        == falls
    table = long_table(spec, columns)
    start = table[(table["point"] == "untrained") & (table["row"] == "random")]
    assert start[["gold_labels", "mean", "teacher_steps"]].values.tolist() == [[0, 50.0, "0"]]
    assert set(table.loc[table["row"] == "random", "unreadable"].str.startswith("random (the random")) == {falls}
    drawn = line_chart(spec, columns, tmp_path / "curve.png")
    assert any("cannot be read" in t for t in drawn) == falls and (tmp_path / "curve.png").is_file()
    assert any(t == "untrained" for t in drawn)
    (tmp_path / "g.md").write_text("# g\n\n| table |\n\n## Experiments\n")
    (tmp_path / "g.curve.md").write_text(text)
    shown = console.table_text(tmp_path / "g.md")
    assert ("- ⚠ lee: " + flag in shown) == falls and f"label-budget curves: {tmp_path / 'g.curve.md'}" in shown
    rounds = console.rounds_table(docs["r"], "mean ± std over seeds 1, 2")
    assert "untrained            0      0" in rounds
    assert ("⚠ random (the random baseline) cannot be read" in rounds) == falls


def test_one_seed_flags_any_fall_and_the_untrained_teacher_counts():
    """With one seed there is no spread: any fall flags; a round-0 teacher below the untrained one is a fall too."""
    from augsbert.reporting.curves import falling, teacher_curve

    spec, columns, _ = _curve(_doc("r", "random", [55.0, 54.9, 60.0], [0, 0, 0], seeds=(1,)))
    assert columns[0]["lines"][0]["flag"]["fall"] == pytest.approx(0.1)
    spec, columns, _ = _curve(_doc("r", "random", [48.0, 55.0, 60.0], [1, 1, 1]))
    flag = columns[0]["lines"][0]["flag"]
    assert (flag["from_labels"], flag["to_labels"], flag["fall"]) == (0, 30, pytest.approx(2.0))
    assert falling(teacher_curve({"points": [], "untrained": None})) is None


def test_the_labels_needed_are_read_off_the_curve_between_rounds():
    from augsbert.reporting.curves import labels_to_reach

    curve = [(100, 60.0), (200, 70.0), (300, 75.0)]
    assert labels_to_reach(curve, 72.0) == pytest.approx(240.0)
    assert labels_to_reach(curve, 55.0) == 100.0 and labels_to_reach(curve, 70.0) == 200.0
    assert labels_to_reach(curve, 76.0) is None


# ---- annotation files ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("row, message", [
    ("3,a,b,,0 to 5", ":3: pair 3 has no score yet: fill the score column of every row (0 to 5)"),
    ("3,a,b,high,0 to 5", ":3: the score 'high' of pair 3 is not a number"),
    ("3,a,b,nan,0 to 5", ":3: the score 'nan' of pair 3 is not a number"),
    ("3,a,b,5.5,0 to 5", ":3: the score 5.5 of pair 3 lies outside the scale 0 to 5"),
    ("x,a,b,2,0 to 5", ":3: pair_id 'x' is not a whole number"),
    ("1,a,b,2,0 to 5", ":3: pair 1 is listed twice (first at line 2)"),
])
def test_a_bad_row_of_an_annotation_file_is_named_by_its_line(tmp_path, row, message):
    from augsbert.data.annotations import read_annotations

    path = tmp_path / "round_1.csv"
    path.write_text(f"pair_id,sentence1,sentence2,score,scale\n1,\"a, quoted\",b,4,0 to 5\n{row}\n")
    with pytest.raises(DataError, match=str(path) + message.replace("(", r"\(").replace(")", r"\)")):
        read_annotations(path, (0, 5))
    path.write_text("pair_id,sentence1,score\n")
    with pytest.raises(DataError, match=f"{path}:1: no column 'sentence2'"):
        read_annotations(path, (0, 5))


CHOSEN = [(k, f"A man plays {k}.", f"Someone, {k}, plays.") for k in range(1, 7)]  # round 1's 6 pairs


def _round_file(path: Path, ids, sep: str = ",", end: str = "\n", bom: str = "", scores=None,
                extra: bool = False) -> bytes:
    """A filled round file of the pairs `ids` (CHOSEN's texts; another id gets made-up ones), as a person's tool may
    save it: separator, line end, byte-order mark, a column of its own (`extra`); `scores` as written (default
    k / 2 with a decimal point, 1.0 for a pair not chosen)."""
    texts = {k: (a, b) for k, a, b in CHOSEN}
    out = io.StringIO(newline="")
    writer = csv.writer(out, delimiter=sep, lineterminator=end)
    writer.writerow(["pair_id", "sentence1", "sentence2", "score", "scale"] + (["annotator"] if extra else []))
    for k in ids:
        a, b = texts.get(k, (f"other {k}", f"else {k}"))
        score = (scores or {}).get(k, f"{k / 2:.1f}" if k in texts else "1.0")
        writer.writerow([k, a, b, score, "0 to 5"] + (["me"] if extra else []))
    data = (bom + out.getvalue()).encode("utf-8")
    path.write_bytes(data)
    return data


def test_an_extra_row_is_named_as_extra_and_a_file_of_another_choice_as_such(tmp_path):
    """Issue 64 AF6: one extra row in a file whose other rows are right was reported as a file written for another
    choice; it is named as an extra row by its line. Mostly foreign rows still say "another choice", and a chosen
    pair's id changed in the file says so."""
    from augsbert.data.annotations import filled_scores

    path = tmp_path / "round_1.csv"
    data = _round_file(path, [1, 2, 3, 4, 5, 6, 9999])
    with pytest.raises(DataError) as err:
        filled_scores(path, data, CHOSEN, (0, 5), 1)
    assert str(err.value) == (f"{path}:8: pair 9999 is an extra row: not one of the 6 pairs round 1 chose, whose rows "
                              "are all there; remove it")
    data = _round_file(path, [1, 9998, 2, 3, 4, 5, 6, 9999])
    with pytest.raises(DataError) as err:
        filled_scores(path, data, CHOSEN, (0, 5), 1)
    assert str(err.value) == (f"{path}:3: pair 9998 is an extra row: not one of the 6 pairs round 1 chose, whose rows "
                              "are all there (also extra: line 9); remove them")
    data = _round_file(path, [1, 2, 3, 4, 5, 9999])
    with pytest.raises(DataError) as err:
        filled_scores(path, data, CHOSEN, (0, 5), 1)
    assert str(err.value) == (f"{path}:7: pair 9999 is not one of the 6 pairs round 1 chose, and its pair 6 has no "
                              "row: a pair id changed in the file? keep every row's pair_id as written")
    data = _round_file(path, [101, 102, 103, 104, 1])
    with pytest.raises(DataError) as err:
        filled_scores(path, data, CHOSEN, (0, 5), 1)
    assert str(err.value) == (f"{path}:2: pair 101 is not one of the 6 pairs round 1 chose, nor are 3 more of the "
                              "file's 5 rows (the file was written for another choice: an earlier round's labels or its "
                              "teacher changed since); move the file aside and run again for the new pairs")
    data = _round_file(path, [6, 5, 4, 3, 2, 1])  # any order
    assert filled_scores(path, data, CHOSEN, (0, 5), 1) == [k / 10 for k in range(1, 7)]


@pytest.mark.parametrize("sep", [";", "\t"])
def test_a_round_file_saved_by_a_spreadsheet_is_read_as_it_was_meant(tmp_path, sep):
    """Issue 64 AF4c, 9: Excel in a decimal-comma locale saves `;`-separated rows (UTF-8 with a byte-order mark,
    CRLF line ends) and a score 2,5; such a file is read as the comma-separated original, with the same scores and
    the same key, so saving it again changes nothing. A changed score changes the key."""
    from augsbert.data.annotations import annotation_digest, filled_scores

    original, saved = tmp_path / "round_1.csv", tmp_path / "saved.csv"
    expected = filled_scores(original, _round_file(original, range(1, 7)), CHOSEN, (0, 5), 1)
    comma = {k: f"{k / 2:.1f}".replace(".", ",") for k in range(1, 7)}
    data = _round_file(saved, [3, 1, 2, 6, 5, 4], sep=sep, end="\r\n", bom="\ufeff", scores=comma)
    assert data.startswith(b"\xef\xbb\xbf") and b"\r\n" in data and b"2,5" in data
    assert filled_scores(saved, data, CHOSEN, (0, 5), 1) == expected == [k / 10 for k in range(1, 7)]
    assert annotation_digest(saved, (0, 5)) == annotation_digest(original, (0, 5))
    _round_file(saved, range(1, 7), scores={**comma, 4: "2,6"}, sep=sep)
    assert annotation_digest(saved, (0, 5)) != annotation_digest(original, (0, 5))


def test_a_round_file_saved_again_unchanged_keeps_its_key(tmp_path):
    """Issue 64, 9: the key holds what the file says, not its bytes: CRLF line ends, a byte-order mark, the rows'
    order, `2.50` for `2.5`, another column added keep it; a score, a pair id or a text changed does not."""
    from augsbert.data.annotations import annotation_digest

    path = tmp_path / "round_1.csv"
    _round_file(path, range(1, 7))
    key = annotation_digest(path, (0, 5))
    _round_file(path, [6, 5, 4, 3, 2, 1], end="\r\n", bom="\ufeff", scores={1: "0.50", 3: "1.50"})
    assert annotation_digest(path, (0, 5)) == key
    _round_file(path, range(1, 7), extra=True)
    assert annotation_digest(path, (0, 5)) == key
    _round_file(path, range(1, 7), scores={2: "1.1"})
    assert annotation_digest(path, (0, 5)) != key
    _round_file(path, [1, 2, 3, 4, 5, 7])
    assert annotation_digest(path, (0, 5)) != key
    path.write_bytes(path.read_bytes().replace(b"A man plays 3.", b"A man plays 33."))
    assert annotation_digest(path, (0, 5)) != key


def test_a_header_under_another_separator_names_the_separators_read(tmp_path):
    from augsbert.data.annotations import read_annotations

    path = tmp_path / "round_1.csv"
    path.write_text("pair_id|sentence1|sentence2|score\n1|a|b|2\n")
    with pytest.raises(DataError) as err:
        read_annotations(path, (0, 5))
    assert str(err.value) == (f"{path}:1: no column 'pair_id' (the header has pair_id|sentence1|sentence2|score, read "
                              "with the separator ','; `,`, `;` and tab are read); the file needs pair_id, sentence1, "
                              "sentence2, score")


# ---- the stop for a person ----------------------------------------------------------------------------------------

def test_a_stop_names_the_command_that_continues_this_run(tmp_path, monkeypatch):
    """Issue 64, 10: the stop said `snakemake --cores 2 results/<experiment>.json`: not on the PATH, and without the
    user's --configfile. It names the command of this run: `augsbert run`'s own, else the Snakemake call with the
    project's executable, the cores, the user's config files, --config and the targets."""
    from augsbert.face import cli

    project = tmp_path / "project"
    (project / ".venv" / "bin").mkdir(parents=True)
    for name in ("snakemake", "augsbert"):
        (project / ".venv" / "bin" / name).write_text("")
    assert stops.snakemake_command(project, 2, [project / "my runs.yaml"], None, ["results/mine.json"]) == \
        ".venv/bin/snakemake --cores 2 --configfile 'my runs.yaml' -- results/mine.json"
    assert stops.snakemake_command(project, 4, [project / "a.yaml", tmp_path / "b.yaml"], ["seeds=[1]"], []) == \
        f".venv/bin/snakemake --cores 4 --configfile a.yaml {tmp_path / 'b.yaml'} --config 'seeds=[1]'"
    bare = tmp_path / "elsewhere"
    bare.mkdir()  # no .venv in the project: the executable beside this interpreter, never a bare `snakemake`
    assert stops.snakemake_command(bare, 2, [], None, ["results/mine.json"]) == \
        f"{Path(sys.executable).parent / 'snakemake'} --cores 2 -- results/mine.json"
    assert stops.run_command(["run", "my runs.yaml", "mine"], project) == ".venv/bin/augsbert run 'my runs.yaml' mine"

    # `augsbert run` hands its own command to the Snakemake it starts (and takes it back after)
    mine = tmp_path / "my.yaml"
    mine.write_text("experiments:\n  mine_zero: {dataset: lee, models: [zero_shot]}\n")
    monkeypatch.chdir(project)
    (project / "config").symlink_to(REPO / "config")
    monkeypatch.delenv(stops.CONTINUE_ENV, raising=False)
    seen = []
    monkeypatch.setattr(cli, "run_snakemake", lambda command: seen.append(os.environ.get(stops.CONTINUE_ENV)) or 0)
    assert cli.main(["run", str(mine), "mine_zero", "--cores", "3", "-n"]) == 0
    assert seen == [f".venv/bin/augsbert run {mine} mine_zero --cores 3 -n"]
    assert stops.CONTINUE_ENV not in os.environ


def _stop_log(tmp_path: Path) -> Path:
    log = tmp_path / "logs" / "active_label" / "x.log"
    log.parent.mkdir(parents=True)
    log.write_text("INFO scoring\naugsbert active-label: stopped for labelling: annotate/m/round_1.csv: round 1's 6 "
                   "pairs to label are written there; fill its score column (0 to 5), then continue with `c`\n")
    return log


def test_a_stop_for_labelling_ends_the_run_with_one_line_and_its_own_status(tmp_path, capsys, monkeypatch):
    """Issue 64, 11: a planned stop looked like a crash ("Error in rule active_label:", "Exiting because a job
    execution failed", exit 1). Snakemake's report of it is kept off the console (the filter on its logger), the
    run ends with one line saying it stopped for labelling, exit status 3; another job's failure beside it keeps
    Snakemake's report and status. A job command ends with its stop line and status 3 too."""
    from snakemake_interface_logger_plugins.common import LogEvent

    from augsbert.face import cli

    log = _stop_log(tmp_path)
    logger = logging.getLogger("test.snakemake.stops")
    report = stops.StopReport()
    logger.addFilter(report)
    shown = []
    handler = logging.Handler()
    handler.emit = shown.append
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.error("Error in rule active_label, jobid: 3",
                 extra={"event": LogEvent.JOB_ERROR, "rule_name": "active_label", "log": [str(log)]})
    logger.info("Shutting down, this might take some time.")
    logger.error("Exiting because a job execution failed. Look above for error messages")
    assert [r.getMessage() for r in shown] == ["Shutting down, this might take some time."]
    job = SimpleNamespace(rule=SimpleNamespace(name="active_label"), log=[str(log)])
    with pytest.raises(SystemExit) as end:
        stops.end_for_labelling(report, [job])
    assert end.value.code == stops.EXIT_LABELLING == 3
    assert capsys.readouterr().err == (
        "augsbert: the run stopped for labelling (not an error; exit status 3): annotate/m/round_1.csv: round 1's 6 "
        "pairs to label are written there; fill its score column (0 to 5), then continue with `c`\n")

    other = tmp_path / "teacher.log"
    other.write_text("augsbert teacher: error: out of memory\n")
    logger.error("Error in rule teacher, jobid: 4", extra={"event": LogEvent.JOB_ERROR, "rule_name": "teacher",
                                                          "log": [str(other)]})
    logger.error("Exiting because a job execution failed. Look above for error messages")
    assert [r.getMessage()[:21] for r in shown[1:]] == ["Error in rule teacher", "Exiting because a job"]
    stops.end_for_labelling(report, [job, SimpleNamespace(rule=SimpleNamespace(name="teacher"), log=[str(other)])])
    assert capsys.readouterr().err.startswith("augsbert: a job failed (above); the run stopped for labelling as well: ")
    stops.end_for_labelling(stops.StopReport(), [])  # no stop: Snakemake ends as it does
    assert capsys.readouterr().err == ""

    monkeypatch.setattr(cli, "Plan", lambda config: (_ for _ in ()).throw(LabellingStop("annotate/m/round_1.csv: x")))
    monkeypatch.chdir(REPO)
    assert cli.main(["plan"]) == 3
    assert capsys.readouterr().err == "augsbert plan: stopped for labelling: annotate/m/round_1.csv: x\n"


def test_augsbert_run_passes_the_stop_on_without_a_failed_job_s_line(tmp_path, capsys):
    """Under `augsbert run` the stop's line stays last: no "a job failed" line below it, Snakemake's status 3."""
    from augsbert.scheduling.snakemake_console import run_snakemake

    log = _stop_log(tmp_path)
    fake = (f"import sys; print('    log: {log} (check log file(s) for error details)', file=sys.stderr); "
            "print('augsbert: the run stopped for labelling (not an error; exit status 3): x', file=sys.stderr); "
            "sys.exit(3)")
    assert run_snakemake([sys.executable, "-c", fake]) == 3
    assert capsys.readouterr().err.splitlines()[-1] == ("augsbert: the run stopped for labelling (not an error; exit "
                                                        "status 3): x")


def _fill(path: Path, scores: dict[int, str]) -> None:
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**row, "score": scores[int(row["pair_id"])]} for row in rows)


@pytest.mark.workflow
def test_a_person_labels_each_round_through_a_file(tmp_path, tiny_model):
    root = checkout(tmp_path / "project")
    keep_experiments(root, "demo_zeroshot")
    (root / "mine.yaml").write_text(
        "experiments:\n  by_hand:\n    dataset: lee\n"
        f"    base_model: {tiny_model}\n    models: [teacher]\n    gold_fraction: 0.1\n"
        "    teacher: {epochs: 1, max_length: 48, batch_size: 32}\n    suite: {max_length: 48, suites: []}\n"
        "    active: {rounds: 2, batch: 0.02, annotator: file, scale: [0, 5]}\n")
    args = ("--configfile", "config/config.yaml", "mine.yaml", "--", "results/by_hand.json")
    folder = root / "annotate" / "by_hand"

    # issue 64, 10: the command that continues this run, config files included, with an executable that is there
    again = f"{Path(sys.executable).parent / 'snakemake'} --cores 4 --configfile config/config.yaml mine.yaml -- " \
            "results/by_hand.json"

    def stops_at(round_: int) -> tuple[list[dict], list[str]]:
        proc = snakemake(root, *JOB_SLOTS, *args)
        out = proc.stdout + proc.stderr
        # issue 64, 11: a stop for a person is not reported as a failure, and ends with its own line and status
        assert proc.returncode == 3 and "Traceback" not in out, out[-3000:]
        stop = (f"annotate/by_hand/round_{round_}.csv: round {round_}'s 6 pairs to label are written there; fill its "
                f"score column (0 to 5), then continue with `{again}`")
        assert proc.stderr.splitlines()[-1] == ("augsbert: the run stopped for labelling (not an error; exit status "
                                                f"3): {stop}"), out[-3000:]
        assert not [w for w in ("Error in rule", "Exiting because a job execution failed", "WorkflowError") if w in out]
        logs = [p.read_text().splitlines() for p in (root / "logs" / "active_label").glob("*.log")]
        assert [log for log in logs if f"augsbert active-label: stopped for labelling: {stop}" in log]
        with open(folder / f"round_{round_}.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == 6 and all(r["score"] == "" and r["scale"] == "0 to 5" for r in rows)
        return rows, proc.stderr.splitlines()

    first, console = stops_at(1)
    # issue 64, 12: the whole experiment's estimate (both rounds), not only the leg to the first stop
    assert [line for line in console if line.startswith("augsbert: this run stops where a person labels")][0].endswith(
        "(by_hand: a person labels round 1, round 2)")
    _fill(folder / "round_1.csv", {int(r["pair_id"]): str(k % 6) for k, r in enumerate(first)})
    second, console = stops_at(2)  # round 1 read from the filled file; round 2's pairs chosen after it
    # issue 64, 13: the person's labels taken in, said on the console
    assert "augsbert: annotate/by_hand/round_1.csv: round 1 (file): 6 pairs labelled, 36 gold pairs in all, 264 " \
           "left unlabelled" in console, console
    assert not {r["pair_id"] for r in first} & {r["pair_id"] for r in second}

    _fill(folder / "round_2.csv", {int(r["pair_id"]): "2.5" for r in second})
    lines = (folder / "round_2.csv").read_text().splitlines()
    lines[3] = lines[3].rsplit(",", 2)[0] + ",abc,0 to 5"
    (folder / "round_2.csv").write_text("\n".join(lines) + "\n")
    bad = snakemake(root, "-n", *args)
    assert bad.returncode == 2
    assert (f"augsbert: error: annotate/by_hand/round_2.csv:4: the score 'abc' of pair {second[2]['pair_id']} is not "
            "a number (write a number from 0 to 5)") in bad.stderr.splitlines()
    _fill(folder / "round_2.csv", {int(r["pair_id"]): "2.5" for r in second})

    run(root, *args)
    result = json.loads((root / "results" / "by_hand.json").read_text())
    rounds = result["active"]["42"]["rounds"]
    assert [r["gold_labels"] for r in rounds] == [30, 36, 42] and result["active"]["42"]["annotator"] == "file"
    labelled = next(Path(root / s["path"]) for s in result["stages"].values() if s["stage"] == "active_label"
                    and json.loads((root / s["path"] / "metrics.json").read_text())["round"] == 1)
    added = pd.read_parquet(labelled / "train.parquet").tail(6)
    assert added["score"].tolist() == [(k % 6) / 5 for k in range(6)]  # the person's scores, 0-5 read as 0-1

    # issue 64, 9: the file saved again by a spreadsheet (CRLF, a byte-order mark, `;`, decimal commas): no rerun
    original = (folder / "round_1.csv").read_bytes()
    with open(folder / "round_1.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    with open(folder / "round_1.csv", "w", newline="", encoding="utf-8-sig") as handle:
        csv.writer(handle, delimiter=";", lineterminator="\r\n").writerows(
            [rows[0]] + [[*row[:3], f"{float(row[3]):.1f}".replace(".", ","), *row[4:]] for row in rows[1:]])
    assert planned(root, *args) == {}
    (folder / "round_1.csv").write_bytes(original)
    # a changed score: that round and everything after it again, nothing before
    _fill(folder / "round_1.csv", {int(r["pair_id"]): str((k + 1) % 6) for k, r in enumerate(first)})
    assert planned(root, *args) == {"active_label": 2, "teacher": 2, "active_select": 1, "active_rounds": 1,
                                    "collect_results": 1}


@pytest.mark.workflow
def test_demo_active_runs_and_draws_its_curves(tmp_path, tiny_model):
    """A CI-sized cut of the shipped `demo_active` (its random, MC dropout and all-gold cells, one round, the teacher
    only) on the tiny model: the grid's table comes with the curve table, its CSV and chart."""
    root = checkout(tmp_path / "project")
    grid = yaml.safe_load((root / "config" / "grids" / "demo_active.yaml").read_text())
    keep_experiments(root, "demo_zeroshot")
    grid["axes"]["strategy"] = {k: v for k, v in grid["axes"]["strategy"].items()
                                if k in ("random", "mc_dropout", "full")}
    grid["options"]["active"]["rounds"] = 1
    grid["options"].update(base_model=tiny_model, models=["teacher"],
                           teacher={"epochs": 1, "max_length": 48, "batch_size": 32, "symmetric": False},
                           suite={"max_length": 48, "suites": []})
    (root / "config" / "grids").mkdir()
    (root / "config" / "grids" / "demo_active.yaml").write_text(yaml.safe_dump(grid, sort_keys=False))
    jobs = run(root, "results/tables/demo_active.md")
    assert jobs["active_curve"] == 1 and jobs["active_select"] == 2 and jobs["collect_results"] == 3
    text = (root / "results" / "tables" / "demo_active.curve.md").read_text()
    assert "| Strategy | 0 | 30 | 60 | 300 |" in text  # from the untrained teacher on
    assert "| random | (itself) |" in text and "| MC dropout | random |" in text
    assert "| all gold (the ceiling) |  |  |  | " in text
    from augsbert.reporting.curves import _ceiling_name  # "all gold" said once, whatever the grid calls the cell

    assert (_ceiling_name("all gold"), _ceiling_name("full")) == ("all gold", "full: all gold")
    curve = pd.read_csv(root / "results" / "tables" / "demo_active.curve.csv")
    teacher = curve[(curve["metric"] == "teacher_spearman") & (curve["point"] == "round")]
    assert sorted(teacher["gold_labels"].unique()) == [30, 60] and teacher["mean"].notna().all()
    untrained = curve[curve["point"] == "untrained"]
    assert set(untrained["gold_labels"]) == {0} and untrained["mean"].nunique() == 1  # one model for every line
    assert (root / "results" / "tables" / "demo_active.curve.png").read_bytes()[:4] == b"\x89PNG"
    assert (root / "results" / "tables" / "demo_active.md").is_file()
