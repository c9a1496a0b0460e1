"""The frontier of the compact students on STS-B (issues 58, 65; docs/guide/compact.md "The frontier"): one command
that runs the grid `cpu_compact` (config/measure/compact_cpu.yaml) end to end and prints its wall time.

    .venv/bin/python benchmarks/frontier.py --data-dir ../shared/data           # the measurement (hours: see docs)
    .venv/bin/python benchmarks/frontier.py --data-dir ../shared/data -n        # its jobs and estimate only
    .venv/bin/python benchmarks/frontier.py --data-dir ../shared/data --configfile reduced.yaml   # a trial

It is the workflow's own target `results/tables/<grid>.frontier.md` (rule grid_frontier; with the grid's table,
results/tables/<grid>.md), built with config/config
.yaml, config/measure/compact_cpu.yaml, the extra --configfile files and `data_dir` (written to
results/tables/<grid>.frontier.data.yaml): Snakemake trains the rows (3 seeds), exports the full student of every
seed with `--backend onnx|openvino --quantize int8` (rule export_model_backend_seed; each passes the parity gate or
stops the run), then `augsbert frontier` times every row in one process under one condition and writes the table,
the JSON and the plot. Every step is an artifact or an output: stopped (Ctrl-C, a kill, the machine), the same
command goes on where it was. It prints the wall time of this call and the load average before and after; a
resumed run's earlier calls are not in it (each job's own time is in results/<experiment>.json, `wall_time_s`).

`augsbert export --pick-fastest-within 1.0 --frontier cpu_compact --to DIR` then exports the fastest row within 1
Spearman point of the full student.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def clock(seconds: float) -> str:
    hours, rest = divmod(int(round(seconds)), 3600)
    return f"{hours} h {rest // 60:02d} min {rest % 60:02d} s" if hours else f"{rest // 60} min {rest % 60:02d} s"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="the folder holding stsb/ (sts-train.csv ...)")
    parser.add_argument("--grid", default="cpu_compact")
    parser.add_argument("--configfile", nargs="*", default=[], help="further config files (e.g. caps for a trial)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("-n", "--dry-run", action="store_true", help="list the jobs and the estimate, run nothing")
    args = parser.parse_args(argv)

    os.chdir(ROOT)
    target = Path(f"results/tables/{args.grid}.frontier.md")
    target.parent.mkdir(parents=True, exist_ok=True)
    data_config = target.with_name(f"{args.grid}.frontier.data.yaml")
    text = f"data_dir: {json.dumps(str(Path(args.data_dir).resolve()))}\n"
    if not data_config.is_file() or data_config.read_text(encoding="utf-8") != text:
        data_config.write_text(text, encoding="utf-8")
    configs = ["config/config.yaml", "config/measure/compact_cpu.yaml", *args.configfile, str(data_config)]
    command = [str(BIN / "snakemake"), "--cores", str(args.cores), *(["--dry-run"] if args.dry_run else []),
               "--configfile", *configs, "--", str(target), f"results/tables/{args.grid}.md"]  # and the grid table
    load = os.getloadavg()
    began = time.time()
    print(f"[frontier] {' '.join(command)}\n[frontier] load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
          f"(1 / 5 / 15 min) on {os.cpu_count()} CPUs at the start", flush=True)
    code = subprocess.run(command).returncode
    load = os.getloadavg()
    print(f"[frontier] {'dry run' if args.dry_run else 'run'} ended with exit status {code} after "
          f"{clock(time.time() - began)} (this call); load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} "
          "at the end", flush=True)
    if code == 0 and not args.dry_run:
        frontier = json.loads(target.with_suffix(".json").read_text(encoding="utf-8"))
        condition = frontier["condition"]
        print(target.read_text(encoding="utf-8"))
        print(f"[frontier] the speed measurement took {frontier['seconds']} s, load average "
              f"{condition['load_min']}–{condition['load_max']}; pick: .venv/bin/augsbert export "
              f"--pick-fastest-within 1.0 --frontier {args.grid} --to DIR", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
