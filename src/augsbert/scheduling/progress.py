"""A model job's progress on the console of the run that started it: stage, step k/N, time left, log path.

A workflow job writes everything to logs/<stage>/<key>.log (the rule redirects stdout and stderr), so
Snakemake's console stayed silent for the minutes a teacher trains. The stage rules keep the console as
file descriptor 3 (`3>&2` before the redirection, workflow/rules/stages.smk) and the Snakefile sets
PROGRESS_FD_ENV; a model job then prints one line there every PERIOD_S seconds while it runs:

    augsbert: teacher demo-lee-...: step 12/19 (63 %), 0:48 left (log logs/teacher/<key>.log)

Steps come from the trainers (`callback`, added to every Hugging Face trainer by augsbert.training.tracking); a
job between trainers (scoring, evaluation, encoding) prints the time it has run. Outside the workflow
(no PROGRESS_FD_ENV) nothing is printed here: the stage's own log reaches the terminal.

The time left comes from the job's measured time per step once MEASURED_STEPS steps are measured; before, from
the run's estimate of the job (the file augsbert.scheduling.estimate.estimate_for_run wrote, named by
ESTIMATE_FILE_ENV) times the factor of the load it read before the run (the load now counts this job's threads). Where the measured time per step departs from the estimate's
(idle cores) by more than DEPARTS, the line says by how much and the load now:

    augsbert: teacher sts4k.cbe-...: step 30/60 (50 %), 1:21 left (measured 2.70 s/step, 5.4x the estimate's 0.50 s
    for idle cores; load now 9.8 on 2 core(s), this job's threads included) (log logs/teacher/<key>.log)
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TextIO


PROGRESS_FD_ENV = "AUGSBERT_PROGRESS_FD"
PERIOD_S = 20.0  # below the 30 s a user waits without a sign of life
MEASURED_STEPS = 3  # steps measured before the time left comes from the job's own rate, not the estimate
DEPARTS = 1.5  # a measured time per step this many times the estimate's (or 1 / this) is said to depart from it
# The run's per-job estimates (augsbert.scheduling.estimate.estimate_for_run): a JSON file {key: {"seconds", "steps",
# "step_s", "load", "cores"}} written before the first job, named in the environment the jobs inherit
ESTIMATE_FILE_ENV = "AUGSBERT_ESTIMATE_FILE"

_active: Progress | None = None


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """The progress of one job: the latest trainer step, printed by a background thread every `period` s."""

    def __init__(self, label: str, log_path: str | None, stream: TextIO, period: float | None = None,
                 clock=time.monotonic, estimate: dict | None = None, load=None):
        self.label, self.log_path, self.stream, self.clock = label, log_path, stream, clock
        self.estimate = estimate or {}  # the run's estimate of this job (step_s: seconds per step on idle cores)
        self.load = load or machine_load  # () -> (load average, cores) now
        self.period = PERIOD_S if period is None else period
        self.started = clock()
        self.step = self.total = 0
        self.first_step_at: float | None = None  # time and step of the trainer's first step: the rate's base
        self.first_step = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.phase: str | None = None  # what the job does after its trainer, e.g. "scoring test (4,906 pairs)"
        self.phase_started = 0.0

    def steps(self, step: int, total: int) -> None:
        """The trainer reached `step` of `total` (a new trainer, or a restart, measures anew)."""
        if total != self.total or step < self.step or self.first_step_at is None:
            self.first_step_at, self.first_step = self.clock(), step
        self.step, self.total = step, total

    def line(self) -> str:
        now = self.clock()
        if self.phase:  # past the last step: no frozen "100 %, 0:00 left" while the job scores its splits
            what = f"{self.phase}, for {_clock(now - self.phase_started)}"
        elif self.total:
            what = f"step {self.step}/{self.total} ({100 * self.step // self.total} %), {self.time_left(now)}"
        else:
            what = f"running for {_clock(now - self.started)}"
        return f"augsbert: {self.label}: {what}" + (f" (log {self.log_path})" if self.log_path else "")

    def time_left(self, now: float) -> str:
        """The time left of the trainer's steps: measured once MEASURED_STEPS steps are, else the estimate's (for
        idle cores, times the load factor now), else said to come; with the estimate where they part."""
        done, left = self.step - self.first_step, self.total - self.step
        expected = self.estimate.get("step_s")
        if done >= MEASURED_STEPS or (done > 0 and not expected):
            rate = (now - self.first_step_at) / done
            text = f"{_clock(rate * left)} left"
            if not expected:
                return text
            ratio = rate / expected
            if 1 / DEPARTS <= ratio <= DEPARTS:
                return f"{text} (measured {_rate(rate)}/step, as estimated)"
            load, cores = self.load()
            return (f"{text} (measured {_rate(rate)}/step, {ratio:.1f}x the estimate's {_rate(expected)} for idle "
                    f"cores; load now {load:.1f} on {cores} core(s), this job's threads included)")
        if expected:  # the load the estimate read before the run (the load now counts this job's own threads)
            load, cores = self.estimate.get("load"), self.estimate.get("cores")
            if not isinstance(load, (int, float)) or not isinstance(cores, int):
                load, cores = self.load()
            factor = load_factor(load, cores)
            return (f"about {_clock(expected * factor * left)} left (estimated, {factor:.1f}x for load {load:.1f} "
                    f"on {cores} core(s); {done} of {MEASURED_STEPS} steps measured)")
        return "time left after the first step"

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


def _rate(seconds: float) -> str:
    return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.0f} s"


def machine_load() -> tuple[float, int]:
    """(the 1-minute load average, the cores this process may use), read now; (0.0, cores) where the system
    gives no load average."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        load = 0.0
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return load, max(1, cores)


def load_factor(load: float, cores: int) -> float:
    """How much longer a job takes than on idle cores with `load` other busy threads on `cores` cores: a job keeps
    its cores busy and gets cores / (cores + load) of them, 1 + load / cores (a lower bound: threads of one job that
    wait on each other lose more, docs/guide/own-data.md)."""
    return 1.0 + max(0.0, load) / max(1, cores)


def job_estimate(key: str, env=None) -> dict:
    """The run's estimate of job `key` (ESTIMATE_FILE_ENV's file, written before the first job); {} where there is
    none (a job started another way, on a cluster, a file gone)."""
    env = os.environ if env is None else env
    path = env.get(ESTIMATE_FILE_ENV)
    if not path:
        return {}
    try:
        found = json.loads(Path(path).read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


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
    from ..stages import REGISTRY  # noqa: PLC0415  (here: the warm client imports this module for one name)

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
    _active = Progress(f"{label or stage} {Path(out).name}", log_path(stage, out), stream,
                       estimate=job_estimate(Path(out).name, env)).start()
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
    _console(f"augsbert: warning: {message}", env)


def say(message: str, env=None) -> None:
    """What a job did that the user waits to read (a person's labels taken in, issue 64): in the job's log, and on
    the workflow's console as well (not only in the log, as a job's own lines are)."""
    import logging

    logging.getLogger("augsbert").info(message)
    _console(f"augsbert: {message}", env)


def _console(line: str, env=None) -> None:
    env = os.environ if env is None else env
    fd = env.get(PROGRESS_FD_ENV)
    if fd and fd.isdigit():
        try:
            with os.fdopen(os.dup(int(fd)), "w") as console:
                print(line, file=console, flush=True)
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
