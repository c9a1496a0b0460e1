"""Experiment tracking: one tracker run per training stage, through the trainers' own `report_to`.

`tracking: none | tensorboard | wandb | mlflow` (config) is a runtime choice like
`device`: it reaches the jobs through `$AUGSBERT_TRACKING` and is not part of any
artifact key, so switching it never reruns a finished stage. The CLI opens the
run of the stage it executes (`begin`); every trainer the stage builds takes its
arguments from `trainer_arguments()` (`report_to`, `run_name`) and adds
`callbacks()`, which log the stage's parameters once and the stage's own metrics
(dev Spearman per epoch, which the trainers do not compute) through `log_metrics`.

Runs are named `<experiment>/<stage>/<key>` (the first experiment, by name, that
plans the node; the node's key says its content, the other experiments sharing
it are logged as `augsbert/experiments`). Where the data go is each tool's own
setting, with a default inside the project:

- tensorboard: `<tracking_dir>/<stage>/<key>/` (event files; `tensorboard --logdir logs/tracking`)
- wandb: project `$WANDB_PROJECT` (default `augsbert`); offline with `WANDB_MODE=offline`
- mlflow: `$MLFLOW_TRACKING_URI` (default `./mlruns`), experiment `$MLFLOW_EXPERIMENT_NAME` (default `augsbert`)
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from ..scheduling import progress

log = logging.getLogger(__name__)

TRACKING_ENV = "AUGSBERT_TRACKING"
TRACKING_DIR_ENV = "AUGSBERT_TRACKING_DIR"
BACKENDS = ("none", "tensorboard", "wandb", "mlflow")
# the package each backend needs (transformers' integrations import it)
PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}

_run: dict = {}  # the stage run of this process: name, stage, key, params, experiments
_writer = None  # our tensorboard writer (parameters, stage metrics), opened on first use


def backend() -> str:
    """The configured tracker, checked: an unknown name or a missing package is one clear message."""
    name = os.environ.get(TRACKING_ENV, "none") or "none"
    if name not in BACKENDS:
        raise SystemExit(f"${TRACKING_ENV} is {name!r}; use one of {', '.join(BACKENDS)}")
    if name != "none":
        import importlib.util

        if importlib.util.find_spec(PACKAGES[name]) is None:
            raise SystemExit(f"tracking: {name} needs the `{PACKAGES[name]}` package "
                             f"(pip install 'augsbert[tracking]' or pip install {PACKAGES[name]})")
    return name


def begin(spec: dict) -> None:
    """Name the run of the stage this process executes (called by the CLI before the stage runs)."""
    global _writer
    if _writer is not None:
        _writer.close()
    experiments = list(spec.get("experiments") or [])
    stage, key = spec.get("stage", "stage"), spec.get("key", "run")
    _run.clear()
    _run.update(name="/".join([*experiments[:1], stage, key]), stage=stage, key=key,
                params=spec.get("params", {}), experiments=experiments)
    _writer = None
    name = backend()
    if name == "tensorboard":
        # transformers' TensorBoardCallback reads its directory from this variable when it is built
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(tensorboard_dir())
    elif name == "wandb":
        os.environ.setdefault("WANDB_PROJECT", "augsbert")
    elif name == "mlflow":
        os.environ.setdefault("MLFLOW_EXPERIMENT_NAME", "augsbert")
    if name != "none":
        log.info("tracking: %s run %s", name, _run["name"])


def tensorboard_dir() -> Path:
    root = Path(os.environ.get(TRACKING_DIR_ENV) or "logs/tracking")
    return root / _run.get("stage", "stage") / _run.get("key", "run")


def run_name(part: str | None = None) -> str:
    name = _run.get("name", "augsbert")
    return f"{name}/{part}" if part else name


def trainer_arguments(part: str | None = None) -> dict:
    """`report_to` and `run_name` for a trainer's TrainingArguments; `part` names a side run (seed trial).

    Call it right before building the trainer: for tensorboard it also points the
    integration at the run's directory (a side run gets a subdirectory, so its
    steps do not overlay the main curve).
    """
    name = backend()
    if name == "tensorboard":
        directory = tensorboard_dir() / part if part else tensorboard_dir()
        os.environ["TENSORBOARD_LOGGING_DIR"] = str(directory)
    return {"report_to": "none" if name == "none" else [name], "run_name": run_name(part)}


def _flat(params: dict, prefix: str = "") -> dict[str, str]:
    """Nested stage parameters as `a.b` -> text (mlflow and tensorboard's hparams take flat scalars)."""
    out: dict[str, str] = {}
    for k, v in params.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v if isinstance(v, (int, float, str, bool)) else json.dumps(v)
    return out


def log_params() -> None:
    """The stage's parameters (what its key is made of) and the experiments that share it, once per run."""
    name = backend()
    if name == "none" or not _run or not _main_process():
        return
    params = {"augsbert.stage": _run["stage"], "augsbert.key": _run["key"],
              "augsbert.experiments": ",".join(_run["experiments"]),
              **{f"augsbert.{k}": v for k, v in _flat(_run["params"]).items()}}
    if name == "tensorboard":
        _tensorboard().add_text("augsbert/params", "\n".join(f"    {k}: {v}" for k, v in sorted(params.items())))
    elif name == "wandb":
        import wandb

        if wandb.run is not None:
            wandb.config.update(params, allow_val_change=True)
    elif name == "mlflow":
        import mlflow

        if mlflow.active_run() is not None:
            # mlflow caps a parameter value at 6000 characters and a batch at 100 parameters
            items = [(k, str(v)[:6000]) for k, v in params.items()]
            for i in range(0, len(items), 100):
                mlflow.log_params(dict(items[i:i + 100]))


def _main_process() -> bool:
    return os.environ.get("RANK", "0") == "0"  # torchrun sets RANK; one process writes


def log_metrics(metrics: dict[str, float], step: int) -> None:
    """Metrics the stage computes itself (e.g. `dev/spearman` per epoch) into the stage's run."""
    name = backend()
    if name == "none" or not _main_process():
        return
    values = {k: float(v) for k, v in metrics.items() if v is not None}
    if name == "tensorboard":
        writer = _tensorboard()
        for k, v in values.items():
            writer.add_scalar(k, v, step)
        writer.flush()
    elif name == "wandb":
        import wandb

        if wandb.run is not None:
            wandb.log(values, step=step)
    elif name == "mlflow":
        import mlflow

        if mlflow.active_run() is not None:
            mlflow.log_metrics(values, step=step)


def _tensorboard():
    global _writer
    if _writer is None:
        from torch.utils.tensorboard import SummaryWriter

        _writer = SummaryWriter(log_dir=str(tensorboard_dir()), filename_suffix=".augsbert")
    return _writer


def callbacks() -> list:
    """TrainerCallbacks that log the stage's parameters when training begins (nothing without tracking), and the
    one that shows the steps on the workflow's console (augsbert.scheduling.progress; every trainer takes these)."""
    step = progress.callback()
    steps = [step] if step is not None else []
    if backend() == "none":
        return steps
    from transformers import TrainerCallback

    class StageParameters(TrainerCallback):
        # after the integrations' own on_train_begin (callbacks run in order: report_to ones first),
        # so a wandb / mlflow run is open to receive them
        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                log_params()
            return control

    return [*steps, StageParameters()]
