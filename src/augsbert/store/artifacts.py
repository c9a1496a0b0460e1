"""Artifact directories: one writer per output, written under a temporary name and renamed when complete.

A directory named like a finished artifact is always finished: a killed job
leaves only `.<name>.partial-<pid>` behind, which no later stage can mistake
for a result. A finished artifact is never overwritten.

Every output has one writer at a time: `writer_lock` takes an exclusive lock
on `artifacts/.locks/<stage>/<key>.lock` (another output's beside it, in
`<its folder>/.locks/`: `stage_sidecar`) for the whole job. A job whose Snakemake
was killed can live on as an orphan; a rerun then stops with a message naming
that process instead of deleting its partial files and sharing its
checkpoints. Holding the lock is also what makes it safe to sweep the
temporary files of killed writes: no other live process can own them.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import glob
import json
import logging
import math
import os
import shutil
import socket
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from ..config.reading import regular_bytes, utf8
from .keys import is_key
from .manifests import WRITTEN_WITH, write_manifest, key_problem, problems
from .processes import alive

log = logging.getLogger(__name__)

# Hub models resolved by this process: reference -> commit (store/model_refs.py adds them; artifact_dir
# records them in the stage's metrics.json).
RESOLVED_COMMITS: dict[str, str] = {}


class ArtifactExistsError(FileExistsError):
    pass


class ArtifactLockedError(RuntimeError):
    """Another live process is writing the same output."""


class LockUnsupportedError(OSError):
    """The file system cannot lock files (e.g. Lustre mounted without `flock`)."""


class OutputWriteError(RuntimeError):
    """An output location is read-only, full or not ours to write: the message names the path."""


# Failures fixed on the file system, not in the code. A full disk or a read-only mount can only
# come from writing; a permission error is ours only when it concerns the output location.
FULL_OR_READ_ONLY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
FORBIDDEN = frozenset({errno.EACCES, errno.EPERM})


def _concerns(filename, path: Path) -> bool:
    if filename is None:
        return True
    target, path = Path(os.path.abspath(filename)), Path(os.path.abspath(path))
    return target == path or path in target.parents or target in path.parents


@contextmanager
def writing(path: str | Path) -> Iterator[None]:
    """Turn a read-only, full or forbidden output location into one OutputWriteError naming `path`.

    A library that wraps a failed write in its own exception type (safetensors' SafetensorError on a full
    disk) is recognised by the errno in its message (`write_failure`).
    """
    try:
        yield
    except OSError as err:
        if not (err.errno in FULL_OR_READ_ONLY or (err.errno in FORBIDDEN and _concerns(err.filename, path))):
            raise
        detail = f" ({_shown(err.filename, path)})" if err.filename and os.path.abspath(err.filename) != \
            os.path.abspath(path) else ""
        raise OutputWriteError(f"cannot write {path}: {err.strerror or os.strerror(err.errno)}{detail}") from err
    except OutputWriteError:
        raise  # named by an inner `writing` already
    except Exception as err:
        code = write_failure(err)
        if code is None:
            raise
        raise OutputWriteError(f"cannot write {path}: {os.strerror(code)} (while {type(err).__name__} saved a file "
                               "into it)") from err


def write_failure(err: BaseException) -> int | None:
    """The errno of a full disk or read-only mount that a library reported in an exception of its own type
    (safetensors' SafetensorError carries Rust's `Os { code: 28, ... }`; torch's RuntimeError a message), else
    None."""
    import re

    if isinstance(err, OSError):
        return None
    text = str(err)
    match = re.search(r"\bOs \{ code: (\d+)|\(os error (\d+)\)", text)  # Rust's io::Error, Debug and Display
    code = int(next(g for g in match.groups() if g)) if match else None
    if code is None:
        for candidate in FULL_OR_READ_ONLY:
            if os.strerror(candidate) in text:
                code = candidate
    return code if code in FULL_OR_READ_ONLY else None


def _shown(filename, path: str | Path) -> str:
    """`filename` as a reader knows it: a file of `path`'s partial directory (the artifact being written) is
    named as it will be in the finished artifact, `<path>/metrics.json`, not by its temporary folder."""
    target, tmp = Path(os.path.abspath(filename)), Path(os.path.abspath(partial_name(path)))
    if tmp in target.parents:
        return str(Path(path) / target.relative_to(tmp))
    return str(filename)


def nan_to_null(obj: Any) -> Any:
    """NaN/inf -> None, so the file is strict JSON (an undefined metric reads as null)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: nan_to_null(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [nan_to_null(v) for v in obj]
    return obj


def partial_name(path: str | Path) -> Path:
    """`dir/name` -> `dir/.name.partial-<pid>`: the temporary name a write goes to before its rename."""
    path = Path(path)
    return path.with_name(f".{path.name}.partial-{os.getpid()}")


def write_text(path: str | Path, text: str) -> None:
    """Write a file atomically (temp file + rename): readers see the old or the new file, never half of one.

    A failed write (a full disk) removes its temporary file, and its error names `path`: the OSError of a
    failing write() names no file.
    """
    tmp = partial_name(path)
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException as err:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        if isinstance(err, OSError) and err.errno and not err.filename:
            raise OSError(err.errno, err.strerror or os.strerror(err.errno), str(path)) from err
        raise


def write_json(path: str | Path, obj: Any) -> None:
    """Write strict JSON atomically (temp file + rename)."""
    write_text(path, json.dumps(nan_to_null(obj), indent=2, ensure_ascii=False, allow_nan=False) + "\n")


class DamagedArtifactError(ValueError):
    """A JSON file of an artifact (or a spec) cannot be parsed: cut short, or edited by hand."""


JSON_LIMIT = 256 << 20  # bytes of a JSON file an artifact or results/ holds (they are kilobytes to megabytes)
DAMAGED = ("the file is damaged. Delete the folder it is in if that is an artifact (Snakemake then rebuilds it), or "
           "repair the file")


def read_json(path: str | Path, what: str = "JSON file", fix: str = DAMAGED) -> Any:
    """The JSON in `path`; a file that does not parse or is not UTF-8 raises DamagedArtifactError naming it and
    `fix`, a path that is no regular file (a folder named `x.json`, a device) one saying what it is (a truncated
    metrics.json once surfaced as a bare JSONDecodeError, no file named; issue 56 S9/S10: UnicodeDecodeError,
    IsADirectoryError). A missing file raises FileNotFoundError."""
    data = regular_bytes(path, what, JSON_LIMIT, DamagedArtifactError, fix="remove or rename it")
    text = utf8(data, path, fix, DamagedArtifactError)
    try:
        return json.loads(text)
    except ValueError as err:
        raise DamagedArtifactError(f"{path}: not valid JSON ({err}); {fix}") from None


def check_artifact(root: str | Path, what: str, only: set[str] | None = None, stages: set[str] | None = None) -> None:
    """Raise DamagedArtifactError naming `what` (e.g. "input `data`") unless artifact `root` is what its name (and,
    in a folder of one of `stages`, its stage folder) says and its files (or just `only`) are those its manifest
    lists. A missing folder is left to the reader."""
    root = Path(root)
    if not root.is_dir():
        return
    found = [p for p in (key_problem(root, stages),) if p] + problems(root, only=only)
    if found:
        raise DamagedArtifactError(
            f"{what} {root} is damaged: {'; '.join(found)}. Delete it (`rm -r {root}`) or run "
            "`augsbert verify --repair`; Snakemake then rebuilds it and what depends on it")


def sweep_partials(out: str | Path) -> list[Path]:
    """Remove `.<name>.partial-*` files and directories of `out`: what killed writes left behind.

    Only the holder of `out`'s writer lock may call this: another live writer's
    partial files look exactly like a dead one's.
    """
    out = Path(out)
    stale = list(out.parent.glob(f".{glob.escape(out.name)}.partial-*"))
    for path in stale:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if stale:
        log.info("removed %d partial file(s) of killed writes of %s", len(stale), out)
    return stale


ARTIFACTS_ROOT = "artifacts"  # the workflow's artifacts folder (augsbert.planning.graph.ARTIFACTS): its state lives in it


def stage_sidecar(out: str | Path, kind: str) -> Path:
    """State of output `out` (`kind`: locks, checkpoints) kept beside, not inside, it, and never outside what the
    user named:

    - `.../artifacts/<stage>/<key>` (the workflow's layout) -> `.../artifacts/.<kind>/<stage>/<key>`: in the
      artifacts folder, so that listing `artifacts/<stage>/` shows artifacts only;
    - any other `--out` (`results/x.json`, `/scratch/mine`) -> `<its folder>/.<kind>/<name>`: beside it, in the
      folder that receives the output anyway. (Taking `<out>/../..` as the root put locks into `/.locks/` for
      an absolute `--out` two levels below the file system root.)

    Snakemake deletes a job's declared outputs before it starts, so checkpoints cannot live inside them.
    """
    out = Path(out)
    if out.name in ("", ".", ".."):  # `--out .` or `--out ..` (refused later, as existing folders): a real name
        out = Path(os.path.abspath(out))
    if out.parent.parent.name == ARTIFACTS_ROOT:
        return out.parent.parent / f".{kind}" / out.parent.name / out.name
    return out.parent / f".{kind}" / out.name


def checkpoint_dir(out: str | Path) -> Path:
    """`artifacts/<stage>/<key>` -> `artifacts/.checkpoints/<stage>/<key>`: beside, not inside, the output.

    Snakemake deletes a job's declared outputs before it starts, so resumable
    state must live elsewhere; `artifact_dir(..., checkpoints=)` removes it once
    the artifact is complete. The artifact's writer lock guards it too.
    """
    return stage_sidecar(out, "checkpoints")

def lock_path(out: str | Path) -> Path:
    """`artifacts/teacher/<key>` -> `artifacts/.locks/teacher/<key>.lock`; `results/x.json` ->
    `results/.locks/x.json.lock` (see `stage_sidecar`)."""
    side = stage_sidecar(out, "locks")
    return side.with_name(side.name + ".lock")


# Locks this process holds: lock path -> [fd, depth]. Re-entrant, so the CLI can hold a job's lock
# from its first step while `artifact_dir` (also used without the CLI) takes it too.
_held: dict[str, list[int]] = {}


def _holder_text(fd: int, lock: Path) -> tuple[str, str | None]:
    """Who holds `lock` and how to stop it, from what its holder wrote into it (for a second writer)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "null")
        pid, host, since = int(info["pid"]), str(info["host"]), str(info["since"])
    except (OSError, ValueError, TypeError, KeyError):
        return f"another process (it has not written its details into {lock} yet)", None
    here = host == socket.gethostname()
    job = info.get("slurm_job")
    text = f"pid {pid} on host {host}" + (f", SLURM job {job}" if job else "") + f", since {since}"
    hint = f"stop it (`kill {pid}`" + ("" if here else f" on {host}") + (f", or `scancel {job}`" if job else "") + ")"
    if here and not alive(pid):  # a process it forked inherited the lock and lives on
        hint = (f"stop the process that holds it (pid {pid} has exited, a process it started lives on: "
                f"`fuser -v {lock}` shows it)")
    return text, hint


holder_text = _holder_text  # also the rehearsal's lock (augsbert.run.rehearse.hold_root)


@contextmanager
def writer_lock(out: str | Path, wait: float = 0) -> Iterator[None]:
    """Hold the exclusive writer lock of output `out`; sweep its leftovers of killed writes.

    A second writer waits up to `wait` seconds, then raises ArtifactLockedError
    naming the process that holds the lock; it touches none of that process'
    files. The lock is `fcntl.flock` on `lock_path(out)`: the kernel releases it
    when its holder dies, even by SIGKILL, so no lock ever goes stale and none
    is ever removed by hand; the lock files stay (empty) between jobs.

    flock rather than POSIX `lockf`: a POSIX lock belongs to the process and is
    dropped when the process closes *any* descriptor of the file, which any
    library opening the file would do silently; a flock belongs to this open
    file. Across cluster nodes both work the same: Linux NFS clients (NFSv3 with
    lockd, NFSv4) implement flock as a whole-file lock on the server, unless the
    share is mounted with `local_lock=flock|all` (then it only excludes jobs on
    the same node); Lustre needs the `flock` mount option (`localflock` is
    node-local); GPFS supports it.
    """
    lock = lock_path(out)
    key = os.path.abspath(lock)
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        if err.errno in FULL_OR_READ_ONLY | FORBIDDEN:
            raise  # `writing` names the output and the cause
        # `--out /proc/x`: no folder can be made there
        raise OutputWriteError(f"cannot write {out}: {err.strerror or err} (its lock file {lock}); name an output "
                               "in a folder you can write") from None
    try:
        deadline = time.monotonic() + wait
        waiting = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder, hint = _holder_text(fd, lock)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ArtifactLockedError(
                        f"{out} is being written by {holder}. Wait for it to finish"
                        + (f", or {hint}," if hint else ",") + " then run again; its partial files are left alone "
                        f"(lock: {lock})") from None
                if not waiting:
                    log.info("%s is being written by %s; waiting up to %.0f s", out, holder, wait)
                    waiting = True
                time.sleep(min(1.0, left))
            except OSError as err:
                if err.errno in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                    raise LockUnsupportedError(
                        err.errno, f"cannot lock {lock} ({err.strerror}): the file system must support file locks "
                        "(NFS: lockd or NFSv4; Lustre: mount with -o flock)") from None
                raise
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "since": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                "slurm_job": os.environ.get("SLURM_JOB_ID")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        _held[key] = [fd, 1]
        try:
            sweep_partials(out)
            yield
        finally:
            del _held[key]
            os.ftruncate(fd, 0)  # details of a finished writer would only mislead a reader of the file
    finally:
        os.close(fd)  # releases the lock


def write_with_siblings(out: str | Path, siblings: Callable[[Path], str]) -> str:
    """Write the file `out` and the files beside it that `siblings(out)` writes, one writer at a time (the writer lock
    of `out` covers them), its folder made: `siblings` returns `out`'s text, written last and atomically, as the file
    a rule requests is the one that must not appear before the rest (a grid's table or curve .md). Returns the text."""
    out = Path(out)
    with writing(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        with writer_lock(out):
            text = siblings(out)
            write_text(out, text)
    return text


def check_writable(folder: str | Path, below: bool = False) -> None:
    """Raise OutputWriteError unless files can be created in `folder` (made if missing): the workflow checks
    artifacts/ and results/ before it plans, so a read-only mount ends with one message, even in a dry run
    (which writes the jobs' spec files), instead of a traceback from the first write. `below`: each folder in
    it too (a read-only `artifacts/teacher/` ended in an OSError of Snakemake's, removing an output to rerun)."""
    import tempfile

    folder = Path(folder)
    if below and folder.is_dir():
        for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()):
            check_writable(sub)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # a name of its own (mkstemp): a pid can repeat across containers or nodes sharing the folder
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise OutputWriteError(f"cannot write {folder}/: {err.strerror or err}; the workflow writes its "
                               f"{folder.name} there. Make it writable (a read-only mount?), or run from a copy of "
                               "the project you can write") from None


def _remove_checkpoints(work: Path) -> None:
    shutil.rmtree(work, ignore_errors=True)
    sidecars = []  # the emptied .checkpoints/<stage>/ and .checkpoints/ folders (stage_sidecar), nothing above
    for parent in work.parents:
        sidecars.append(parent)
        if parent.name == ".checkpoints":
            break
    else:
        sidecars = []  # not a stage_sidecar: only `work` itself is removed
    for parent in sidecars:
        try:
            parent.rmdir()
        except FileNotFoundError:
            continue
        except OSError:
            break  # not empty: another job is training


def replaceable(out: Path, spec: dict, force: bool) -> None:
    """Raise unless `out`, which exists, may be replaced: with `force`, and only if it is a finished artifact of
    the same stage (a folder whose spec.json names that stage). Anything else (a folder of your own files, a
    file, a link, `.` or `..`) is refused whatever the flags, so `--force` can never empty what the workflow
    did not write."""
    stage = spec.get("stage") if isinstance(spec, dict) else None
    try:
        written = read_json(out / "spec.json") if out.is_dir() and not out.is_symlink() else None
    except (OSError, ValueError):
        written = None
    if not isinstance(written, dict) or (stage is not None and written.get("stage") != stage):
        what = f"an artifact of stage {written.get('stage')}" if isinstance(written, dict) and written.get("stage") \
            else "not an artifact (no spec.json of a finished stage job in it)"
        raise ArtifactExistsError(f"{out} exists and is {what}; refusing to write {'stage ' + stage if stage else 'it'} "
                                  "there, even with --force: name a new or artifact folder with --out")
    if not force:
        raise ArtifactExistsError(f"{out} already exists; refusing to overwrite a finished artifact (use --force)")


def finished_as_planned(out: str | Path, spec: dict, holds: tuple[str, ...] = ()) -> dict | None:
    """The metrics of `out` when it is already the finished artifact `spec` plans: a folder named after the spec's
    content key whose spec.json names that stage and key, and whose files are those its manifest lists (`holds`:
    the files its stage's artifacts hold besides). Else None.

    Same key, same content: a job that finds its artifact so (another run, or an orphaned job of a killed one,
    finished it) has nothing to write, and succeeds. It used to fail ("already exists"), and Snakemake then removed
    the failed job's output, that finished artifact (issue 56, I4). An artifact without a manifest (written
    before manifests), a damaged one or one of another key is not taken for finished."""
    return finished_artifact(out, spec.get("stage"), spec.get("key"), holds)


def finished_artifact(out: str | Path, stage, key, holds: tuple[str, ...] = ()) -> dict | None:
    """The metrics of `out` when it is the finished artifact of `stage` and content key `key` (its folder's name): its
    spec.json names both, and its files are those its manifest lists; else None (no manifest, damaged, another key).
    The key is the hash of the spec's content, which the manifest checks: nothing else need be compared."""
    out = Path(out)
    if not is_key(key) or out.name != key or not out.is_dir() or not (out / "manifest.json").is_file():
        return None
    try:
        written = read_json(out / "spec.json")
        metrics = read_json(out / "metrics.json")
    except (OSError, ValueError):
        return None
    if not isinstance(written, dict) or written.get("stage") != stage or written.get("key") != key:
        return None
    if key_problem(out) or problems(out, holds=holds) or not isinstance(metrics, dict):
        return None
    return metrics


@contextmanager
def artifact_dir(out: str | Path, spec: dict, force: bool = False, checkpoints: Path | None = None) -> Iterator[Path]:
    """Yield a temporary directory that becomes `out` (with spec.json) on success.

    `metrics.json` written into it by the caller gets `wall_time_s` added.
    On failure the partial directory is removed and `out` is left as it was.
    The writer lock of `out` is held throughout (the CLI takes it earlier, for
    the whole job); `checkpoints` (the resume state) is removed once `out` is
    complete, still under the lock.
    """
    out = Path(out)
    if out.exists() or out.is_symlink():  # `.`, `..`, a folder of your own: refused before a lock file is made
        replaceable(out, spec, force)
    with writing(out), writer_lock(out):  # a read-only or full location fails with its path, before any work
        if out.exists() or out.is_symlink():
            replaceable(out, spec, force)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = partial_name(out)
        tmp.mkdir()
        start = time.time()
        try:
            write_json(tmp / "spec.json", spec)
            yield tmp
            metrics_path = tmp / "metrics.json"
            metrics = read_json(metrics_path) if metrics_path.exists() else {}
            metrics["wall_time_s"] = round(time.time() - start, 3)
            if RESOLVED_COMMITS:  # pins hub models (id@revision -> commit) for the results file
                metrics["resolved_models"] = dict(RESOLVED_COMMITS)
            metrics[WRITTEN_WITH] = True  # so that a deleted manifest.json is told from an artifact without one
            write_json(metrics_path, metrics)
            write_manifest(tmp)  # last: what the artifact holds, checked by every stage that reads it
            if out.exists():  # only with force
                shutil.rmtree(out)
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if checkpoints is not None:
            _remove_checkpoints(Path(checkpoints))
