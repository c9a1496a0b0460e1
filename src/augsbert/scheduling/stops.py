"""A run stopped for a person (issue 64): with `active.annotator: file` a round's labelling job writes the pairs to
label (annotate/<experiment>/round_<r>.csv) and stops the run. That stop is planned, not a failure, and it says so:

- the job ends with `augsbert active-label: stopped for labelling: <file>: round r's N pairs ...; fill its score
  column (...), then continue with `<command>`` and exit status EXIT_LABELLING (augsbert.errors.LabellingStop);
- <command> continues *this* run: `augsbert run` puts its own command line into CONTINUE_ENV before it starts
  Snakemake; under bare Snakemake the workflow's `onstart` writes the Snakemake command of the run there
  (`snakemake_command`: the executable as this project installs it, the cores, the user's config files, --config
  and targets); the jobs inherit it;
- Snakemake reports a job that exits non-zero as a failure ("Error in rule active_label:", "Exiting because a job
  execution failed", "WorkflowError", exit 1). `StopReport`, a filter on Snakemake's logger
  (workflow/rules/common.smk), keeps the first two off the console for a stop (the job's log holds its line), and
  the workflow's `onerror` calls `end_for_labelling`: where every failed job stopped for labelling, the run ends
  with one line saying so and exits with EXIT_LABELLING before Snakemake's own closing error. A run where another
  job failed as well keeps Snakemake's report and exit status, the stops' line printed with it.

`augsbert run` passes the status on (docs/guide/errors.md, `augsbert run --help`).
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from pathlib import Path

from ..stages import REGISTRY

CONTINUE_ENV = "AUGSBERT_CONTINUE"  # the command that continues the run (the labelling job names it)
EXIT_LABELLING = 3  # a run (or a labelling job) stopped for a person: not an error (1) nor a config error (2)
STOP_MARK = ": stopped for labelling: "  # in the job's line: `augsbert active-label: stopped for labelling: ...`
FINAL_ERROR = "Exiting because a job execution failed"  # the start of Snakemake's closing line of a failed run


def quoted(words) -> str:
    return " ".join(shlex.quote(str(w)) for w in words)


def _shown(path: str | Path, project: str | Path) -> str:
    """A path as the user would type it in the project folder: relative where it lies inside it."""
    path, project = Path(path).absolute(), Path(project).absolute()
    return str(path.relative_to(project)) if path.is_relative_to(project) else str(path)


def executable(name: str, project: str | Path, module: str) -> list[str]:
    """How to call the command `name` from the project folder: the project's `.venv/bin/<name>` where it is there
    (the README's way), else the one beside this interpreter, else this interpreter's `-m <module>`. Never the bare
    name: the workflow puts the interpreter's folder on its own PATH (common.smk), not on the user's shell's."""
    if (Path(project) / ".venv" / "bin" / name).is_file():
        return [f".venv/bin/{name}"]
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return [_shown(beside, project)]
    return [_shown(sys.executable, project), "-m", module]


def run_command(argv: list[str], project: str | Path) -> str:
    """`augsbert run ...` as typed (`argv`: the words after `augsbert`), with the project's executable."""
    return quoted([*executable("augsbert", project, "augsbert"), *argv])


def snakemake_command(project: str | Path, cores: int | None, configfiles, config_args, targets) -> str:
    """The Snakemake command that continues a run: its cores, its --configfile files (the user's: the Snakefile's
    own config/config.yaml is read anyway), its --config and targets, ended by `--` as docs/guide/errors.md asks."""
    words = executable("snakemake", project, "snakemake")
    if cores:
        words += ["--cores", str(cores)]
    files = [_shown(f, project) for f in configfiles]
    if files:
        words += ["--configfile", *files]
    if config_args:
        words += ["--config", *config_args]
    if targets:
        words += ["--", *targets]
    return quoted(words)


def continue_command() -> str:
    """The command a stopped run continues with (CONTINUE_ENV), or what to do where none was handed down (a
    labelling job run on its own)."""
    return os.environ.get(CONTINUE_ENV) or "the command you ran"


def stop_line(log_files) -> str | None:
    """The labelling job's stop, read back from its log: the text after STOP_MARK of its last such line."""
    for log_file in log_files or ():
        try:
            lines = Path(log_file).read_text(errors="replace").splitlines()
        except OSError:
            continue
        found = [line.split(STOP_MARK, 1)[1] for line in lines if line.startswith("augsbert") and STOP_MARK in line]
        if found:
            return found[-1]
    return None


def waits_for_a_person(rule: str | None) -> bool:
    """Whether jobs of the rule `rule` may stop for a person (their stage declares `awaits`)."""
    declared = REGISTRY.get(rule or "")
    return declared is not None and declared.awaits is not None


def _event(record) -> str:
    event = getattr(record, "event", None)
    return str(getattr(event, "value", event))


class StopReport(logging.Filter):
    """A filter on Snakemake's logger: a labelling job's stop is no failure, so Snakemake's report of it (the
    `Error in rule <rule>:` block of a rule whose stage `awaits` a person, and the closing `Exiting because a job
    execution failed` while every failed job stopped for labelling) is kept off the console; the stops are kept
    for `end_for_labelling`. Every other record passes."""

    def __init__(self):
        super().__init__()
        self.stops: list[str] = []  # each stopped job's line
        self.failures = 0  # other failed jobs

    def filter(self, record) -> bool:
        if _event(record) == "job_error":
            waits = waits_for_a_person(getattr(record, "rule_name", None))
            line = stop_line(getattr(record, "log", None)) if waits else None
            if line is None:
                self.failures += 1
                return True
            self.stops.append(line)
            return False
        if str(record.msg).startswith(FINAL_ERROR):
            return not self.stops or bool(self.failures)
        return True


def final_line(stops: list[str]) -> str:
    """The line a run stopped for labelling ends with."""
    return (f"augsbert: the run stopped for labelling (not an error; exit status {EXIT_LABELLING}): "
            + "; ".join(dict.fromkeys(stops)))


def end_for_labelling(report: StopReport, failed_jobs=None) -> None:
    """The workflow's `onerror`: where every failed job stopped for labelling, say so last and exit with
    EXIT_LABELLING; where another job failed too, print the stops' line and let Snakemake end as it does.
    `failed_jobs`: Snakemake's failed jobs (its scheduler's), checked against the stops seen."""
    if not report.stops:
        return
    others = [job for job in failed_jobs or () if not waits_for_a_person(job.rule.name) or stop_line(job.log) is None]
    if report.failures or others:
        print("augsbert: a job failed (above); the run stopped for labelling as well: "
              + "; ".join(dict.fromkeys(report.stops)), file=sys.stderr, flush=True)
        return
    print(final_line(report.stops), file=sys.stderr, flush=True)
    sys.exit(EXIT_LABELLING)
