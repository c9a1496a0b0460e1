"""What a job's re-check of a local model costs (augsbert.jobs.job_inputs.recheck), first and next jobs; prints
figures (run by hand, not by CI).

    .venv/bin/python benchmarks/bench_model_digests.py              # a 1 GB model folder in a temporary folder
    .venv/bin/python benchmarks/bench_model_digests.py --mb 4000 --folder /data/scratch

A model folder of `--mb` MB of weights (model.safetensors, random bytes) and its small JSON / vocabulary files
is written, planned (its identity hashed as the plan does), then checked as `--jobs` consecutive jobs would,
each with its own fresh check as `augsbert <stage>` makes it, into one artifacts folder: seconds per job, and
the bytes each read from the folder; then one job whose `--out` lies outside an artifacts folder (no digest is
kept there: what every job cost before). Then 1 MB of the weights is rewritten and one more job checks it. Issue
54: every job hashed the whole folder (seconds to minutes per job for a large model); now the first job after a
change does (`augsbert.store.fingerprints.ModelDigests`), the others stat the files. The files are written
RACY_SECONDS before the first job is timed (an entry hashed within that margin of a write is trusted only after
it is hashed once more).
"""

from __future__ import annotations

import argparse
import builtins
import os
import tempfile
import time
from pathlib import Path

from augsbert.errors import ConfigError
from augsbert.jobs.job_inputs import recheck
from augsbert.store import fingerprints
from augsbert.store.fingerprints import DigestCache, model_identity

KEY = "bench-0123456789"


def write_model(folder: Path, mb: int) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "modules.json").write_text("[]")
    (folder / "vocab.txt").write_text("\n".join(f"tok{i}" for i in range(30000)))
    block = os.urandom(1 << 20)
    with open(folder / "model.safetensors", "wb") as handle:
        for _ in range(mb):
            handle.write(block)


def timed_job(spec: dict, out: Path, model: Path) -> tuple[float, int, str]:
    """Seconds of one job's recheck, the bytes it read from `model` and its verdict."""
    read = [0]
    real = builtins.open

    def counting(file, mode="r", *args, **kwargs):
        handle = real(file, mode, *args, **kwargs)
        if "r" in mode and isinstance(file, (str, os.PathLike)) and Path(file).resolve().parent == model.resolve():
            read[0] += os.fstat(handle.fileno()).st_size
        return handle

    builtins.open = counting
    try:
        start = time.perf_counter()
        try:
            recheck(spec, DigestCache(out.parent.parent / ".cache" / "file-digests.json"), out)
            verdict = "the model the key names"
        except ConfigError:
            verdict = "refused: not the model the key names"
        return time.perf_counter() - start, read[0], verdict
    finally:
        builtins.open = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1000, help="MB of weights (default 1000)")
    parser.add_argument("--jobs", type=int, default=3, help="consecutive jobs checking it (default 3)")
    parser.add_argument("--folder", help="where the temporary model and artifacts go (default: the system's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.folder) as scratch:
        model, out = Path(scratch) / "model", Path(scratch) / "artifacts" / "teacher" / KEY
        write_model(model, args.mb)
        spec = {"stage": "teacher", "key": KEY, "params": {
            "model": str(model), "model_identity": {"model": model_identity(str(model), DigestCache(fresh=True))}}}
        time.sleep(fingerprints.RACY_SECONDS + 0.1)
        print(f"model folder: {args.mb} MB of weights ({sum(p.stat().st_size for p in model.iterdir()):,} bytes)")
        for job in range(1, args.jobs + 1):
            seconds, read, verdict = timed_job(spec, out, model)
            print(f"job {job}: {seconds:8.4f} s, {read:>14,} bytes read ({verdict})")
        # as every job did before: an `out` outside an artifacts folder keeps no digest
        seconds, read, verdict = timed_job(spec, Path(scratch) / "elsewhere" / KEY, model)
        print(f"no kept digest (each job before issue 54): {seconds:8.4f} s, {read:>14,} bytes read")
        with open(model / "model.safetensors", "r+b") as handle:  # 1 MB of the weights rewritten in place
            handle.write(os.urandom(1 << 20))
        seconds, read, verdict = timed_job(spec, out, model)
        print(f"weights rewritten: {seconds:8.4f} s, {read:>14,} bytes read ({verdict})")

if __name__ == "__main__":
    main()
