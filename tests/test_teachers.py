"""Better teachers (issue 29): few labels (`gold_fraction`), teacher ensembles (`teacher.ensemble`) and
Trans-Encoder's rounds (`models: [trans_encoder]`): what they plan, what they compute, and that no gold label
reaches a Trans-Encoder model."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from augsbert.config.load import prepare_config
from augsbert.errors import ConfigError
from augsbert.models.ensemble import combine, reference_statistics
from augsbert.plan import Plan
from augsbert.stages import REGISTRY
from conftest import plan_shipped, theme_pairs


# ------------------------------------------------------------------ helpers
def write_pairs_dataset(root: Path, seed: int = 0, scores_seed: int | None = None, n: tuple = (16, 8, 8)) -> dict:
    """A pairs_file dataset (train / dev / test CSVs) of theme pairs; `scores_seed` replaces every score by a
    random one (the same sentences, other labels)."""
    root.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, count, offset in zip(("train", "dev", "test"), n, (0, 100, 200)):
        table = theme_pairs(count, seed + offset)
        if scores_seed is not None:
            table["score"] = np.random.default_rng(scores_seed + offset).random(count).round(4)
        table.to_csv(root / f"{split}.csv", index=False)
        files[split] = f"{root.name}/{split}.csv"  # relative to data_dir, the folder above
    return {"loader": "pairs_file", **files}


def tiny_config(data_dir: Path, model: str, experiment: dict) -> dict:
    short = {"epochs": 1, "batch_size": 8, "max_length": 32, "lr": 1e-4}
    return {"data_dir": str(data_dir), "seeds": [42], "datasets": {"toy": write_pairs_dataset(data_dir / "toy")},
            "defaults": {"base_model": model, "teacher": dict(short), "student": dict(short),
                         "suite": {"max_length": 32, "suites": []}, "labels": {"batch_size": 8}},
            "experiments": {"x": {"dataset": "toy", **experiment}}}


def run_nodes(plan: Plan, keys: list[str]) -> None:
    """Run the jobs of `keys`, in order, in this process (the working directory holds artifacts/)."""
    for key in keys:
        node = plan.node(key)
        runner = REGISTRY[node.stage].load_runner()
        kwargs = {"device": "cpu"} if REGISTRY[node.stage].device else {}
        runner(plan.spec(key), node.path, **kwargs)


def upstream_first(plan: Plan, keys) -> list[str]:
    """`keys` and everything they need, each after its inputs."""
    order: list[str] = []

    def visit(key):
        if key in order:
            return
        for _, upstream in plan.node(key).inputs:
            visit(upstream)
        order.append(key)

    for key in keys:
        visit(key)
    return order


def tensors(model_dir: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    out = {}
    for path in sorted(model_dir.rglob("*.safetensors")):
        out.update({f"{path.relative_to(model_dir)}:{k}": v for k, v in load_file(path).items()})
    assert out, f"no weights under {model_dir}"
    return out


# ------------------------------------------------------------------ gold_fraction
def test_gold_fraction_swaps_the_gold_of_every_trained_model_and_nothing_else():
    full = plan_shipped({"experiments": {"few": {"dataset": "lee"}}}).experiment("few").runs[42]
    plan = plan_shipped({"experiments": {"few": {"dataset": "lee", "gold_fraction": 0.5, "seeds": [42, 43],
                                                 "candidates": {"strategies": ["target_pairs"]}}}})
    runs = plan.experiment("few").runs[42]
    subset = plan.node(runs["gold_subset"])
    assert subset.params == {"fraction": 0.5, "seed": 42} and dict(subset.inputs) == {"data": runs["data"]}
    assert runs["zero_shot"] == full["zero_shot"] and runs["data"] == full["data"]  # test split unchanged
    for role in ("lower_bound", "teacher", "student"):
        assert dict(plan.node(runs[role]).inputs)["data"] == runs["gold_subset"], role
    labels = dict(plan.node(runs["labels"]).inputs)
    assert labels["gold"] == runs["gold_subset"] and dict(plan.node(runs["candidates"]).inputs) == {
        "data": runs["gold_subset"]}
    assert plan.experiment("few").runs[43]["gold_subset"] != runs["gold_subset"]  # a subset per seed
    with pytest.raises(ConfigError, match="target_pairs is for domain transfer .* or few labels"):
        plan_shipped({"experiments": {"all": {"dataset": "lee", "candidates": {"strategies": ["target_pairs"]}}}})


def test_gold_subset_keeps_a_seeded_fraction_and_drops_the_other_scores(tmp_path, monkeypatch):
    from augsbert.data.pool import read_split, target_pool
    from augsbert.data.pool import subset_rows

    rows = subset_rows(20, 0.25, 7)
    assert rows.tolist() == sorted(np.random.default_rng(7).choice(20, size=5, replace=False).tolist())
    assert len(subset_rows(10, 0.01, 0)) == 2  # at least two pairs
    monkeypatch.chdir(tmp_path)
    plan = Plan(prepare_config(tiny_config(tmp_path / "raw", "minilm-l6", {"gold_fraction": 0.25,
                                                                           "models": ["lower_bound"]})))
    runs = plan.experiment("x").runs[42]
    run_nodes(plan, [runs["data"], runs["gold_subset"]])
    data, subset = Path(plan.node(runs["data"]).path), Path(plan.node(runs["gold_subset"]).path)
    train = read_split(data, "train")
    kept = subset_rows(16, 0.25, 42)
    pd.testing.assert_frame_equal(read_split(subset, "train"), train.iloc[kept].reset_index(drop=True))
    rest = pd.read_parquet(subset / "unlabeled_pairs.parquet")
    assert list(rest.columns) == ["sentence1", "sentence2"] and len(rest) == 12  # no score column
    mask = np.ones(16, bool)
    mask[kept] = False
    assert rest["sentence1"].tolist() == train["sentence1"][mask].tolist()
    for split in ("dev", "test"):
        pd.testing.assert_frame_equal(read_split(subset, split), read_split(data, split))
    pool = set(target_pool(subset, "train+unlabeled", exclude_eval=False)[0])
    assert pool == set(target_pool(data, "train", exclude_eval=False)[0])  # every train sentence, 4 pairs labelled


# ------------------------------------------------------------------ ensembles
def test_combinations_are_the_mean_and_the_gold_scaled_mean_z_score():
    scores = np.array([[0.2, 0.4, 0.9], [-0.5, 0.0, 0.5]])
    np.testing.assert_allclose(combine(scores, "mean"), [-0.15, 0.2, 0.7])
    stats = reference_statistics([np.array([0.0, 1.0]), np.array([-1.0, 1.0])], np.array([0.2, 0.6]))
    assert stats == {"members": [{"mean": 0.5, "std": 0.5}, {"mean": 0.0, "std": 1.0}],
                     "gold": {"mean": 0.4, "std": pytest.approx(0.2)}}
    # pair 0: z = (0.2 - 0.5) / 0.5 = -0.6 and -0.5 / 1, mean -0.55 -> 0.4 + 0.2 x -0.55 = 0.29; pair 1: -0.2 and 0
    # -> 0.38; pair 2: 0.8 and 0.5 -> 0.53
    np.testing.assert_allclose(combine(scores, "zscore", stats), [0.29, 0.38, 0.53])
    from augsbert.data import DataError

    with pytest.raises(DataError, match="no spread"):
        reference_statistics([np.ones(3)], np.array([0.1, 0.2, 0.3]))


def test_adding_a_member_plans_one_teacher_and_the_labels_and_student_below_it():
    def run_keys(members):
        exp = {"dataset": "lee", "candidates": {"strategies": ["bm25"]}, "suite": {"suites": []},
               "teacher": {"ensemble": members}}
        return plan_shipped({"experiments": {"e": exp}}).experiment("e").runs[42]

    single = plan_shipped({"experiments": {"s": {"dataset": "lee", "candidates": {"strategies": ["bm25"]},
                                                 "suite": {"suites": []}}}}).experiment("s").runs[42]
    two, three = run_keys([{}, {"arch": "ce"}]), run_keys([{}, {"arch": "ce"}, {"seed": 1}])
    assert two["teacher_member_0"] == single["teacher"]  # the member equal to the single teacher is its artifact
    new = set(three.values()) - set(two.values())
    assert {k for k, v in three.items() if v in new} == {"teacher_member_2", "teacher", "labels", "student"}
    plan = plan_shipped({"experiments": {"e": {"dataset": "lee", "teacher": {"ensemble": [{}, {"seed": 7}]}}}})
    member = plan.node(plan.experiment("e").runs[42]["teacher_member_1"])
    assert member.params["seed"] == 42007 and member.params["arch"] == "cbe"
    assert {r for r, _ in plan.node(plan.experiment("e").runs[42]["labels"]).inputs} >= {"member_0", "member_1"}
    with pytest.raises(ConfigError, match="at least two members"):
        run_keys([{"seed": 3}])
    with pytest.raises(ConfigError, match="members 0 and 1 are the same teacher"):
        run_keys([{}, {"seed": 0}])


def test_ensemble_scores_are_the_combination_of_the_members_predictions(tmp_path, monkeypatch, tiny_model):
    """The ensemble's test predictions combine the members' saved ones; labelling combines the members' scores
    of each pair the same way (z-score statistics from their scores of the gold train pairs; `mean` is the
    plain mean, checked above)."""
    method = "zscore"
    from augsbert.data.pool import read_split
    from augsbert.models.teacher import TrainedPairModel
    from augsbert.data.tables import pairs_of

    monkeypatch.chdir(tmp_path)
    plan = Plan(prepare_config(tiny_config(tmp_path / "raw", tiny_model, {
        "models": ["teacher", "student"], "teacher": {"ensemble": [{}, {"arch": "ce"}], "combine": method}})))
    runs = plan.experiment("x").runs[42]
    run_nodes(plan, upstream_first(plan, [runs["labels"]]))
    members = [Path(plan.node(runs[f"teacher_member_{k}"]).path) for k in range(2)]
    saved = np.stack([pd.read_parquet(m / "predictions.parquet")["predicted"].to_numpy() for m in members])
    gold = read_split(plan.node(runs["data"]).path, "train")
    models = [TrainedPairModel(m, "cpu") for m in members]
    on_gold = [m.score(pairs_of(gold), 8) for m in models]
    stats = {"members": [{"mean": s.mean(), "std": s.std()} for s in on_gold],
             "gold": {"mean": gold["score"].mean(), "std": gold["score"].std(ddof=0)}}
    ensemble = Path(plan.node(runs["teacher"]).path)
    predicted = pd.read_parquet(ensemble / "predictions.parquet")
    np.testing.assert_allclose(predicted["predicted"], combine(saved, method, stats), rtol=1e-6)
    np.testing.assert_allclose(predicted[["member_0", "member_1"]].to_numpy().T, saved)
    labelled = pd.read_parquet(Path(plan.node(runs["labels"]).path) / "pairs.parquet")
    expected = combine(np.stack([m.score(pairs_of(labelled), 8) for m in models]), method, stats)
    np.testing.assert_allclose(labelled["score"], expected, rtol=1e-5, atol=1e-7)
    metrics = pd.read_json(ensemble / "metrics.json", typ="series")
    assert metrics["arch"] == "cbe+ce" and metrics["combine"] == method and len(metrics["members"]) == 2


# ------------------------------------------------------------------ Trans-Encoder
def te_runs(rounds: int, sampling: dict | None = None, **te):
    exp = {"dataset": "lee", "models": ["zero_shot", "trans_encoder"], "suite": {"suites": []},
           "trans_encoder": {"rounds": rounds, **te}, "candidates": sampling or {}}
    return plan_shipped({"experiments": {"t": exp}}).experiment("t").runs[42]


def test_trans_encoder_round_r_plus_1_reuses_round_r():
    two, three = te_runs(2), te_runs(3)
    assert all(three[role] == key for role, key in two.items())
    assert {r for r in three if r not in two} == {"trans_encoder_2", "te_cross_3", "te_cross_scores_3", "te_bi_3"}
    plan = plan_shipped({"experiments": {"t": {"dataset": "lee", "models": ["trans_encoder"],
                                               "trans_encoder": {"rounds": 2}}}})
    runs = plan.experiment("t").runs[42]
    cross, bi = plan.node(runs["te_cross_2"]), plan.node(runs["te_bi_2"])
    assert dict(cross.inputs) == {"data": runs["data"], "labels": runs["trans_encoder_1"]}
    assert dict(bi.inputs) == {"data": runs["data"], "labels": runs["te_cross_scores_2"]}
    assert cross.params["selection"] == "last" and bi.params["selection"] == "last"
    assert bi.params["use_gold_labels"] is False and cross.params["seed_optimization"]["trials"] == 0
    scores = plan.node(runs["trans_encoder_0"])
    assert scores.params["source"] == "train" and "clip" not in scores.params  # the default cross is a CBE
    assert dict(plan.node(runs["trans_encoder_1"]).inputs) == {"pairs": runs["data"], "scorer_0": runs["te_bi_1"]}
    mutual = te_runs(1, mutual={"base_model": "org/other-encoder"}, cross={"arch": "ce"})
    assert {"te_cross_1_mutual", "te_bi_1_mutual"} <= set(mutual) and mutual["te_bi_1"] != mutual["te_bi_1_mutual"]
    with pytest.raises(ConfigError, match="the same bases as the first"):
        te_runs(1, mutual={"base_model": "minilm-l6"})
    assert te_runs(1, {"strategies": ["bm25"]}, pairs="candidates")["trans_encoder_0"]
    with pytest.raises(ConfigError, match="finetuned, an encoder trained on gold"):
        te_runs(1, {"strategies": ["semantic_search"]}, pairs="candidates")  # the default semantic_model


def test_no_gold_label_reaches_a_trans_encoder_model(tmp_path, monkeypatch, tiny_model):
    """The same sentences with random scores in every split train identical models in every round."""
    weights = []
    for name, scores_seed in (("gold", None), ("random", 99)):
        root = tmp_path / name
        root.mkdir()
        monkeypatch.chdir(root)
        config = tiny_config(root / "raw", tiny_model, {
            "models": ["trans_encoder"], "trans_encoder": {"rounds": 1, "cross": {"arch": "ce"}}})
        config["datasets"]["toy"] = write_pairs_dataset(root / "raw" / "toy", scores_seed=scores_seed)
        plan = Plan(prepare_config(config))
        runs = plan.experiment("x").runs[42]
        run_nodes(plan, upstream_first(plan, [runs["te_bi_1"]]))
        weights.append({role: tensors(Path(plan.node(runs[role]).path) / "model") for role in ("te_cross_1", "te_bi_1")})
        labels = pd.read_parquet(Path(plan.node(runs["trans_encoder_0"]).path) / "pairs.parquet")
        assert labels["score"].between(0, 1).all()  # BCE targets: the cosines clipped to [0, 1]
    for role in ("te_cross_1", "te_bi_1"):
        assert weights[0][role].keys() == weights[1][role].keys()
        for key, value in weights[0][role].items():
            np.testing.assert_array_equal(value, weights[1][role][key], err_msg=f"{role} {key}")


def test_members_and_rounds_are_model_rows_of_the_results_and_tables():
    from augsbert.reporting.layout import numbered_roles, row_label
    from augsbert.reporting.results import role_description, role_order

    assert role_description("teacher_member_1").startswith("teacher ensemble member 2")
    assert "round 3" in role_description("te_bi_3_mutual") and "mutual" in role_description("te_bi_3_mutual")
    assert role_description("trans_encoder_0") is None and role_description("gold_subset") is None  # not models
    roles = ["te_bi_2", "student", "te_cross_10", "te_cross_2_mutual", "teacher_member_1", "te_cross_2", "teacher"]
    assert sorted(roles, key=role_order) == ["teacher", "student", "teacher_member_1", "te_cross_2",
                                             "te_cross_2_mutual", "te_bi_2", "te_cross_10"]
    assert numbered_roles(roles) == ["teacher_member_1", "te_cross_2", "te_cross_2_mutual", "te_bi_2", "te_cross_10"]
    assert row_label("teacher_member_0", "CE", []) == "Teacher member 1 (CE)"
    assert row_label("te_cross_1_mutual", "CE", ["mutual"]) == "Trans-Encoder round 1: CE cross (mutual) [mutual]"


def test_a_one_pair_gold_train_split_is_refused_where_a_model_trains_on_it(tmp_path, monkeypatch, capsys,
                                                                            tiny_model):
    """Issue 64: a one-pair gold train split ran without a word: a teacher and a lower bound fitted one score and their
    figures stood in the results as a trained model's. The job refuses with one line naming the file (a pair, its
    swap and a duplicate are one pair), before it loads a model."""
    import json

    from augsbert.face.cli import main
    from augsbert.store.artifacts import artifact_dir
    from conftest import teacher_spec_params, train_params

    monkeypatch.chdir(tmp_path)
    data = tmp_path / "artifacts" / "data" / "mine-0123456789"
    pairs = pd.DataFrame({"sentence1": ["a cat", "a dog", "a cat"], "sentence2": ["a dog", "a cat", "a dog"],
                          "score": [0.5, 0.5, 0.5]})
    with artifact_dir(data, {"stage": "data", "key": data.name}) as tmp:
        for split in ("train", "dev", "test"):
            pairs.to_parquet(tmp / f"{split}.parquet", index=False)
    refused = (f"augsbert teacher: error: {data}/train.parquet: 1 distinct pair(s) to train on; a model needs at "
               "least 2 (fitted to one pair's score it ranks nothing, and its figures would pass for a trained "
               "model's): give the dataset's train split more labelled pairs")
    for stage, params in (("teacher", teacher_spec_params(model=tiny_model)),
                          ("student", {**train_params("be").to_json(), "model": tiny_model, "use_gold_labels": True})):
        spec = json.dumps({"stage": stage, "key": "k", "inputs": {"data": str(data)}, "params": params})
        capsys.readouterr()
        assert main(["-q", stage, "--spec", spec, "--out", str(tmp_path / stage), "--device", "cpu"]) == 2
        err = capsys.readouterr().err
        assert err.strip() == refused.replace("augsbert teacher", f"augsbert {stage}"), err
        assert not (tmp_path / stage).exists()
