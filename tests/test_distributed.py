"""Data-parallel training (`gpus` > 1): 2 CPU processes with gloo, through the CLI and torchrun.

The reference of each distributed run is one process training on the same
global batch (`batch_size` 16 = 2 processes x 8). Dropout is off, so the two
differ only in float summation order: the logged loss of every step and the
final test predictions must agree to 1e-5 (measured: 3e-8 to 1.2e-7, not 0, so
the tolerance stays). Both runs train the random tiny BERT (conftest
`tiny_model`): they compare two ways of training one model, which holds for any
model, so MiniLM's quality is not needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import theme_pairs, train_params

TOLERANCE = 1e-5
NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}

# Imported by every Python process of the job (PYTHONPATH): in torchrun worker 0 it adds a callback that
# SIGKILLs the job's torchrun (as SLURM or a user would) after step DIE_AT_STEP; the workers then die with it.
KILL_HOOK = '''
import os, signal
if os.environ.get("RANK") == "0" and os.environ.get("DIE_AT_STEP"):
    import augsbert.training.pairs as training
    from transformers import TrainerCallback

    class KillJob(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == int(os.environ["DIE_AT_STEP"]):
                os.kill(os.getppid(), signal.SIGKILL)
                signal.pause()  # the kernel kills this worker with its parent (PR_SET_PDEATHSIG)

    fit = training.fit
    training.fit = lambda *a, callbacks=None, **k: fit(*a, callbacks=[*(callbacks or []), KillJob()], **k)
'''


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """32 training pairs of 2-12 words: 2 steps per epoch at batch 16, so the loss is logged at every step."""
    root = tmp_path_factory.mktemp("data")
    theme_pairs(32, 5, words=(2, 12)).to_parquet(root / "train.parquet")
    theme_pairs(24, 6).to_parquet(root / "dev.parquet")
    theme_pairs(24, 7).to_parquet(root / "test.parquet")
    (root / "metrics.json").write_text("{}")  # as every data artifact holds (a folder without it is incomplete)
    return root


def _spec(stage: str, data: Path, model: str, **extra) -> dict:
    arch = "be" if stage == "student" else extra["arch"]
    params = train_params(arch, epochs=2, batch_size=16, checkpoint_steps=2, megabatch=2,
                          config_kwargs=NO_DROPOUT).to_json()
    params.update(model=model, **extra)
    return {"stage": stage, "key": "k", "params": params, "inputs": {"data": str(data)}}


def _cli(command: str, spec: dict, out: Path, tmp_path: Path, **env) -> subprocess.CompletedProcess:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    return subprocess.run([sys.executable, "-m", "augsbert", command, "--spec", f"@{spec_file}", "--out", str(out)],
                          env={**os.environ, "AUGSBERT_GPUS": "2", "AUGSBERT_DEVICE": "cpu", **env},
                          capture_output=True, text=True, timeout=600)


def _same_run(distributed: Path, single: Path) -> None:
    """Equal per-step losses and test predictions (the two artifacts' metrics.json / predictions.parquet)."""
    two, one = (json.loads((p / "metrics.json").read_text()) for p in (distributed, single))
    assert two["processes"] == 2 and two["per_device_batch_size"] == 8 and "processes" not in one
    assert [h["step"] for h in two["loss_log"]] == [h["step"] for h in one["loss_log"]] == [1, 2, 3, 4]
    np.testing.assert_allclose([h["loss"] for h in two["loss_log"]], [h["loss"] for h in one["loss_log"]],
                               atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(pd.read_parquet(distributed / "predictions.parquet")["predicted"],
                               pd.read_parquet(single / "predictions.parquet")["predicted"], atol=TOLERANCE, rtol=0)
    assert two["best_epoch"] == one["best_epoch"]


def test_student_on_two_processes_matches_one_process_with_the_whole_batch(data, tiny_model, tmp_path):
    """Bi-Encoder, length-grouped batches (its default): the global batches are cut per process."""
    from augsbert.jobs.student import run as run_student

    spec = _spec("student", data, tiny_model, use_gold_labels=True, selection="target_dev")
    out = tmp_path / "artifacts" / "student" / "two"
    run = _cli("train-student", spec, out, tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "data-parallel over 2 processes" in run.stderr
    # one writer: nothing of rank 1 beside the artifact, and its resume state is gone
    assert sorted(p.name for p in out.parent.iterdir()) == ["two"]
    assert not (tmp_path / "artifacts" / ".checkpoints" / "student" / "two").exists()
    run_student(spec, tmp_path / "artifacts" / "student" / "one", device="cpu")
    _same_run(out, tmp_path / "artifacts" / "student" / "one")


def test_killed_distributed_teacher_resumes_to_the_uninterrupted_result(data, tiny_model, tmp_path):
    """Cross-Bi-Encoder (Hugging Face Trainer, random batches): SIGKILL of the job after its first checkpoint."""
    from augsbert.jobs.teacher import run as run_teacher

    spec = _spec("teacher", data, tiny_model, arch="cbe", symmetric=False, group_by_length=False)
    out = tmp_path / "artifacts" / "teacher" / "two"
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_HOOK)
    pythonpath = os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")]))
    killed = _cli("train-teacher", spec, out, tmp_path, DIE_AT_STEP="3", PYTHONPATH=pythonpath)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    work = tmp_path / "artifacts" / ".checkpoints" / "teacher" / "two"
    assert [p.name for p in (work / "trainer").iterdir()] == ["checkpoint-2"]
    assert not out.exists()
    resumed = _cli("train-teacher", spec, out, tmp_path)  # the lock died with the killed job: no orphan holds it
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["resumed_from"] == "checkpoint-2"
    assert [h["epoch"] for h in metrics["dev_history"]] == [1, 2]
    run_teacher(spec, tmp_path / "artifacts" / "teacher" / "one", device="cpu")
    _same_run(out, tmp_path / "artifacts" / "teacher" / "one")


def test_sharded_batches_are_the_single_process_batches_cut_in_parts():
    from augsbert.training.batching import LengthGroupedBatchSampler, length_grouped_batches
    from augsbert.training.distributed import ShardedBatchSampler

    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 40, (37, 2))
    data = list(range(37))
    sharded = ShardedBatchSampler(LengthGroupedBatchSampler(data, 8, False, seed=3, lengths=lengths, megabatch=2), 2)
    sharded.set_epoch(1)
    parts = list(sharded)
    whole = length_grouped_batches(lengths, 8, 2, 3, epoch=1)
    assert len(parts) == len(sharded) == 2 * len(whole) == 10
    assert sharded.batch_size == 4
    # step k of process r is part r of global batch k; the short last batch (5) is split 3 + 2
    assert [parts[2 * k] + parts[2 * k + 1] for k in range(len(whole))] == [b.tolist() for b in whole]
    assert [len(p) for p in parts[-2:]] == [3, 2]


def test_a_batch_smaller_than_the_processes_is_topped_up_and_the_global_batch_must_divide():
    from augsbert.config.load import ConfigError
    from augsbert.training.distributed import ShardedBatchSampler, per_device_batch

    class Batches:
        batch_size, drop_last = 4, False

        def __iter__(self):
            return iter([[0, 1, 2, 3], [4]])

        def __len__(self):
            return 2

    assert list(ShardedBatchSampler(Batches(), 2)) == [[0, 1], [2, 3], [4], [0]]
    assert per_device_batch(16, 2) == 8
    with pytest.raises(ConfigError, match="divisible by gpus"):
        per_device_batch(15, 2)


def test_gpus_sizes_the_training_jobs_and_must_divide_their_batches(tmp_path, monkeypatch):
    import yaml

    from augsbert.config.load import ConfigError, prepare_config, read_config
    from augsbert.plan import Plan
    from augsbert.scheduling.resources import job_resources
    from conftest import REPO

    monkeypatch.chdir(tmp_path)
    config = read_config(REPO / "config" / "config.yaml")
    exp = {"dataset": "lee", "models": ["teacher", "student", "lower_bound"], "candidates": {"strategies": ["bm25"], "top_k": 1},
           "seeds": [1], "teacher": {"batch_size": 18}}
    config.update(gpus=2, datasets={"lee": config["datasets"]["lee"]}, grids={}, experiments={"exp": exp})
    plan = Plan(prepare_config(config))
    run = plan.experiment("exp").runs[1]
    sizes = {role: job_resources(plan, run[role], {}) for role in ("teacher", "student", "lower_bound", "labels")}
    # the two data-parallel training stages ask for `gpus` GPUs and 4 CPUs each; labelling for one GPU
    assert {role: (s["gpu"], s["cpus_per_task"]) for role, s in sizes.items()} == {
        "teacher": (2, 8), "student": (2, 8), "lower_bound": (2, 8), "labels": (1, 4)}
    with pytest.raises(ConfigError, match=r"^experiments\.exp\.student\.batch_size: 16 is the global batch of 3 "):
        # checked when the experiment is planned, for each stage declared data_parallel (teacher, student)
        Plan(prepare_config({**config, "gpus": 3})).experiment("exp")  # the teacher's 18 divides, the student's 16 not


def test_a_locked_artifact_stops_the_launcher_before_torchrun(tmp_path, data):
    from augsbert.store.artifacts import writer_lock
    from augsbert.face.cli import EXIT_LOCKED

    out = tmp_path / "artifacts" / "student" / "k"
    spec = _spec("student", data, "m", use_gold_labels=True, selection="target_dev")
    with writer_lock(out):  # this test process is the live writer
        run = _cli("train-student", spec, out, tmp_path)
    assert run.returncode == EXIT_LOCKED, run.stderr[-3000:]
    assert f"is being written by pid {os.getpid()}" in run.stderr
    assert "data-parallel over" not in run.stderr


def test_a_one_process_stage_under_torchrun_refuses_to_run(monkeypatch, tmp_path, capsys):
    from augsbert.face.cli import main

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    spec = tmp_path / "spec.json"
    adapt = {"model": "m", "batch_size": 8, "lr": 3e-5, "warmup_ratio": 0.1, "max_length": 32, "seed": 1,
             "max_steps": 4, "mask_probability": 0.2, "masking": "uniform", "held_out": 0.05, "pool": "train",
             "exclude_eval_sentences": True}
    spec.write_text(json.dumps({"stage": "adapt", "key": "k", "params": adapt, "inputs": {}}))
    assert main(["adapt-mlm", "--spec", f"@{spec}", "--out", str(tmp_path / "adapt" / "k")]) == 2
    assert not (tmp_path / "adapt").exists() and not (tmp_path / ".locks").exists()
    # started by its former name (as workflow/rules/adapt.smk does); the message names the stage's command
    assert "`augsbert adapt` runs in one process; start it without torchrun" in capsys.readouterr().err
