"""What profiles/slurm asks the cluster before a run, and what SLURM jobs are sized against.

`configure()` runs when Snakemake parses the profile (in the process that submits the jobs; the jobs inherit
its environment through `sbatch --export=ALL`):

- job status: the SLURM plugin uses `sacct` whenever the program exists, but `sacct` answers only where
  accounting (slurmdbd) is set up; with accounting off every status query fails and the run waits forever.
  `AUGSBERT_SLURM_STATUS=sacct|squeue` chooses; unset, `sacct` is used if it answers a query shaped like
  the plugin's, else `squeue` (which sees finished jobs for the cluster's MinJobAge, 5 minutes by default).
- CPUs: sbatch accepts a job asking more CPUs than any node of its partition offers and SLURM keeps it
  pending for ever (reason PartitionConfig). The CPUs one job can get in each partition (its largest node,
  at most the partition's MaxCPUsPerNode) are read from `scontrol show partition` and `sinfo` and exported
  as `AUGSBERT_SLURM_PARTITION_CPUS`; `cpu_limit` caps a job's CPUs at them and at `AUGSBERT_SLURM_CPUS`.
  Under the profile a job's threads are its CPUs (`job_threads`), so OMP threads and the allocation agree.
- no controller: where sbatch exists but neither `sacct` nor `squeue` answers (a login node whose slurmctld
  is down or unreachable), `configure` stops with one message instead of letting the plugin submit and then
  wait on job states for ever.
- sbatch's message for a refused group job: Snakemake 9's GroupJob.log_error drops the message an
  executor reports (the plugin's "SLURM sbatch failed. The error message was ..."), so a refused group
  job showed only "Error in group evaluation" (snakemake-executor-plugin-slurm issue 456).
  `show_group_error_messages` logs it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, MutableMapping
from datetime import datetime, timedelta

STATUS_ENV = "AUGSBERT_SLURM_STATUS"
CPUS_ENV = "AUGSBERT_SLURM_CPUS"
PARTITION_CPUS_ENV = "AUGSBERT_SLURM_PARTITION_CPUS"  # written by configure(): "main=32,gpu=8,*=32" (* = default)
PROFILE_ENV = "AUGSBERT_SLURM_PROFILE"  # "1" once configure() ran: jobs are sized for SLURM
STATUS_COMMANDS = ("sacct", "squeue")
PROBE_NAME = "augsbert-probe"  # a job name no job has: the probes ask for it
TIMEOUT_S = 30  # a sacct that waits for an unreachable slurmdbd gives up after MessageTimeout (10 s default)

Run = Callable[..., subprocess.CompletedProcess]


class SlurmSettingError(ValueError):
    """An AUGSBERT_SLURM_* variable with a value that cannot be used."""


def _answers(argv: list[str], run: Run) -> subprocess.CompletedProcess | None:
    """The finished command if it exited 0, else None (missing program, error, timeout)."""
    try:
        proc = run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc if proc.returncode == 0 else None


def accounting_answers(run: Run = subprocess.run) -> bool:
    """Whether `sacct` answers a query of the plugin's shape (its start time format keeps SLURM < 20.11 working)."""
    start = f"{datetime.now() - timedelta(days=2):%Y-%m-%dT%H:00}"
    return _answers(["sacct", "-X", "--parsable2", "--noheader", "--format=JobIdRaw,State", "--starttime", start,
                     "--endtime", "now", "--name", PROBE_NAME], run) is not None


def queue_answers(run: Run = subprocess.run) -> bool:
    return _answers(["squeue", "--noheader", "--format=%i", "--name", PROBE_NAME], run) is not None


def status_command(env: Mapping[str, str], run: Run = subprocess.run) -> str | None:
    """`sacct` or `squeue` for the plugin's job status queries; None where neither answers (no cluster here:
    the plugin's own default applies)."""
    given = (env.get(STATUS_ENV) or "").strip()
    if given:
        if given not in STATUS_COMMANDS:
            raise SlurmSettingError(f"{STATUS_ENV}={given!r}: use one of {', '.join(STATUS_COMMANDS)} "
                                    "(sacct needs SLURM accounting; unset, it is used if it answers)")
        return given
    if accounting_answers(run):
        return "sacct"
    if queue_answers(run):
        return "squeue"
    return None


def _fields(line: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in line.split() if "=" in item)


def partition_cpus(run: Run = subprocess.run) -> dict[str, int]:
    """CPUs one job can get in each partition: the most CPUs of one of its nodes, at most its MaxCPUsPerNode.
    The default partition is also listed as "*". Empty where SLURM does not answer."""
    partitions = _answers(["scontrol", "show", "partition", "--oneliner"], run)
    nodes = _answers(["sinfo", "--noheader", "--Node", "--format=%R|%c"], run)
    if partitions is None or nodes is None:
        return {}
    largest: dict[str, int] = {}
    for line in nodes.stdout.splitlines():
        name, _, cpus = line.strip().partition("|")
        if cpus.strip().isdigit():
            largest[name] = max(largest.get(name, 0), int(cpus))
    offer: dict[str, int] = {}
    for line in partitions.stdout.splitlines():
        fields = _fields(line)
        name = fields.get("PartitionName")
        if not name or name not in largest:
            continue
        cpus = largest[name]
        if fields.get("MaxCPUsPerNode", "").isdigit():
            cpus = min(cpus, int(fields["MaxCPUsPerNode"]))
        offer[name] = cpus
        if fields.get("Default") == "YES":
            offer["*"] = cpus
    return offer


def format_partition_cpus(offer: Mapping[str, int]) -> str:
    return ",".join(f"{name}={cpus}" for name, cpus in offer.items())


def parse_partition_cpus(text: str) -> dict[str, int]:
    offer = {}
    for item in (text or "").split(","):
        name, _, cpus = item.strip().partition("=")
        if name and cpus.strip().isdigit():
            offer[name] = int(cpus)
    return offer


def _positive_int(env: Mapping[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise SlurmSettingError(f"{name}={raw!r}: give a whole number of CPUs, 1 or more")
    return int(raw)


def cpu_limit(cpus: int, partition: str | None, env: Mapping[str, str] | None = None) -> int:
    """`cpus`, at most what one job gets in `partition` (None: the default partition) and at most
    AUGSBERT_SLURM_CPUS."""
    env = os.environ if env is None else env
    offer = parse_partition_cpus(env.get(PARTITION_CPUS_ENV, ""))
    limits = [cpus, _positive_int(env, CPUS_ENV), offer.get(partition or "*")]
    return max(1, min(limit for limit in limits if limit is not None))


def job_threads(declared: int, resources: Mapping, env: Mapping[str, str] | None = None) -> int:
    """A stage job's threads: under the SLURM profile the CPUs its job asks for (`cpus_per_task`, or for a
    stage of fixed sizes its declared threads within the partition's limit), so that the threads the job
    runs and its allocation agree; elsewhere the stage's declared threads."""
    env = os.environ if env is None else env
    if env.get(PROFILE_ENV) != "1":
        return declared
    return resources.get("cpus_per_task") or cpu_limit(declared, resources.get("slurm_partition"), env)


def show_group_error_messages() -> None:
    """Log the message an executor reports for a failed group job (sbatch's refusal), which Snakemake 9's
    GroupJob.log_error drops; the group's error report follows as before. Applied once per process."""
    from snakemake.jobs import GroupJob
    from snakemake.logging import logger

    if getattr(GroupJob.log_error, "shows_message", False):
        return
    original = GroupJob.log_error

    def log_error(self, msg=None, aux_logs=None, **kwargs):
        if msg:
            logger.error(f"Error in group {self.groupid}: {msg}")
        return original(self, msg=msg, aux_logs=aux_logs, **kwargs)

    log_error.shows_message = True
    GroupJob.log_error = log_error


def configure(environ: MutableMapping[str, str] | None = None, run: Run = subprocess.run) -> str | None:
    """Called by profiles/slurm: exports the partitions' CPUs and the profile's mark to `environ` (the jobs
    inherit them) and returns the job status command for the plugin (None: the plugin's default)."""
    environ = os.environ if environ is None else environ
    _positive_int(environ, CPUS_ENV)  # a bad value is reported now, not in the first job's sizes
    status = status_command(environ, run)
    if status is None and _answers(["sbatch", "--version"], run) is not None:
        # sbatch here but no controller: the plugin's status queries would wait for ever (12+ minutes seen,
        # deaf to SIGTERM); stop while the profile is parsed, before any job is submitted
        raise SlurmSettingError(f"profiles/slurm: sbatch is installed here, but no SLURM controller answers (squeue "
                                f"and sacct failed or gave no answer within {TIMEOUT_S} s); check the cluster with "
                                "`scontrol ping`, or run without --profile profiles/slurm")
    if PARTITION_CPUS_ENV not in environ:
        environ[PARTITION_CPUS_ENV] = format_partition_cpus(partition_cpus(run))
    environ[PROFILE_ENV] = "1"
    try:
        show_group_error_messages()
    except ImportError:  # parsed outside Snakemake
        pass
    return status
