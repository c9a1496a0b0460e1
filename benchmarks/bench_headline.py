"""The headline run as a user types it, timed: wall time, each stage's time, GPU busy %, the metrics beside the
previous run's (run by hand, on the machine to measure; not by CI).

    python benchmarks/bench_headline.py                      # snakemake --cores 8 results/bws_cbe.json
    python benchmarks/bench_headline.py --data ../shared/data   # the same chain on STS-B where BWS is absent
    python benchmarks/bench_headline.py --seeds 42 43 44 --label after   # three seeds, a note with the figures
    python benchmarks/bench_headline.py --warm                # jobs forked from a warm process (augsbert.run.warm)
    python benchmarks/bench_headline.py --experiment demo_zeroshot --cores 2   # a tiny CPU form

What it does:

1. Copies the project (the folder holding workflow/Snakefile, or `--project DIR`; without artifacts/, results/,
   logs/, data/, .snakemake/, .venv/, .git/) into a scratch folder (`--scratch`, default a new temporary folder),
   and `--data DIR` (or the project's data/raw) into its data/raw/. Nothing of the project's own outputs is read or
   touched. The jobs run the copy's package (its src/ first on PYTHONPATH), so another commit's tree
   (`git archive <commit>`) is measured with its own code.
2. The target is `results/<experiment>.json` (default `bws_cbe`, issue 37's headline). If the experiment reads
   BWS and the BWS file is not in the scratch copy's data/raw/bws/, it runs the same experiment on STS-B
   instead: a config file beside the copy defines `<experiment>_stsb`, the experiment's own settings (read from
   config/config.yaml, not written here) with `dataset: stsb`; `--seeds` go into the same file.
   `--stsb-every K` keeps every K-th pair of the copy's STS-B files (K = 2: 2,875 train pairs, about BWS
   cross-topic's size), for a GPU session too short for the whole chain several times.
3. Runs `snakemake --cores N <target>` in the copy (the snakemake beside this Python, else on PATH), its output
   in <scratch>/snakemake.log, and samples `nvidia-smi` once a second in a background thread meanwhile.
4. Prints: the wall time; each stage job's time (`wall_time_s` of its metrics.json, as the results file lists
   them, named by role where the job made a model); GPU busy % (mean utilisation over the samples, per GPU,
   with peak memory; 'no nvidia-smi' where there is none); each model's test Spearman beside the previous
   run's. The figures are appended to `--record` (default logs/bench_headline.json of the project, git-ignored),
   which the next run reads back for the comparison.

It runs wherever the project is installed: in a checkout with its .venv, or where ../shared/tools/gpu-bundle's
install.sh put it (DEST/proj: the project without .git, augsbert and snakemake installed into python3):
`cd DEST/proj && python3 benchmarks/bench_headline.py` (docs/performance.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"artifacts", "results", "logs", "data", ".snakemake", ".venv", ".git", ".gpu", "site", "__pycache__",
        ".pytest_cache"}
BWS_FILE = Path("bws") / "BWS_Argument_Similarity_Corpus.csv"
SMI_QUERY = ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used", "--format=csv,noheader,nounits"]


# ---- pure parts (tests/test_bench_headline.py) --------------------------------------------------------------

def parse_smi(text: str) -> list[tuple[int, float, float]]:
    """`nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv,noheader,nounits` output ->
    (GPU index, utilisation %, memory used MB) per line; lines that are not three numbers ('[N/A]') are skipped."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3:
            continue
        try:
            rows.append((int(parts[0]), float(parts[1]), float(parts[2])))
        except ValueError:
            continue
    return rows


def gpu_summary(samples: list[list[tuple[int, float, float]]]) -> dict[str, dict]:
    """Per GPU: mean utilisation % over the samples (the busy share of the run), its maximum, peak memory MB."""
    per_gpu: dict[int, list[tuple[float, float]]] = {}
    for sample in samples:
        for index, util, mem in sample:
            per_gpu.setdefault(index, []).append((util, mem))
    return {str(i): {"busy_pct": round(statistics.fmean(u for u, _ in v), 1), "max_util_pct": max(u for u, _ in v),
                     "peak_mem_mb": max(m for _, m in v), "samples": len(v)}
            for i, v in sorted(per_gpu.items())}


def stage_rows(results: dict) -> list[tuple[str, str, float | None]]:
    """(label, stage, seconds) of every stage job in a results document, slowest first. The label is the
    model's role (e.g. `student`, `lower_bound`) or `<role> suite` where the job made that model or its suite,
    else the stage's name."""
    roles = {}
    for role, model in (results.get("models") or {}).items():
        for paths in (model.get("artifacts") or {}).values():
            if paths.get("model"):
                roles[paths["model"]] = role
            if paths.get("suite"):
                roles[paths["suite"]] = f"{role} suite"
    rows = [(roles.get(s["path"], s["stage"]), s["stage"], s.get("wall_time_s"))
            for s in (results.get("stages") or {}).values()]
    return sorted(rows, key=lambda r: -(r[2] or 0.0))


def headline_metrics(results: dict) -> dict[str, float | None]:
    """Mean test Spearman of each model role (over the seeds run)."""
    out = {}
    for role, model in (results.get("models") or {}).items():
        spearman = (model.get("summary") or {}).get("spearman") or {}
        out[role] = spearman.get("mean") if isinstance(spearman, dict) else spearman
    return out


def comparison_rows(now: dict[str, float | None], before: dict[str, float | None] | None) -> list[tuple]:
    """(role, now, before, difference) for every role of either run (None where a run lacks it)."""
    before = before or {}
    rows = []
    for role in dict.fromkeys([*now, *before]):
        a, b = now.get(role), before.get(role)
        rows.append((role, a, b, None if a is None or b is None else round(a - b, 2)))
    return rows


def table(header: list[str], rows: list[list]) -> str:
    def cell(v):
        return "-" if v is None else f"{v:.2f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def stsb_variant(config: dict, experiment: str) -> dict:
    """A config file's content defining `<experiment>_stsb`: the experiment's own settings with `dataset: stsb`
    (a source dataset, for transfer experiments, stays as it is)."""
    settings = dict(config["experiments"][experiment])
    settings["dataset"] = "stsb"
    settings["description"] = f"{experiment} on STS-B (bench_headline.py: the BWS file is absent)"
    return {"experiments": {f"{experiment}_stsb": settings}}


# ---- the run ----------------------------------------------------------------------------------------------

class GpuSampler(threading.Thread):
    """`nvidia-smi` once every `interval` seconds until stopped; `available` False where it cannot run."""

    def __init__(self, interval: float = 1.0):
        super().__init__(daemon=True)
        self.interval, self.samples, self.stopped = interval, [], threading.Event()
        self.available = shutil.which("nvidia-smi") is not None

    def run(self):
        while self.available and not self.stopped.is_set():
            try:
                out = subprocess.run(SMI_QUERY, capture_output=True, text=True, timeout=10).stdout
                self.samples.append(parse_smi(out))
            except (OSError, subprocess.SubprocessError):
                pass
            self.stopped.wait(self.interval)


def every_kth_line(text: str, k: int) -> str:
    """Lines 1, 1 + k, 1 + 2k, ... of `text` (the STS-B files have no header: a smaller chain of the same shape)."""
    return "".join(text.splitlines(keepends=True)[::k])


def copy_project(project: Path, scratch: Path, data: Path | None, stsb_every: int = 1) -> None:
    def ignore(directory, names):
        top = Path(directory) == project
        return [n for n in names if n in SKIP] if top else [n for n in names if n == "__pycache__"]

    shutil.copytree(project, scratch, ignore=ignore, symlinks=True, dirs_exist_ok=True)
    source = data if data is not None else project / "data" / "raw"
    if source.is_dir():
        shutil.rmtree(scratch / "data" / "raw", ignore_errors=True)
        shutil.copytree(source, scratch / "data" / "raw")
    if stsb_every > 1:
        for path in sorted((scratch / "data" / "raw" / "stsb").glob("sts-*.csv")):
            path.write_text(every_kth_line(path.read_text(encoding="utf-8"), stsb_every), encoding="utf-8")


def scripts_dirs() -> list[str]:
    """Where this Python's console scripts (snakemake, augsbert) are: its scripts folder (pip's, as gpu-bundle's
    install.sh installs them) and the folder of the interpreter (a virtual environment's bin/)."""
    import sysconfig

    return list(dict.fromkeys([sysconfig.get_paths()["scripts"], str(Path(sys.executable).parent)]))


def snakemake_command() -> list[str]:
    found = next((Path(d) / "snakemake" for d in scripts_dirs() if (Path(d) / "snakemake").is_file()), None)
    return [str(found)] if found else [shutil.which("snakemake") or "snakemake"]


def main(argv=None) -> int:
    import yaml

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--project", type=Path, default=ROOT,
                   help="the project tree to run (default: this one; e.g. an older commit's `git archive`)")
    p.add_argument("--experiment", default="bws_cbe")
    p.add_argument("--cores", type=int, default=8)
    p.add_argument("--data", type=Path, help="raw data folder copied to the scratch copy's data/raw "
                                             "(default: the project's data/raw)")
    p.add_argument("--scratch", type=Path, help="folder for the copy (default: a new temporary folder)")
    p.add_argument("--record", type=Path, default=ROOT / "logs" / "bench_headline.json")
    p.add_argument("--stsb-every", type=int, default=1, metavar="K",
                   help="keep every K-th pair of the copy's STS-B files (a shorter chain of the same shape)")
    p.add_argument("--seeds", type=int, nargs="+", help="seeds to run (default: the config's; issue 37: 42 43 44)")
    p.add_argument("--warm", action="store_true",
                   help="jobs start as forks of a warm process (python -m augsbert.run.warm_server; docs/performance.md)")
    p.add_argument("--label", default="", help="a note stored with this run's figures (e.g. the commit)")
    p.add_argument("--keep", action="store_true", help="keep the scratch copy (default: deleted after a success)")
    p.add_argument("snakemake_args", nargs="*", help="more snakemake arguments (after --)")
    args = p.parse_args(argv)

    project = args.project.resolve()
    if not (project / "workflow" / "Snakefile").is_file():
        sys.exit(f"bench_headline: {project} holds no workflow/Snakefile")
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="bench-headline-"))
    copy_project(project, scratch, args.data, args.stsb_every)
    config = yaml.safe_load((scratch / "config" / "config.yaml").read_text())
    if args.experiment not in config.get("experiments", {}):
        sys.exit(f"bench_headline: no experiment {args.experiment!r} in config/config.yaml")
    experiment, overrides = args.experiment, {}
    dataset = config["experiments"][experiment].get("dataset", "")
    if dataset.startswith("bws") and not (scratch / "data" / "raw" / BWS_FILE).is_file():
        experiment = f"{args.experiment}_stsb"
        overrides = stsb_variant(config, args.experiment)
        print(f"bench_headline: no {BWS_FILE} in the data: running {experiment} ({args.experiment} on STS-B)")
    if args.seeds:
        overrides["seeds"] = args.seeds
    extra = []
    if overrides:  # read after the shipped config, as `--configfile config/config.yaml my.yaml` (guide/experiments.md)
        (scratch / "bench_headline.yaml").write_text(yaml.safe_dump(overrides, sort_keys=False))
        extra = ["--configfile", "config/config.yaml", "bench_headline.yaml"]
    target = f"results/{experiment}.json"
    command = [*snakemake_command(), "--cores", str(args.cores), target, *extra, *args.snakemake_args]
    print("bench_headline:", " ".join(command), f"(in {scratch})", flush=True)

    # the copy's own package runs the jobs, whichever augsbert is installed (it may be another commit's),
    # and the jobs' `augsbert` is this Python's (its scripts first on PATH)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(scratch / "src"), os.environ.get("PYTHONPATH")])),
           "PATH": os.pathsep.join([*scripts_dirs(), os.environ.get("PATH", "")])}
    sampler = GpuSampler()
    sampler.start()
    start = time.perf_counter()
    server = None
    if args.warm:  # started with the jobs' environment; its import time counts in the wall time, as in a real run
        socket_path = scratch / ".warm.sock"
        server = subprocess.Popen([sys.executable, "-m", "augsbert.run.warm_server", str(socket_path)], cwd=scratch,
                                  env=env, stderr=open(scratch / "warm_server.log", "w"))
        for _ in range(600):
            if socket_path.exists() or server.poll() is not None:
                break
            time.sleep(0.2)
        env["AUGSBERT_WARM_SOCKET"] = str(socket_path)
    try:
        with open(scratch / "snakemake.log", "w") as log:
            rc = subprocess.run(command, cwd=scratch, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    finally:
        if server is not None:
            server.terminate()
            server.wait()
    wall = time.perf_counter() - start
    sampler.stopped.set()
    sampler.join()
    if rc != 0:
        tail = (scratch / "snakemake.log").read_text().splitlines()[-30:]
        print("\n".join(tail))
        print(f"bench_headline: snakemake exited with {rc} after {wall:.1f} s; log and copy kept in {scratch}")
        return rc

    results = json.loads((scratch / target).read_text())
    gpus = gpu_summary(sampler.samples) if sampler.available else None
    stages = stage_rows(results)
    metrics = headline_metrics(results)
    records = json.loads(args.record.read_text()) if args.record.is_file() else []
    before = next((r for r in reversed(records)  # the last run of the same chain: experiment, data size, seeds
                   if r["experiment"] == experiment and r.get("stsb_every", 1) == args.stsb_every
                   and r.get("seeds") == results.get("seeds")), None)

    print(f"\n{target}: wall {wall:.1f} s, --cores {args.cores}{', warm start' if args.warm else ''}, "
          f"device {', '.join(results.get('device', []))}"
          + (f" (previous run: {before['wall_s']} s{', warm' if before.get('warm') else ''})" if before else ""))
    print(f"sum of the stage jobs' times {results['wall_time_s']['stages_total']:.1f} s\n")
    print(table(["job", "stage", "s"], [list(r) for r in stages]))
    if gpus is None:
        print("\nGPU busy: no nvidia-smi on this machine (no GPU sampled)")
    else:
        print("\n" + table(["GPU", "busy % (mean of 1 s samples)", "max %", "peak MB", "samples"],
                           [[i, g["busy_pct"], g["max_util_pct"], g["peak_mem_mb"], g["samples"]]
                            for i, g in gpus.items()]))
    previous = f"{before['created']} {before['label']}" if before else "none recorded"
    print(f"\ntest Spearman, this run against the previous one ({previous}):")
    print(table(["model", "now", "before", "difference"],
                [list(r) for r in comparison_rows(metrics, before and before["metrics"])]))
    record = {"experiment": experiment, "label": args.label, "cores": args.cores, "wall_s": round(wall, 1),
              "seeds": results.get("seeds"), "stsb_every": args.stsb_every, "warm": args.warm,
              "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "stages": [list(r) for r in stages], "gpus": gpus, "metrics": metrics,
              "device": results.get("device"), "versions": results.get("versions")}
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(json.dumps([*records, record], indent=1))
    print(f"\nrecorded in {args.record}")
    if not args.keep and not args.scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
