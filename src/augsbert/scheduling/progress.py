"""A model job's progress on the console of the run that started it: stage, step k/N, ETA, log path.

A workflow job writes everything to logs/<stage>/<key>.log (the rule redirects stdout and stderr), so
Snakemake's console stayed silent for the minutes a teacher trains. The stage rules keep the console as
file descriptor 3 (`3>&2` before the redirection, workflow/rules/stages.smk) and the Snakefile sets
PROGRESS_FD_ENV; a model job then prints one line there every PERIOD_S seconds while it runs:

    augsbert: teacher demo-lee-...: step 12/19 (63 %), ETA 0:48 (log logs/teacher/<key>.log)

Steps come from the trainers (`callback`, added to every Hugging Face trainer by augsbert.training.tracking); a
job between trainers (scoring, evaluation, encoding) prints the time it has run. Outside the workflow
(no PROGRESS_FD_ENV) nothing is printed here: the stage's own log reaches the terminal.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TextIO

from ..stages import REGISTRY

PROGRESS_FD_ENV = "AUGSBERT_PROGRESS_FD"
PERIOD_S = 20.0  # below the 30 s a user waits without a sign of life

_active: Progress | None = None


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """The progress of one job: the latest trainer step, printed by a background thread every `period` s."""

    def __init__(self, label: str, log_path: str | None, stream: TextIO, period: float | None = None,
                 clock=time.monotonic):
        self.label, self.log_path, self.stream, self.clock = label, log_path, stream, clock
        self.period = PERIOD_S if period is None else period
        self.started = clock()
        self.step = self.total = 0
        self.first_step_at: float | None = None  # time and step of the trainer's first step: the ETA's base
        self.first_step = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.phase: str | None = None  # what the job does after its trainer, e.g. "scoring test (4,906 pairs)"
        self.phase_started = 0.0

    def steps(self, step: int, total: int) -> None:
        """The trainer reached `step` of `total` (a new trainer, or a restart, begins a new ETA)."""
        if total != self.total or step < self.step or self.first_step_at is None:
            self.first_step_at, self.first_step = self.clock(), step
        self.step, self.total = step, total

    def line(self) -> str:
        now = self.clock()
        if self.phase:  # past the last step: no frozen "100 %, ETA 0:00" while the job scores its splits
            what = f"{self.phase}, for {_clock(now - self.phase_started)}"
        elif self.total:
            done = self.step - self.first_step
            eta = (f"ETA {_clock((now - self.first_step_at) / done * (self.total - self.step))}" if done > 0
                   else "ETA after the first step")
            what = f"step {self.step}/{self.total} ({100 * self.step // self.total} %), {eta}"
        else:
            what = f"running for {_clock(now - self.started)}"
        return f"augsbert: {self.label}: {what}" + (f" (log {self.log_path})" if self.log_path else "")

    def print(self) -> None:
        try:
            print(self.line(), file=self.stream, flush=True)
        except (OSError, ValueError):  # the console went away (a closed terminal): the job goes on
            self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.print()

    def start(self) -> Progress:
        self._thread = threading.Thread(target=self._run, name="augsbert-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)


def log_path(stage: str, out: str) -> str | None:
    """The rule's log of a workflow artifact, artifacts/<stage>/<key> -> logs/<stage>/<key>.log, where it exists."""
    path = Path(out)
    if path.parent.name != stage or path.parent.parent.name != "artifacts":
        return None
    log = path.parent.parent.parent / "logs" / stage / f"{path.name}.log"
    return str(log) if log.exists() else None


def role_label(stage: str, inputs) -> str | None:
    """The console's name of a job whose stage does not name it (its declaration's `console_label`: the lower
    bound is a student job without teacher labels); `inputs`: the planned node's input roles. None for the rest."""
    declared = REGISTRY.get(stage)
    if declared is None or declared.console_label is None:
        return None
    return declared.console_label({"inputs": dict(inputs or {})})


class JobTitle:
    """The message of a stage rule (workflow/rules/stages.smk `message:`), formatted by Snakemake per job as
    `{JOB_TITLE:<key>/}` (the key passed as the format spec; the `/` keeps Snakemake's `q`/`u` spec suffixes off
    it): for a job named by its role, `lower_bound: artifacts/student/<key> (log logs/student/<key>.log)`, which
    Snakemake prints as `Job N: ...` in place of `localrule student:`; for any other job an empty message, i.e.
    Snakemake's usual block."""

    def __init__(self, node_of):
        self.node_of = node_of  # key -> planned node (Plan.node)

    def __format__(self, spec: str) -> str:
        key = spec.rstrip("/")
        try:
            node = self.node_of(key)
        except Exception:  # a key the plan does not know is Snakemake's to report, never the title's
            return ""
        label = role_label(node.stage, node.inputs)
        if not label:
            return ""
        return f"{label}: artifacts/{node.stage}/{key} (log logs/{node.stage}/{key}.log)"


def start(stage: str, out: str, env=None, label: str | None = None) -> Progress | None:
    """Start printing the progress of the job writing `out` to the console descriptor, if the workflow gave one;
    `label` names the job where its stage does not (the lower bound, a `student` job)."""
    global _active
    env = os.environ if env is None else env
    fd = env.get(PROGRESS_FD_ENV)
    if not fd or not fd.isdigit():
        return None
    try:
        stream = os.fdopen(os.dup(int(fd)), "w", buffering=1)  # a copy: closing it leaves the descriptor alone
    except OSError:  # not open in this process (a job started another way)
        return None
    _active = Progress(f"{label or stage} {Path(out).name}", log_path(stage, out), stream).start()
    return _active


def phase(text: str) -> None:
    """The job's step after training (e.g. `scoring test (4,906 pairs)`), shown instead of the trainer's last step."""
    if _active is not None:
        _active.phase, _active.phase_started = text, _active.clock()


def stop() -> None:
    global _active
    if _active is not None:
        _active.stop()
        try:
            _active.stream.close()
        except OSError:
            pass
        _active = None


def warn(message: str, env=None) -> None:
    """A warning the user must see during a run: in the job's log, and on the workflow's console as well."""
    import logging

    logging.getLogger("augsbert").warning(message)
    env = os.environ if env is None else env
    fd = env.get(PROGRESS_FD_ENV)
    if fd and fd.isdigit():
        try:
            with os.fdopen(os.dup(int(fd)), "w") as console:
                print(f"augsbert: warning: {message}", file=console, flush=True)
        except OSError:  # no console descriptor in this process
            pass


def callback():
    """A TrainerCallback that passes each step to the job's progress; None when no progress is printed."""
    if _active is None:
        return None
    from transformers import TrainerCallback

    progress = _active

    class StepProgress(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            progress.steps(state.global_step, state.max_steps)
            return control

        def on_step_end(self, args, state, control, **kwargs):
            progress.steps(state.global_step, state.max_steps)
            return control

    return StepProgress()
