"""Students that deploy (issue 51): the layer-reduced, Matryoshka and static students, and their keys."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from augsbert.config.load import ConfigError
from augsbert.models.compact import layer_indices
from conftest import plan_shipped, theme_pairs, train_params

EXPERIMENT = "demo_cbe_distill"
HAS_MODEL2VEC = importlib.util.find_spec("model2vec") is not None


def _plan(student=None, **sampling):
    override = {"experiments": {EXPERIMENT: {"student": student or {}, **sampling}}}
    return plan_shipped(override, grids=False)


def _runs(plan):
    return plan.experiment(EXPERIMENT).runs[42]


def test_layer_indices_are_evenly_spread_as_the_library_example():
    assert layer_indices(12, 4) == [1, 4, 7, 10]  # sentence-transformers' former model_distillation.py example
    # its current model_distillation_layer_reduction.py keeps every third layer from 0 (0, 3, ..., 21 of 24)
    assert layer_indices(24, 8) == [1, 4, 7, 10, 13, 16, 19, 22]
    assert layer_indices(6, 3) == [1, 3, 5]        # the 3-layer MiniLM student
    assert layer_indices(6, 6) == [0, 1, 2, 3, 4, 5]
    assert layer_indices(6, 1) == [3]
    assert layer_indices(6, [0, 5]) == [0, 5]
    for bad in (0, 7, [3, 1], [2, 2], [6], []):
        with pytest.raises(ValueError, match="student.layers"):
            layer_indices(6, bad)


@pytest.mark.parametrize("option, params", [
    ({"init": "layers"}, {"init": "layers", "layers": 3}),
    ({"init": "layers", "layers": [0, 2]}, {"init": "layers", "layers": [0, 2]}),
    ({"matryoshka_dims": [64, 384, 128]}, {"matryoshka_dims": [384, 128, 64]}),
    ({"arch": "static"}, {"arch": "static", "static_dims": 256, "lr": 0.005, "group_by_length": False,
                          "weight_decay": 0.0}),
])
def test_each_option_changes_the_students_key_and_nothing_upstream(option, params):
    base_plan, plan = _plan(), _plan(option)
    base, changed = _runs(base_plan), _runs(plan)
    assert {role for role in base if base[role] != changed[role]} == {"student", "student_suite"}
    student = plan.node(changed["student"]).params
    assert {k: student[k] for k in params} == params
    if option.get("arch") == "static":  # no length grouping: its megabatch leaves the key
        assert "megabatch" not in student
    lower_bound = plan.node(changed["lower_bound"]).params  # the full Transformer, as before
    assert not set(lower_bound) & {"init", "layers", "arch", "static_dims", "matryoshka_dims"}


def test_a_static_student_trains_without_weight_decay_a_transformer_with_its_own(tmp_path):
    """sentence-transformers' static recipe: weight_decay 0 on a token table, whatever the section says (0.01). The
    planner writes it into the static student's spec (its key and card say it), and the optimiser reads the spec."""
    from augsbert.stages.student import StudentParams
    from augsbert.training.pairs import training_args

    def weight_decay(plan) -> float:
        params = StudentParams.from_json(plan.spec(_runs(plan)["student"])["params"])
        return training_args(params, tmp_path, 42, "cpu", "fp32", 100)["weight_decay"]

    assert weight_decay(_plan({"arch": "static"})) == 0.0
    assert weight_decay(_plan()) == 0.01


def test_static_pretraining_reads_the_full_students_embeddings_planned_once():
    """`static_pretrain: full`: the static student's `embedder` input is the full Transformer student of the same
    section: the very node (key) the `full` row plans, so a grid trains it once."""
    plan = _plan({"arch": "static", "static_pretrain": "full"})
    runs = _runs(plan)
    static = plan.node(runs["student"])
    assert static.params["static_pretrain"] == "full" and static.params["arch"] == "static"
    embedder = dict(static.inputs)["embedder"]
    assert embedder == _runs(_plan())["student"]  # the full student's key
    assert dict(static.inputs)["labels"] == dict(plan.node(embedder).inputs)["labels"]
    plain = _plan({"arch": "static"})
    assert "embedder" not in dict(plain.node(_runs(plain)["student"]).inputs)
    assert "static_pretrain" not in plain.node(_runs(plain)["student"]).params


def test_static_pretraining_regresses_the_targets_and_keeps_one_module(tiny_model):
    """The table learns the targets (held-out MSE falls, the best epoch kept) and the head is dropped."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding

    from augsbert.models.compact import pca_targets, pretrain_static

    tokenizer = SentenceTransformer(tiny_model, device="cpu").tokenizer
    torch.manual_seed(0)
    model = SentenceTransformer(modules=[StaticEmbedding(tokenizer.backend_tokenizer, embedding_dim=8)], device="cpu")
    pairs = theme_pairs(600, 3)
    texts = list(dict.fromkeys([*pairs["sentence1"], *pairs["sentence2"]]))
    groups = ["dog cat horse cow sheep bird", "bank loan stock price market cash", "rain snow wind storm cloud fog",
              "goal team match ball coach race", "piano violin guitar drum song choir",
              "bread cheese apple soup rice cake"]  # conftest.theme_pairs' themes
    themes = np.array([[t.split()[0] in group.split() for group in groups] for t in texts], dtype=float)
    assert (themes.sum(1) == 1).all()
    targets = pca_targets(themes @ np.random.default_rng(0).normal(size=(6, 12)), 8, seed=0)
    assert targets.shape == (len(texts), 8)
    before = model[0].embedding.weight.detach().clone()
    record = pretrain_static(model, texts, targets, seed=0)
    assert record["validation_mse"] < 0.5 * record["validation_mse_before"]
    assert 1 <= record["best_epoch"] <= record["epochs"] and record["held_out"] == len(texts) // 10
    assert len(model) == 1 and not torch.equal(before, model[0].embedding.weight)


def test_unset_options_leave_every_key_and_layers_alone_is_inert():
    base = _runs(_plan())
    defaults = {"init": "full", "arch": "transformer", "matryoshka_dims": None, "layers": 4, "static_dims": 64,
                "static_lr": 0.2, "static_pretrain": "none"}
    assert _runs(_plan(defaults)) == base


def test_the_lower_bound_upstream_of_semantic_sampling_is_untouched():
    """`semantic_model: finetuned` encodes the pool with the lower bound: a compact student must not move it."""
    sampling = {"candidates": {"strategies": ["semantic_search"]}}
    base, changed = _runs(_plan(None, **sampling)), _runs(_plan({"init": "layers"}, **sampling))
    assert {role for role in base if base[role] != changed[role]} == {"student", "student_suite"}


@pytest.mark.parametrize("option, message", [
    ({"init": "layers", "arch": "static"}, "init"),
    ({"arch": "static", "freeze_embeddings": True}, "freeze_embeddings"),
    ({"matryoshka_dims": [64, 64]}, "twice"),
    ({"static_pretrain": "full"}, "static_pretrain"),
])
def test_contradictory_options_fail_while_planning(option, message):
    with pytest.raises(ConfigError, match=message):
        _plan(option)


def test_layer_reduced_student_has_the_stated_layers_and_loads_with_them(tmp_path, minilm_path):
    from sentence_transformers import SentenceTransformer

    from augsbert.models.architectures import ARCHITECTURES

    params = train_params(max_length=32)
    be = ARCHITECTURES["be"]
    full = be.build(minilm_path, params, "cpu")
    reduced = be.build(minilm_path, _student_params(init="layers", layers=3), "cpu")
    kept = reduced[0].auto_model.encoder.layer
    assert len(kept) == 3 and reduced[0].auto_model.config.num_hidden_layers == 3
    for mine, theirs in zip(kept, [full[0].auto_model.encoder.layer[i] for i in (1, 3, 5)]):
        for a, b in zip(mine.parameters(), theirs.parameters()):
            assert a.data_ptr() != b.data_ptr() and bool((a == b).all())
    be.save(reduced, tmp_path / "m")
    loaded = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    assert len(loaded[0].auto_model.encoder.layer) == 3
    texts = ["a man plays a guitar", "the cat sleeps"]
    assert np.allclose(loaded.encode(texts), reduced.encode(texts), atol=1e-6)


def _student_params(**options):
    from augsbert.stages.student import StudentParams

    base = train_params(max_length=32).to_json()
    return StudentParams.from_json({**base, "use_gold_labels": False, "selection": "target_dev", **options})


def test_matryoshka_student_reports_every_dimension(tmp_path, tiny_model):
    from augsbert.training.pair_job import test_by_dim
    from augsbert.models.inference import scores_by_dim
    from augsbert.training.pairs import fit

    train, test = theme_pairs(32, 1), theme_pairs(16, 3)
    params = _student_params(epochs=1, batch_size=8, matryoshka_dims=[16, 8, 4], group_by_length=False)
    result = fit("be", tiny_model, train, None, params, tmp_path / "work", "cpu", "fp32")
    assert result.metrics["train_loss"] > 0
    by_dim = test_by_dim(result.model, test, params)
    assert list(by_dim) == ["16", "8", "4"]
    # each dimension: the cosine of the first d components, against a literal computation
    emb = result.model.encode(sorted(set(test["sentence1"]) | set(test["sentence2"])), convert_to_numpy=True)
    where = {t: i for i, t in enumerate(sorted(set(test["sentence1"]) | set(test["sentence2"])))}
    a, b = emb[[where[t] for t in test["sentence1"]], :4], emb[[where[t] for t in test["sentence2"]], :4]
    manual = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    pairs = list(zip(test["sentence1"], test["sentence2"]))
    assert np.allclose(scores_by_dim(result.model, pairs, [4], 64)[4], manual, atol=1e-5)
    full = scores_by_dim(result.model, pairs, [16], 64)[16]
    from augsbert.training.pairs import evaluate
    assert by_dim["16"]["spearman"] == pytest.approx(evaluate("be", result.model, test, params)[0]["spearman"])
    assert not np.allclose(full, manual)


def test_matryoshka_dims_larger_than_the_model_fail_with_the_option(tiny_model):
    from sentence_transformers import SentenceTransformer

    from augsbert.models.compact import matryoshka_loss
    from augsbert.models.student_losses import student_loss

    model = SentenceTransformer(tiny_model, device="cpu")
    with pytest.raises(ValueError, match="matryoshka_dims.*32"):
        matryoshka_loss(model, student_loss(model, train_params()), [32, 8])


@pytest.mark.skipif(not HAS_MODEL2VEC, reason="model2vec is not installed (augsbert's `deploy` / `test` extra)")
def test_static_student_is_distilled_offline_trains_and_its_loss_falls(tmp_path, tiny_model):
    from augsbert.models.compact import is_static
    from augsbert.training.pairs import fit

    train, dev = theme_pairs(96, 1), theme_pairs(24, 2)
    params = _student_params(epochs=3, batch_size=8, lr=0.05, arch="static", static_dims=8, group_by_length=False)
    result = fit("be", tiny_model, train, dev, params, tmp_path / "work", "cpu", "fp32")
    assert is_static(result.model)
    assert result.model[0].embedding.weight.shape[1] == 8
    losses = [entry["loss"] for entry in result.metrics["loss_log"]]
    assert len(losses) >= 4 and np.mean(losses[-2:]) < np.mean(losses[:2])
    assert result.metrics["dev_spearman"] > 0.3  # the themes are learnt (an untrained static model knows none)


# --- export --backend (augsbert.export.backends; the conversion itself: tests/test_deploy.py)


def test_backend_options_that_cannot_apply_are_refused():
    from augsbert.export.export import ExportError, _deploy_check

    assert _deploy_check("torch", None, "be", {}) is False
    assert _deploy_check("onnx", "int8", "be", {}) is True
    with pytest.raises(ExportError, match="--quantize needs --backend"):
        _deploy_check("torch", "int8", "be", {})
    with pytest.raises(ExportError, match="Bi-Encoders only"):
        _deploy_check("onnx", None, "ce", {})
    with pytest.raises(ExportError, match="static student"):
        _deploy_check("openvino", None, "be", {"arch": "static"})


def test_card_section_states_backend_quantisation_and_the_loading_line():
    from augsbert.export.backends import card_section

    text = card_section({"backend": "onnx", "quantize": "int8", "quantize_config": "avx2", "max_seq_length": 64,
                         "pooling": "mean", "normalize": True, "file": "onnx/model_qint8_avx2.onnx"}, "models/x")
    assert "| backend | onnx" in text and "dynamic int8" in text and "`avx2`" in text
    assert "session = onnxruntime.InferenceSession('models/x/onnx/model_qint8_avx2.onnx')" in text
    assert "max_length=64" in text and "mean pooling" in text and "the Normalize module" in text
    assert "backend='onnx'" not in text  # sentence-transformers cannot load it (see the card's note)
    plain = card_section({"backend": "openvino", "quantize": None, "file": "openvino/openvino_model.xml"}, "m")
    assert "none (float32)" in plain and "SentenceTransformer('m', backend='openvino')" in plain


from test_export import experiment, finished_experiment  # noqa: E402,F401  (the exported experiment's fixtures)


def test_export_without_the_deploy_environment_stops_with_one_line_and_writes_nothing(experiment, tmp_path,
                                                                                     monkeypatch):
    from augsbert.export.export import ExportError, export

    monkeypatch.setenv("AUGSBERT_DEPLOY_PYTHON", str(tmp_path / "no-deploy-env" / "python"))
    out = tmp_path / "deploy" / "student"
    with pytest.raises(ExportError, match=r"^--backend onnx runs in the deploy environment, which is missing "
                                          r"\(.*\): create it with `make deploy-env` in the augsbert checkout$"):
        export(experiment, "student", out, backend="onnx", quantize="int8")
    assert not out.parent.exists()  # stopped before anything was written


def test_size_and_speed_figures_of_a_trained_bi_encoder(tmp_path, tiny_model):
    import os
    from pathlib import Path

    from sentence_transformers import SentenceTransformer

    from augsbert.training.pair_job import encode_speed, folder_mb

    folder = Path(tiny_model)
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert folder_mb(folder) == round(sum(os.path.getsize(p) for p in files) / 1e6, 2)
    speed = encode_speed(SentenceTransformer(tiny_model, device="cpu"), theme_pairs(20, 4), 8)
    assert speed > 0 and isinstance(speed, float)


# --- the static learning rate chosen on the experiment's own dev split (issue 65 item 4b) -----------------------


def test_a_static_lr_sweep_is_keyed_only_when_set_and_only_on_a_static_student():
    plain = plan_shipped({"experiments": {EXPERIMENT: {"student": {"arch": "static"}}}}, grids=False)
    swept = _plan({"arch": "static", "static_lr_sweep": [0.02, 0.002, 0.01]})
    params = swept.node(_runs(swept)["student"]).params
    assert params["static_lr_sweep"] == [0.002, 0.01, 0.02] and params["lr"] == 0.005
    assert "static_lr_sweep_steps" not in params
    assert not {"static_lr_sweep", "static_lr_sweep_steps"} & set(plain.node(_runs(plain)["student"]).params)
    assert _runs(swept)["lower_bound"] == _runs(plain)["lower_bound"]  # the lower bound is the full Transformer
    stepped = _plan({"arch": "static", "static_lr_sweep": [0.01], "static_lr_sweep_steps": 200})
    assert stepped.node(_runs(stepped)["student"]).params["static_lr_sweep_steps"] == 200
    pretrained = _plan({"arch": "static", "static_pretrain": "full", "static_lr_sweep": [0.01]})
    embedder = dict(pretrained.node(_runs(pretrained)["student"]).inputs)["embedder"]
    assert embedder == _runs(_plan())["student"]  # the full student the table learns from: no sweep in its key


@pytest.mark.parametrize("option, message", [
    ({"static_lr_sweep": [0.01]}, "static_lr_sweep: sweeps a static student's learning rate, but arch is"),
    ({"arch": "static", "static_lr_sweep_steps": 100}, "static_lr_sweep_steps: .* static_lr_sweep is not set"),
    ({"arch": "static", "static_lr_sweep": [0.01], "selection": "last"}, "chooses the rate on a dev split"),
])
def test_a_static_lr_sweep_that_cannot_run_fails_while_planning(option, message):
    with pytest.raises(ConfigError, match=message):
        _plan(option)


def test_the_sweep_keeps_the_rate_with_the_best_dev_score(tmp_path, monkeypatch):
    """Constructed dev scores per rate: the best one's run is the student's (whole-schedule runs), or the best
    rate trains the schedule once more (`static_lr_sweep_steps`); a NaN never wins, a tie goes to the smaller."""
    from augsbert.training import pair_job
    from augsbert.training.pairs import FitResult

    scores = {0.002: 80.0, 0.005: 83.0, 0.01: 85.5, 0.02: 84.0, 0.05: float("nan")}
    calls = []

    def fake_fit(arch, base, train, dev, params, work, device, precision="auto"):
        calls.append((params.lr, params.max_steps, work.name))
        return FitResult(f"model@{params.lr:g}", {"dev_spearman": scores[params.lr], "steps": params.max_steps or 50,
                                                  "best_epoch": 1})

    monkeypatch.setattr(pair_job, "fit", fake_fit)
    monkeypatch.setattr(pair_job, "is_static_folder", lambda path: True)  # "base": a static start already
    dev = theme_pairs(8, 2)
    params = _student_params(epochs=1, arch="static", lr=0.005, static_lr_sweep=[0.05, 0.002, 0.02, 0.01])
    result, record = pair_job.sweep_static_lr("base", dev, dev, params, tmp_path / "work", "cpu")
    assert result.model == "model@0.01" and record["chosen"] == 0.01 and record["steps"] is None
    assert [c["lr"] for c in record["rates"]] == [0.002, 0.005, 0.01, 0.02, 0.05]
    assert [c["dev_spearman"] for c in record["rates"]][:4] == [80.0, 83.0, 85.5, 84.0]
    assert [c[2] for c in calls] == ["work.lr-0.002", "work.lr-0.005", "work.lr-0.01", "work.lr-0.02",
                                     "work.lr-0.05"]  # each rate in its own resumable folder
    calls.clear()
    short = _student_params(epochs=1, arch="static", lr=0.005, static_lr_sweep=[0.01, 0.02],
                            static_lr_sweep_steps=30)
    result, record = pair_job.sweep_static_lr("base", dev, dev, short, tmp_path / "work", "cpu")
    assert calls == [(0.005, 30, "work.lr-0.005"), (0.01, 30, "work.lr-0.01"), (0.02, 30, "work.lr-0.02"),
                     (0.01, None, "work")]  # the chosen rate's own schedule, in the job's resume folder
    assert result.model == "model@0.01" and record["chosen"] == 0.01 and record["steps"] == 30
    assert pair_job.chosen_rate([{"lr": 0.01, "dev_spearman": 84.0}, {"lr": 0.002, "dev_spearman": 84.0},
                                 {"lr": 0.005, "dev_spearman": None}]) == 0.002


@pytest.mark.skipif(not HAS_MODEL2VEC, reason="model2vec is not installed (augsbert's `deploy` / `test` extra)")
def test_a_static_student_job_sweeps_its_rate_and_its_card_says_which(tmp_path, tiny_model):
    """The student job with a sweep: each rate trained on the tiny model's distilled table, the chosen one in
    metrics.json (and the best run's dev score is the model's), then in the card's facts."""
    from augsbert.export.facts import chosen_rate_text
    from augsbert.training import pair_job

    train, dev = theme_pairs(64, 1), theme_pairs(24, 2)
    params = _student_params(epochs=2, batch_size=8, arch="static", static_dims=8, group_by_length=False,
                             lr=0.05, static_lr_sweep=[1e-5])
    result, record = pair_job.sweep_static_lr(tiny_model, train, dev, params, tmp_path / "work", "cpu")
    assert [c["lr"] for c in record["rates"]] == [1e-5, 0.05]
    assert (tmp_path / "work.static_distilled" / "modules.json").is_file()  # distilled once, both rates from it
    assert record["chosen"] == max(record["rates"], key=lambda c: c["dev_spearman"])["lr"]
    assert result.metrics["dev_spearman"] == next(c["dev_spearman"] for c in record["rates"]
                                                  if c["lr"] == record["chosen"])
    text = chosen_rate_text(record)
    assert text.startswith(f"{record['chosen']:g}, chosen on the dev split among 1e-05 (") and \
        "each the full schedule, the best run kept" in text
