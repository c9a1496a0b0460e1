"""Artifact directories: written under a temporary name and renamed when complete.

A directory named like a finished artifact is always finished: a killed job
leaves only `.<name>.partial-<pid>` behind, which no later stage can mistake
for a result. A finished artifact is never overwritten.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


class ArtifactExistsError(FileExistsError):
    pass


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

    Only OSErrors are seen here: a library that wraps a failed write in its own exception
    type (torch, safetensors) still ends with a traceback.
    """
    try:
        yield
    except OSError as err:
        if not (err.errno in FULL_OR_READ_ONLY or (err.errno in FORBIDDEN and _concerns(err.filename, path))):
            raise
        detail = f" ({err.filename})" if err.filename and os.path.abspath(err.filename) != os.path.abspath(path) else ""
        raise OutputWriteError(f"cannot write {path}: {err.strerror or os.strerror(err.errno)}{detail}") from err


def _finite(obj: Any) -> Any:
    """NaN/inf -> None, so the file is strict JSON (an undefined metric reads as null)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_json(path: str | Path, obj: Any) -> None:
    """Write strict JSON atomically (temp file + rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    tmp.write_text(json.dumps(_finite(obj), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    os.replace(tmp, path)


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


@contextmanager
def artifact_dir(out: str | Path, spec: dict, force: bool = False) -> Iterator[Path]:
    """Yield a temporary directory that becomes `out` (with spec.json) on success.

    `metrics.json` written into it by the caller gets `wall_time_s` added.
    On failure the partial directory is removed and `out` is left as it was.
    """
    out = Path(out)
    if out.exists():
        if not force:
            raise ArtifactExistsError(f"{out} already exists; refusing to overwrite a finished artifact (use --force)")
    with writing(out):  # a read-only directory fails here, before the stage does any work
        out.parent.mkdir(parents=True, exist_ok=True)
        for stale in out.parent.glob(f".{out.name}.partial-*"):  # left by a killed job (one job per key runs at once)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
        tmp.mkdir()
        start = time.time()
        try:
            write_json(tmp / "spec.json", spec)
            yield tmp
            metrics_path = tmp / "metrics.json"
            metrics = read_json(metrics_path) if metrics_path.exists() else {}
            metrics["wall_time_s"] = round(time.time() - start, 3)
            write_json(metrics_path, metrics)
            if out.exists():  # only with force
                shutil.rmtree(out)
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
