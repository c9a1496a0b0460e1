"""Experiment tracking: `tracking` reaches the trainers' report_to; tensorboard event files hold the run."""

import pytest
from conftest import theme_pairs, train_params

from augsbert.training import tracking


@pytest.fixture
def tracking_env(monkeypatch, tmp_path):
    def use(name: str):
        monkeypatch.setenv(tracking.TRACKING_ENV, name)
        monkeypatch.setenv(tracking.TRACKING_DIR_ENV, str(tmp_path / "tb"))
        monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
        tracking.begin({"stage": "student", "key": "lee.be-0123456789", "experiments": ["demo_b", "demo_c"],
                        "params": {"lr": 2e-5, "candidates": {"top_k": 3}}})
        return tmp_path / "tb" / "student" / "lee.be-0123456789"

    yield use
    monkeypatch.setenv(tracking.TRACKING_ENV, "none")
    tracking.begin({})  # close our writer; the next test starts without a run


def test_arguments_follow_the_configured_tracker(tracking_env):
    tracking_env("none")
    assert tracking.trainer_arguments() == {"report_to": "none", "run_name": "demo_b/student/lee.be-0123456789"}
    assert tracking.callbacks() == []
    run_dir = tracking_env("tensorboard")
    args = tracking.trainer_arguments("trial-7")
    assert args == {"report_to": ["tensorboard"], "run_name": "demo_b/student/lee.be-0123456789/trial-7"}
    import os

    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(run_dir / "trial-7")  # a side run: its own curves
    tracking.trainer_arguments()
    assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(run_dir)


def test_unknown_tracker_or_missing_package_is_one_message(tracking_env, monkeypatch):
    with pytest.raises(SystemExit, match="one of none, tensorboard, wandb, mlflow"):
        tracking_env("comet")
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(SystemExit, match=r"wandb needs the `wandb` package \(pip install 'augsbert\[tracking\]'"):
        tracking_env("wandb")


def test_tensorboard_run_holds_params_loss_and_dev_spearman(tracking_env, tiny_model, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from augsbert.training.pairs import fit

    run_dir = tracking_env("tensorboard")
    train, dev = theme_pairs(48, 0), theme_pairs(16, 1)
    # what is logged, and that it is what training reported: any model will do, the tiny random one
    result = fit("be", tiny_model, train, dev, train_params(epochs=2), tmp_path / "work", "cpu", "fp32")

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0}).Reload()
    scalars = events.Tags()["scalars"]
    assert "train/loss" in scalars and "train/learning_rate" in scalars  # the trainer's own logging
    dev = [(e.step, e.value) for e in events.Scalars("dev/spearman")]
    assert dev == [(h["step"], pytest.approx(h["dev_spearman"], abs=1e-4)) for h in result.metrics["dev_history"]]
    assert len(dev) == 2  # one point per epoch
    texts = {tag: events.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in events.Tags()["tensors"]}
    params = next(v for tag, v in texts.items() if tag.startswith("augsbert/params"))
    for line in ("augsbert.key: lee.be-0123456789", "augsbert.experiments: demo_b,demo_c",
                 "augsbert.lr: 2e-05", "augsbert.candidates.top_k: 3"):
        assert line in params
