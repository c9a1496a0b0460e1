"""The time estimate printed before a run against what each job measured: per role, and in total.

    python benchmarks/bench_estimate.py CONFIG NAME [NAME ...] [--workdir DIR] [--cores 2] [--warm]

Copies the workflow (workflow/, config/, profiles/) into a fresh DIR (default: a new temporary folder), runs
`augsbert run CONFIG NAME ... --cores N` there and, while it runs, reads every job process's CPU time (user + sys
from /proc/<pid>/stat, sampled every 0.5 s: at most that much of a job's last moments is missed) and its wall
time (first to last sample). Jobs start cold (AUGSBERT_WARM=0) unless --warm: a warm job is a fork of the warm
server (found by its stdout, the rule's log) and its CPU time is added to its command's; the server's own start
(imports, once per run) is then no job's. Printed: per role (lower_bound, teacher, student, data, ...: the estimate's row names) the estimate's
seconds, the CPU seconds and wall seconds measured, and estimate / CPU; then the totals and the run's wall time.

On a shared machine compare the CPU seconds: wall time there counts the other users' load. The estimate is of
wall time on idle cores, where a job's threads keep up to the 2 cores busy, so a job's CPU seconds are up to
2x its wall time on idle cores; the ratio printed is estimate / (CPU / cores used), cores used = CPU / wall
capped to the --cores given, i.e. the wall time the job would have had alone on the machine.

The estimate's own line on the load (the 1-min load average and cores when it was made, and its factor) is
read too: per role the estimate x that factor is printed against the wall time, with the load average seen while
the jobs ran (min / mean / max of the samples), and the job's progress lines are kept in DIR/run.log.

Examples: `make demo`'s grid, `python benchmarks/bench_estimate.py config/config.yaml demo_quick`; the own-data
page's 4K-pair STS-B run (docs/guide/own-data.md), its files and config written first:

    python benchmarks/bench_estimate.py --write-sts4k /tmp/sts4k    # the first 4,000 / 500 train / dev pairs, all test
    python benchmarks/bench_estimate.py /tmp/sts4k/sts4k.yaml sts4k_augsbert --warm
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
JOB = re.compile(r"augsbert (\S+) --spec @(\S+) --out (\S+)")
WARM_SERVER = "augsbert.run.warm_server"
ESTIMATE_ROW = re.compile(r"^  (\S+)\s+((?:[\d,]+ h )?(?:\d+ min )?\d+ s|[\d,]+ h \d+ min)  ")
LOAD_LINE = re.compile(r"the load now is ([\d.]+) .* expect about ([\d.]+)x")


def seconds_of(clock: str) -> float:
    """'1 min 29 s' / '2 s' / '1 h 05 min' -> seconds."""
    total = 0.0
    for value, unit in re.findall(r"([\d,]+) (h|min|s)", clock):
        total += int(value.replace(",", "")) * {"h": 3600, "min": 60, "s": 1}[unit]
    return total


def warm_job(pid: str, cmdline: str, workdir: Path) -> str | None:
    """The artifact path (artifacts/<stage>/<key>) of a warm job: a fork of the warm server
    (augsbert.run.warm_server) in a session of its own whose stdout is the rule's log, logs/<stage>/<key>.log;
    None for any other process."""
    if WARM_SERVER not in cmdline or os.getsid(int(pid)) != int(pid):
        return None
    log = Path(os.readlink(f"/proc/{pid}/fd/1"))
    if log.suffix != ".log" or log.parent.parent != workdir / "logs":
        return None
    return f"artifacts/{log.parent.name}/{log.stem}"


def sample(jobs: dict, stop: threading.Event, workdir: Path, loads: list | None = None) -> None:
    """Every 0.5 s: each `augsbert <stage> --spec` process of this run (its working directory `workdir`: other
    users' jobs on a shared machine are left out) and its CPU seconds so far and the time seen; a warm job's
    CPU is its command's plus that of the server's fork that runs it (warm_job)."""
    forks: dict[str, float] = {}
    while not stop.is_set():
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found = JOB.search(cmdline)
                if Path(os.readlink(f"/proc/{pid}/cwd")) != workdir:
                    continue
                fork = None if found else warm_job(pid, cmdline, workdir)
                if (not found and not fork) or (found and "bash" in cmdline.split(" ", 1)[0]):
                    continue
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14 and 15 of stat)
            if fork:
                forks[fork] = max(forks.get(fork, 0.0), cpu)
                continue
            job = jobs.setdefault(found.group(3), {"stage": found.group(1), "spec": found.group(2),
                                                   "first": time.monotonic(), "cpu": 0.0, "command_cpu": 0.0})
            job["command_cpu"], job["last"] = max(job["command_cpu"], cpu), time.monotonic()
        for out, job in jobs.items():
            job["cpu"] = job["command_cpu"] + forks.get(out, 0.0)
        if loads is not None and jobs:  # the load average while the run's jobs run
            loads.append(os.getloadavg()[0])
        stop.wait(0.5)


def role(workdir: Path, job: dict) -> str:
    """The estimate's row name of a job: its stage, lower_bound for a `student` job without teacher labels."""
    if job["stage"] == "student":
        spec = json.loads((workdir / job["spec"]).read_text())
        if "labels" not in (spec.get("inputs") or {}):
            return "lower_bound"
    return job["stage"]


STSB = Path(os.environ.get("AUGSBERT_STSB", "/work/shared/data/stsb"))  # the STS Benchmark's three files
STS4K = """device: cpu
datasets:
  sts4k:
    loader: pairs_file
    train: {folder}/train.csv
    dev: {folder}/dev.csv
    test: {folder}/test.csv
    score_range: [0, 5]
experiments:
  sts4k_augsbert:
    dataset: sts4k
    description: the own-data page's 4K-pair STS-B run with the CPU caps at 60 steps
    models: [lower_bound, teacher, student]
    teacher: {{arch: cbe, epochs: 1, max_length: 128, symmetric: false, max_steps: 60}}
    student: {{epochs: 1, max_length: 64, max_steps: 60}}
    candidates: {{strategies: [bm25], pool: train, top_k: 1}}
    suite: {{max_length: 64, suites: []}}
"""


def write_sts4k(folder: Path) -> Path:
    """The own-data page's 4K / 0.5K / 1.4K-pair STS-B run: the first 4,000 train and 500 dev pairs and the 1,379
    test pairs of the STS Benchmark (AUGSBERT_STSB, tab-separated as released) as pairs_file csv files, and its
    config (sts4k.yaml, experiment sts4k_augsbert) in `folder`."""
    import csv

    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    for source, name, count in (("sts-train.csv", "train.csv", 4000), ("sts-dev.csv", "dev.csv", 500),
                                ("sts-test.csv", "test.csv", None)):
        with open(STSB / source, encoding="utf-8", newline="") as f:
            rows = [(r[5], r[6], r[4]) for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if len(r) >= 7]
        with open(folder / name, "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["sentence1", "sentence2", "score"])
            writer.writerows(rows[:count])
    (folder / "sts4k.yaml").write_text(STS4K.format(folder=folder))
    return folder / "sts4k.yaml"


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--write-sts4k"] and len(argv) == 2:
        print(write_sts4k(Path(argv[1])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("names", nargs="+")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--warm", action="store_true")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-estimate-"))
    if workdir.exists() and any(workdir.iterdir()):
        parser.error(f"{workdir} is not empty: the run must start from nothing built")
    for item in ("workflow", "config", "profiles"):
        shutil.copytree(REPO / item, workdir / item, symlinks=True)
    config = Path(args.config).resolve()
    env = dict(os.environ, AUGSBERT_PRINT_TABLES="0", PYTHONPATH=str(REPO / "src"))
    env["AUGSBERT_WARM"] = "1" if args.warm else "0"
    jobs: dict = {}
    stop = threading.Event()
    loads: list[float] = []
    sampler = threading.Thread(target=sample, args=(jobs, stop, workdir.resolve(), loads), daemon=True)
    sampler.start()
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "augsbert", "run", str(config), *args.names, "--cores",
                           str(args.cores)], cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    stop.set()
    sampler.join()
    (workdir / "run.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    estimated: dict[str, list[float]] = defaultdict(list)
    block = False
    factor, load_then = 1.0, None
    for line in proc.stderr.splitlines():
        if line.startswith("augsbert: estimate for"):
            block = True
        elif block:
            row = ESTIMATE_ROW.match(line)
            if not row:
                found = LOAD_LINE.search(line)
                if found:
                    load_then, factor = float(found.group(1)), float(found.group(2))
                break
            estimated[row.group(1)].append(seconds_of(row.group(2)))
    est_total = sum(estimated.pop("total", [0.0]))
    measured: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for job in jobs.values():
        measured[role(workdir, job)].append((job["cpu"], job["last"] - job["first"]))
    print(f"run in {workdir}, {'warm' if args.warm else 'cold'} job starts, load at the end "
          f"{os.getloadavg()[0]:.2f}")
    if loads:
        print(f"load average while the jobs ran: min {min(loads):.1f}, mean {sum(loads) / len(loads):.1f}, "
              f"max {max(loads):.1f} ({os.cpu_count()} cores)")
    if load_then is not None:
        print(f"the estimate read load {load_then:.1f}: factor {factor:.1f}x")
    print(f"{'role':<14}{'jobs':>5}{'estimate s':>12}{'x load s':>10}{'CPU s':>9}{'wall s':>9}{'wall/x':>8}"
          f"{'alone s':>9}{'est/alone':>10}")
    sums = [0.0, 0.0, 0.0, 0.0]
    for name in sorted(set(estimated) | set(measured)):
        est = sum(estimated.get(name, []))
        cpu = sum(c for c, _ in measured.get(name, []))
        job_wall = sum(w for _, w in measured.get(name, []))
        # alone: the CPU seconds over the cores the job kept busy (CPU / wall, at most --cores, at least 1)
        alone = sum(c / min(args.cores, max(1.0, c / w)) if w else c for c, w in measured.get(name, []))
        sums = [sums[0] + est, sums[1] + cpu, sums[2] + job_wall, sums[3] + alone]
        ratio = f"{est / alone:.2f}" if alone else "-"
        under = f"{job_wall / (est * factor):.2f}" if est else "-"
        print(f"{name:<14}{len(measured.get(name, [])):>5}{est:>12.1f}{est * factor:>10.1f}{cpu:>9.1f}{job_wall:>9.1f}"
              f"{under:>8}{alone:>9.1f}{ratio:>10}")
    print(f"{'jobs':<14}{len(jobs):>5}{sums[0]:>12.1f}{sums[0] * factor:>10.1f}{sums[1]:>9.1f}{sums[2]:>9.1f}"
          f"{sums[2] / (sums[0] * factor) if sums[0] else 0:>8.2f}{sums[3]:>9.1f}"
          f"{sums[0] / sums[3] if sums[3] else 0:>10.2f}")
    print(f"estimate total {est_total:.0f} s (x {factor:.1f} for the load: {est_total * factor:.0f} s); run wall "
          f"{wall:.1f} s (Snakemake's own start and DAG included)")
    progress = [line for line in proc.stderr.splitlines() if re.match(r"augsbert: \S+ \S+: step \d+/", line)]
    for line in progress:  # the progress lines: the time left, measured against the estimate
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
