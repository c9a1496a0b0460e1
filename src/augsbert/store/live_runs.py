"""Live Snakemake runs of one project: a second run that would write what a live one writes stops before any job.

Snakemake's own lock (`.snakemake/locks/`) is a set of files that `snakemake --unlock` removes, whether or not
the run that wrote them is alive. After an `--unlock` beside a live run (issue 56, I4), a second run planned an
artifact the first was writing; the first finished it, the second's job found it finished and failed, and
Snakemake removed the failed job's output: the first run's finished artifact. So each run records, before its first job
(the Snakefile's `onstart`), the outputs it plans and the inputs it reads in `.snakemake/augsbert/runs/<pid>-<n>.json`,
and holds an exclusive `flock` on that file for as long as it lives. The kernel releases the lock when the
process ends, even by `kill -9`, so a record nobody holds is a dead run's and is swept; `--unlock` cannot remove a
live one. A run whose planned outputs meet a live run's outputs or inputs is refused with one message naming that
run (`ConcurrentRunError`), as is one that would write an artifact a job of a killed run is still writing (its
writer lock is held: `busy_outputs`); runs of disjoint targets still run side by side, as Snakemake allows them.
"""

from __future__ import annotations

import atexit
import datetime as dt
import errno
import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterable
from pathlib import Path

from .artifacts import holder_text, lock_path

RUNS_DIR = Path(".snakemake", "augsbert", "runs")  # below the folder the workflow runs in
SNAKEMAKE_LOCKS = Path(".snakemake", "locks")  # Snakemake's lock files (what `snakemake --unlock` removes)
SHOWN = 3  # outputs named in a message
NO_LOCKS = (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL)

# The record this process holds (its descriptor keeps the lock): path -> fd
_held: dict[str, int] = {}


class ConcurrentRunError(RuntimeError):
    """A live run in the same folder plans or reads what this run would write."""


def _alive(path: Path) -> dict | None:
    """The record at `path` if its run is alive (its lock is held), else None; a dead run's record is removed."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # held: the run lives
            try:
                record = json.loads(os.pread(fd, 1 << 24, 0).decode() or "null")
            except (OSError, ValueError):
                record = None
            return record if isinstance(record, dict) else {"pid": "?", "outputs": [], "inputs": []}
        path.unlink(missing_ok=True)  # nobody holds it: its run ended without removing it (killed)
        return None
    finally:
        os.close(fd)


def live_runs(folder: str | Path = RUNS_DIR) -> list[dict]:
    """The records of the runs alive in `folder` (the dead ones' are swept), but this process' own."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    mine = {os.path.abspath(p) for p in _held}
    found = []
    for path in sorted(folder.glob("*.json")):
        if os.path.abspath(path) in mine:
            continue
        record = _alive(path)
        if record is not None:
            found.append(record)
    return found


def describe(record: dict) -> str:
    """`pid 1234 on host h, since <time>, started as `snakemake ...``: who a live run is."""
    text = f"pid {record.get('pid')}" + (f" on host {record['host']}" if record.get("host") else "")
    if record.get("since"):
        text += f", since {record['since']}"
    if record.get("command"):
        text += f", started as `{record['command']}`"
    return text


def stop_hint(record: dict) -> str:
    pid, host = record.get("pid"), record.get("host")
    return f"`kill {pid}`" + ("" if not host or host == socket.gethostname() else f" on {host}")


def _locked(path: Path):
    """An exclusive flock on `path` (made if missing) for the `with` block: one run checks and registers at a time."""
    class _Guard:
        def __enter__(self):
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            return self

        def __exit__(self, *exc):
            os.close(self.fd)

    return _Guard()


def register_run(outputs: Iterable[str], inputs: Iterable[str], folder: str | Path = RUNS_DIR,
                 command: list[str] | None = None) -> Path | None:
    """Refuse (ConcurrentRunError) when a live run in `folder` writes one of `outputs` or reads one (Snakemake
    removes a job's existing outputs before it starts, and a failed job's after), else record this run, held until
    the process ends (and removed at its normal exit). Returns the record's path; None where the file system has
    no locks (then nothing is checked: a warning says so)."""
    folder = Path(folder)
    outputs, inputs = sorted(set(map(str, outputs))), sorted(set(map(str, inputs)))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with _locked(folder / ".guard"):
            for record in live_runs(folder):
                theirs = set(record.get("outputs") or ()) | set(record.get("inputs") or ())
                shared = [path for path in outputs if path in theirs]
                if shared:
                    raise ConcurrentRunError(
                        f"another run is live in this folder ({describe(record)}) and writes or reads "
                        f"{len(shared)} of the outputs this run would write ({', '.join(shared[:SHOWN])}"
                        f"{' ...' if len(shared) > SHOWN else ''}); two runs writing one artifact remove each other's "
                        f"work. Wait for it to end, or stop it ({stop_hint(record)}), then run again; no job was "
                        "started (`snakemake --unlock` removes Snakemake's lock files, it does not stop a run)")
            written = busy_outputs(outputs)
            if written:
                out, holder, hint = written[0]
                raise ConcurrentRunError(
                    f"{out} is being written by {holder} (a job that outlived the run that started it?), and this "
                    f"run would write it too{f' ({len(written) - 1} more such output(s))' if len(written) > 1 else ''}. "
                    f"Wait for it to finish, or {hint or 'stop it'}, then run again; no job was started")
            n = 0
            while (path := folder / f"{os.getpid()}-{n}.json").exists():
                n += 1
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            record = {"pid": os.getpid(), "host": socket.gethostname(),
                      "since": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                      "command": " ".join(command if command is not None else ["snakemake", *sys.argv[1:]])[:300],
                      "outputs": outputs, "inputs": inputs}
            os.pwrite(fd, json.dumps(record).encode(), 0)
            _held[str(path)] = fd
    except OSError as err:
        if err.errno not in NO_LOCKS:
            raise
        print(f"augsbert: warning: {folder} cannot be locked ({err.strerror}): a second run started beside this "
              "one (after `snakemake --unlock`) is not stopped", file=sys.stderr)
        return None
    atexit.register(release_run, path)
    return path


def clear_stale_locks(root: str | Path = ".") -> int:
    """Remove Snakemake's lock files in `root` when no run of `root` is alive (none holds its record): a run that
    was killed (`kill -9`, a lost session, a power cut) leaves them, and Snakemake then refuses every later run of
    the folder until `snakemake --unlock`, which `augsbert run` does not take. How many files were removed (0: none
    were there, a run is alive, or the file system has no locks to tell). Checked under the guard `register_run`
    takes, so a run that starts meanwhile registers after this and is checked against the others as always."""
    root = Path(root)
    locks = root / SNAKEMAKE_LOCKS
    if not locks.is_dir() or not any(locks.iterdir()):
        return 0
    runs = root / RUNS_DIR
    try:
        runs.mkdir(parents=True, exist_ok=True)
        with _locked(runs / ".guard"):
            if live_runs(runs):
                return 0
            files = [path for path in locks.iterdir() if path.is_file() and not path.is_symlink()]
            for path in files:
                path.unlink(missing_ok=True)
            return len(files)
    except OSError as err:
        if err.errno in NO_LOCKS:
            return 0
        raise


def busy_outputs(outputs: Iterable[str]) -> list[tuple[str, str, str | None]]:
    """The outputs whose writer lock (augsbert.store.artifacts.writer_lock) another process holds, with who it is and
    how to stop it: a job whose Snakemake was killed lives on and writes its artifact; Snakemake would remove that
    artifact before its own job for it starts, were it finished by then. Lock files are only read, never made."""
    found = []
    for out in outputs:
        lock = lock_path(out)
        try:
            fd = os.open(lock, os.O_RDONLY)
        except OSError:
            continue  # no lock file: never written by a job
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            found.append((out, *holder_text(fd, lock)))
        except OSError:
            pass
        finally:
            os.close(fd)
    return found


def release_run(path: str | Path) -> None:
    """Remove this process' record `path` and drop its lock (the run ended)."""
    fd = _held.pop(str(path), None)
    if fd is None:
        return
    try:
        Path(path).unlink(missing_ok=True)
    finally:
        os.close(fd)
