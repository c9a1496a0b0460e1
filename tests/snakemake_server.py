"""A fork server for the tests' `snakemake` command lines (workflow_helpers.snakemake).

Each Snakemake call of a test used to start a fresh `python -m snakemake`, and about 2 s of each call
went to importing Snakemake and the package before the workflow was even read: some 60 calls per
suite. This process imports them once, then runs every call in a forked child: the child takes the
call's working directory, environment and standard streams and runs `snakemake.cli.main` on the call's
arguments, exactly as `python -m snakemake` does. What the workflow itself imports or sets (common.smk
writes environment variables) stays in that child, so no call sees another's state.

Protocol, one JSON object per line: the request {"args", "cwd", "env", "stdout", "stderr"} (the two
file paths receive the streams) on stdin; the child's pid and then {"returncode"} on stdout.
"""

import json
import os
import sys
import threading
import traceback
from importlib import import_module

# What every call would import: Snakemake's command line, its scheduler and executors, and the parts of
# the package that workflow/rules/common.smk imports.
PRELOAD = (
    "snakemake.cli", "snakemake.api", "snakemake.dag", "snakemake.workflow", "snakemake.persistence",
    "snakemake.scheduling.job_scheduler", "snakemake.executors.local", "snakemake.executors.dryrun",
    "snakemake.report",
    "augsbert.config.load", "augsbert.plan", "augsbert.export.facts", "augsbert.scheduling.resources", "augsbert.training.tracking",
    "augsbert.training.distributed", "augsbert.stages",
)


def run_child(request: dict) -> None:
    """In the forked child: become the call's `python -m snakemake` process, and never return."""
    code = 1
    try:
        os.setsid()  # its own process group: a timed-out call is killed with the jobs it started
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        sys.path[0] = request["cwd"]  # as `python -m` puts the working directory first
        sys.argv = [sys.modules["snakemake.cli"].__file__, *request["args"]]
        from snakemake.cli import main

        try:
            main(request["args"])
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if isinstance(stop.code, str):
                print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the child reports anything as a failed call, as python -m would
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed stream cannot stop the exit
                pass
        os._exit(code)


def serve() -> None:
    for name in PRELOAD:
        try:
            import_module(name)
        except ImportError:  # a module a newer Snakemake moved: the child imports what it needs itself
            pass
    # fork copies only the calling thread: a thread started by an import could hold a lock the child needs
    assert threading.active_count() == 1, threading.enumerate()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            run_child(request)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    serve()
