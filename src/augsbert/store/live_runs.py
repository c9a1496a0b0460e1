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

A record also names Snakemake's own lock files of its run (`snakemake_locks`: name, inode and modification time), so
that those of a killed run are told from a live run's: a run killed while another lived left its lock files, and
every rerun stopped with Snakemake's LockException naming `--unlock`, which `augsbert run` does not take (issue 64
L2). A dead run's lock files go with its record (`clear_stale_locks`); what is left is named by `lock_holders`.
"""

from __future__ import annotations

import atexit
import datetime as dt
import errno
import fcntl
import json
import os
import re
import socket
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
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


def _read(fd: int) -> dict | None:
    try:
        record = json.loads(os.pread(fd, 1 << 24, 0).decode() or "null")
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _alive(path: Path, dead: list[dict] | None = None) -> dict | None:
    """The record at `path` if its run is alive (its lock is held), else None; a dead run's record is removed, with the
    Snakemake lock files it names (those still the same files), and added to `dead`."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # held: the run lives
            return _read(fd) or {"pid": "?", "outputs": [], "inputs": []}
        record = _read(fd) or {}  # nobody holds it: its run ended without removing it (killed)
        record["removed_locks"] = _remove_claimed(path.parent, record.get("snakemake_locks") or ())
        path.unlink(missing_ok=True)
        if dead is not None:
            dead.append(record)
        return None
    finally:
        os.close(fd)


def _locks_dir(folder: Path) -> Path:
    """Snakemake's lock folder of the run records' folder `folder` (<root>/.snakemake/augsbert/runs)."""
    return folder.parent.parent.parent / SNAKEMAKE_LOCKS


def lock_claims(paths: Iterable[str | Path]) -> list[dict]:
    """Snakemake's lock files `paths` as a run's record names them: each file's name (in .snakemake/locks/), inode and
    modification time, so that a file another run wrote under the same name later is never taken for it."""
    claims = []
    for path in map(Path, paths):
        try:
            stat = path.stat()
        except OSError:
            continue
        claims.append({"file": path.name, "ino": stat.st_ino, "mtime_ns": stat.st_mtime_ns})
    return claims


def _remove_claimed(folder: Path, claims: Iterable[dict]) -> int:
    """Remove the lock files a dead run's record names, where they are still the files it wrote; how many."""
    removed = 0
    for claim in claims:
        name = claim.get("file") if isinstance(claim, dict) else None
        if not isinstance(name, str) or not re.fullmatch(r"\d+\.(input|output)\.lock", name):
            continue  # Snakemake's names only: a record edited by hand names nothing else to remove
        path = _locks_dir(folder) / name
        try:
            stat = path.stat()
        except OSError:
            continue
        if (stat.st_ino, stat.st_mtime_ns) == (claim.get("ino"), claim.get("mtime_ns")):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def live_runs(folder: str | Path = RUNS_DIR, dead: list[dict] | None = None) -> list[dict]:
    """The records of the runs alive in `folder`, but this process' own; the dead ones' are swept (and added to
    `dead`), with their Snakemake lock files."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    mine = {os.path.abspath(p) for p in _held}
    found = []
    for path in sorted(folder.glob("*.json")):
        if os.path.abspath(path) in mine:
            continue
        record = _alive(path, dead)
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
                 command: list[str] | None = None, snakemake_locks: Iterable[str | Path] = ()) -> Path | None:
    """Refuse (ConcurrentRunError) when a live run in `folder` writes one of `outputs` or reads one (Snakemake
    removes a job's existing outputs before it starts, and a failed job's after), else record this run, held until
    the process ends (and removed at its normal exit), with its Snakemake lock files (`snakemake_locks`). Returns the
    record's path; None where the file system has no locks (then nothing is checked: a warning says so)."""
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
                      "outputs": outputs, "inputs": inputs, "snakemake_locks": lock_claims(snakemake_locks)}
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


@dataclass
class StaleLocks:
    """What `clear_stale_locks` removed: how many lock files, the killed runs whose they were (their records), and
    the runs alive beside them."""
    removed: int = 0
    killed: list[dict] = field(default_factory=list)
    live: list[dict] = field(default_factory=list)

    def line(self) -> str | None:
        """What `augsbert run` says of it (None: nothing was removed)."""
        if not self.removed:
            return None
        killed = [r for r in self.killed if r.get("removed_locks")]
        whose = (f"of {len(killed)} run(s) killed before they ended ({'; '.join(map(describe, killed[:SHOWN]))})"
                 if killed else "that no live run holds (the run that left them was stopped: killed, its session "
                 "lost, or the machine went down)")
        beside = f"; the live run ({'; '.join(map(describe, self.live[:SHOWN]))}) keeps its own" if self.live else ""
        return (f"removed {self.removed} lock file(s) in {SNAKEMAKE_LOCKS}/ {whose}{beside}; what it finished is kept, "
                "and a job it cut short runs again")


def clear_stale_locks(root: str | Path = ".") -> StaleLocks:
    """Remove Snakemake's lock files in `root` that no live run holds: a run that was killed (`kill -9`, a lost
    session, a power cut) leaves them, and Snakemake then refuses every later run of the folder until `snakemake
    --unlock`, which `augsbert run` does not take. The lock files a killed run's record names go always (also beside
    a live run: issue 64 L2); the others only when no run of `root` is alive (a run killed before its record was
    written, or recorded by an older augsbert, cannot be told from a live one's). Checked under the guard
    `register_run` takes, so a run that starts meanwhile registers after this and is checked against the others as
    always. Nothing where the file system has no locks to tell."""
    root = Path(root)
    locks = root / SNAKEMAKE_LOCKS
    if not locks.is_dir() or not any(locks.iterdir()):
        return StaleLocks()
    runs = root / RUNS_DIR
    try:
        runs.mkdir(parents=True, exist_ok=True)
        with _locked(runs / ".guard"):
            killed: list[dict] = []
            live = live_runs(runs, dead=killed)
            removed = sum(record.get("removed_locks") or 0 for record in killed)
            if not live:
                files = [path for path in locks.iterdir() if path.is_file() and not path.is_symlink()]
                for path in files:
                    path.unlink(missing_ok=True)
                removed += len(files)
            return StaleLocks(removed, killed, live)
    except OSError as err:
        if err.errno in NO_LOCKS:
            return StaleLocks()
        raise


def lock_holders(root: str | Path = ".") -> str:
    """Who holds Snakemake's lock of `root` and what to do, in one line: what `augsbert run` adds to Snakemake's
    LockException (which names `--unlock` alone, an option `augsbert run` does not take)."""
    root = Path(root)
    live = live_runs(root / RUNS_DIR)
    locks = root / SNAKEMAKE_LOCKS
    files = sorted(p.name for p in locks.iterdir() if p.is_file()) if locks.is_dir() else []
    claimed = {claim.get("file") for record in live for claim in record.get("snakemake_locks") or ()}
    holders = [record for record in live if record.get("snakemake_locks")]
    unclaimed = [name for name in files if name not in claimed]
    text = ""
    if holders:
        text = (f"Snakemake's lock of this folder is held by the live run {'; '.join(map(describe, holders[:SHOWN]))}"
                f" (it writes or reads files this run would write). Wait for it to end, or stop it "
                f"({', '.join(stop_hint(r) for r in holders[:SHOWN])}), then run again (`snakemake --unlock` does not "
                "stop a run)")
    if unclaimed:
        text += ("; and " if text else "") + (
            f"{len(unclaimed)} lock file(s) in {SNAKEMAKE_LOCKS}/ ({', '.join(unclaimed[:SHOWN])}) belong to no live "
            "run that says so: a killed run's (killed before its first job), or one started by an older augsbert"
            + (f" (live now: {'; '.join(map(describe, live[:SHOWN]))})" if live else "")
            + ". Once no run of this folder is live `augsbert run` removes them itself; if you are sure that run is "
            "dead, remove them now with `snakemake --unlock` and run again")
    return text or f"Snakemake could not lock this folder, and no live run of it holds {SNAKEMAKE_LOCKS}/: run again"


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


def in_use(folders: Iterable[str | Path], project: str | Path) -> dict[Path, str]:
    """Of the artifact `folders` of the project folder `project` (the one the workflow runs in), those a live run of
    it writes or reads, or a live process writes (its writer lock held), each with who it is: `verify --repair`
    leaves them where they are (moving one aside made the run fail: issue 64 Q2)."""
    folders = list(folders)
    users: dict[str, str] = {}
    for run in live_runs(Path(project) / RUNS_DIR):
        for role in ("outputs", "inputs"):
            for path in run.get(role) or ():
                users.setdefault(os.path.abspath(Path(project) / path),
                                 f"the live run {describe(run)} {'writes' if role == 'outputs' else 'reads'} it")
    found = {Path(f): users[os.path.abspath(f)] for f in folders if os.path.abspath(f) in users}
    for out, holder, _ in busy_outputs([str(f) for f in folders if Path(f) not in found]):
        found[Path(out)] = f"{holder} writes it"
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
