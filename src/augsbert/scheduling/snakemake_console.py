"""Snakemake run as `augsbert run`'s child: its console passed through, a Ctrl-C relayed (Snakemake stops its jobs
itself; a second one sends it SIGTERM, a third SIGKILL), and when it fails, each failed job's own error line last;
and the logging filter the workflow installs on Snakemake's logger (QuietRuleExceptions)."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from ..store.live_runs import lock_holders
from .stops import EXIT_LABELLING


class QuietRuleExceptions:
    """A logging filter for Snakemake's logger (installed by workflow/rules/common.smk): drops the RuleException
    report of a job whose shell command failed (`RuleException: CalledProcessError ... returned non-zero exit
    status`): the exception's class, the rule file's line and the command once more, above Snakemake's own
    `Error in rule` block, which names the job's log and shows it. Every other error passes."""

    def filter(self, record) -> bool:
        if getattr(record, "exception", None) != "RuleException":
            return True
        message = str(record.msg)
        return not (message.startswith("RuleException:") and "CalledProcessError" in message)


FAILED_LOG = re.compile(r"^\s+log: (.+?) \(check log file\(s\) for error details\)$")


def run_snakemake(command: list[str]) -> int:
    """Run Snakemake, its console passed through (a failed job's RuleException report is dropped by the
    workflow's QuietRuleExceptions); when it fails, the failed jobs' own error lines (the last
    `augsbert ...: error:` line of each job's log) come last, below Snakemake's report."""
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, errors="replace")
    logs, locked = [], False
    with interrupts_passed_on(proc) as interrupts:
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            locked = locked or "Directory cannot be locked" in line
            found = FAILED_LOG.match(line.rstrip("\n"))
            if found:
                logs.extend(found.group(1).split(", "))
        code = proc.wait()
    if interrupts and code != 0:  # a run that finished anyway (the interrupt was ours alone) is no interruption
        raise KeyboardInterrupt
    if code and locked:  # Snakemake's LockException names `--unlock` alone: who holds the folder, what to do
        print(f"augsbert: error: {lock_holders()}", file=sys.stderr)
    # a run stopped for labelling ended with its own line (augsbert.scheduling.stops): nothing failed to add
    for log_file in dict.fromkeys(logs) if code not in (0, EXIT_LABELLING) else ():
        try:
            lines = Path(log_file).read_text(errors="replace").splitlines()
        except OSError:
            continue
        errors = [line for line in lines if line.startswith("augsbert") and ": error: " in line]
        if errors:
            print(f"augsbert: a job failed ({log_file}): {errors[-1]}", file=sys.stderr)
    return code


@contextlib.contextmanager
def interrupts_passed_on(proc: subprocess.Popen):
    """While Snakemake runs: a Ctrl-C is counted, not raised. Snakemake, in the terminal's process group, got it too
    and stops its jobs (which got it as well); its console is passed on until it has ended, so that nothing it says
    is lost (a KeyboardInterrupt in the middle of reading a line drops it) and it removes what the cut jobs left and
    its lock. A second Ctrl-C sends it SIGTERM, a third SIGKILL. Yields the list of interrupts received."""
    interrupts: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return

    def count(signum, frame):
        interrupts.append(signum)
        if len(interrupts) > 1:
            stop = signal.SIGTERM if len(interrupts) == 2 else signal.SIGKILL
            print(f"augsbert: stopping Snakemake ({stop.name})", file=sys.stderr, flush=True)
            proc.send_signal(stop)

    previous = signal.signal(signal.SIGINT, count)
    try:
        yield interrupts
    finally:
        signal.signal(signal.SIGINT, previous)
