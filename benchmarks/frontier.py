"""The quality / speed / size frontier of the compact students on STS-B (issue 58; docs/guide/compact.md "The
frontier"): one command that trains the rows, exports the full student to ONNX and OpenVINO int8, measures every
row's speed in one process under one condition, and writes the table and the plot.

    .venv/bin/python benchmarks/frontier.py --data-dir ../shared/data          # the measurement (hours: see docs)
    .venv/bin/python benchmarks/frontier.py --data-dir ../shared/data --configfile reduced.yaml --sentences 500

Steps (each skips what is done: Snakemake's artifacts, an export already there):
1. `snakemake results/tables/<grid>.md` with config/config.yaml, config/measure/compact_cpu.yaml (the grid
   `cpu_compact`), the extra --configfile files and `data_dir` (written to <out>/<grid>.config.yaml);
2. `augsbert export --backend onnx|openvino --quantize int8` of the full row's student, every seed, into
   <out>/<grid>/ (each export passes the parity gate or stops the run; its test Spearman is the row's quality);
3. speed and size: benchmarks/frontier_speed.py, run by the deploy environment's Python (`make deploy-env`), times
   every row's first-seed model on the same `--sentences` STS-B sentences (the first distinct ones of train, dev,
   test) with `--threads` threads, one row after the other in one process, the load average recorded per row;
4. quality: each row's test Spearman per seed from results/<experiment>.json (a Matryoshka row also at each cut
   size), the exported rows' from their parity record; then augsbert.reporting.frontier writes
   <out>/<grid>.json, .md (the table, Pareto-optimal rows marked) and .png (Spearman against sentences/s, log
   scale, marker area = MB on disk).

`augsbert export --pick-fastest-within 1.0 --frontier <out>/<grid>.json --to DIR` then exports the fastest row
within 1 Spearman point of the full student.
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
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))
BIN = Path(sys.executable).parent
EXPORTED = {"onnx": "ONNX int8", "openvino": "OpenVINO int8"}


def run(command: list[str], what: str) -> None:
    print(f"[frontier] {what}: {' '.join(command)}", flush=True)
    subprocess.run(command, check=True, cwd=ROOT)


def grid_rows(configs: list[str], grid: str) -> tuple[list[tuple[str, str, str]], list[int]]:
    """[(row value, label, experiment)] of the grid's one column, and its seeds."""
    from augsbert.config.grids import cells
    from augsbert.config.load import load_configs
    from augsbert.plan import Plan

    plan = Plan(load_configs(configs, lazy=True))
    spec = (plan.config.get("grids") or {})[grid]
    labels = spec.get("labels") or {}
    rows = []
    for cell in cells(grid, spec):
        value = "_".join(v for _, v in cell.combo)
        rows.append((value, labels.get(value, value), cell.experiment))
    seeds = plan.experiment_spec(rows[0][2])["seeds"]
    return rows, [int(s) for s in seeds]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="the folder holding stsb/ (sts-train.csv ...)")
    parser.add_argument("--grid", default="cpu_compact")
    parser.add_argument("--configfile", nargs="*", default=[], help="further config files (e.g. caps for a trial)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--sentences", type=int, default=10000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backends", nargs="*", default=["onnx", "openvino"], choices=sorted(EXPORTED))
    parser.add_argument("--reference", default="full", help="the row the others are compared with (and exported)")
    parser.add_argument("--out", default="results/frontier")
    parser.add_argument("--skip-train", action="store_true", help="the grid is trained: read its results only")
    args = parser.parse_args(argv)

    from augsbert.face.backends import deploy_python
    from augsbert.reporting import frontier as report

    os.chdir(ROOT)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data_config = out / f"{args.grid}.config.yaml"
    data_config.write_text(f"data_dir: {json.dumps(str(Path(args.data_dir).resolve()))}\n", encoding="utf-8")
    configs = ["config/measure/compact_cpu.yaml", *args.configfile, str(data_config)]
    rows, seeds = grid_rows(configs, args.grid)
    deploy = deploy_python()
    if deploy is None:
        raise SystemExit("the deploy environment is missing: run `make deploy-env` first (it times every row)")

    began = time.time()
    if not args.skip_train:
        run([str(BIN / "snakemake"), "--cores", str(args.cores), "--configfile", "config/config.yaml", *configs,
             "--", f"results/tables/{args.grid}.md"], "train the rows")
    reference = next(r for r in rows if r[0] == args.reference)
    exports = {}
    for backend in args.backends:
        for seed in seeds:
            target = out / args.grid / f"{args.reference}-{backend}-int8-{seed}"
            if not (target / "augsbert_export.json").is_file():
                run([str(BIN / "augsbert"), "export", "--config", *configs, "--experiment", reference[2], "--seed",
                     str(seed), "--model", "student", "--backend", backend, "--quantize", "int8", "--to",
                     str(target)], f"export {backend} int8 seed {seed}")
            exports[(backend, seed)] = target

    # quality per row and seed
    measured, speed_rows = [], []
    for value, label, experiment in rows:
        results = json.loads(Path(f"results/{experiment}.json").read_text(encoding="utf-8"))
        student = results["models"]["student"]
        paths = {int(s): a["model"] for s, a in student["artifacts"].items()}
        dims = sorted({int(k.split("@")[1]) for per in student["per_seed"].values() for k in per
                       if k.startswith("spearman@")}, reverse=True)
        for seed in seeds:
            per = student["per_seed"].get(str(seed), {})
            measured.append({"row": value, "label": label, "seed": seed, "experiment": experiment, "backend": "torch",
                             "quantize": None, "dim": None, "spearman": per.get("spearman")})
            for dim in dims[1:]:  # the cut sizes (the first is the whole vector: the row itself)
                measured.append({"row": f"{value}@{dim}", "label": f"{label} @{dim}", "seed": seed,
                                 "experiment": experiment, "backend": "torch", "quantize": None, "dim": dim,
                                 "spearman": per.get(f"spearman@{dim}"), "speed_of": value})
        speed_rows.append({"name": value, "seed": seeds[0], "path": str(Path(paths[seeds[0]]) / "model"),
                           "backend": "torch", "file": None})
    for backend in args.backends:
        for seed in seeds:
            record = json.loads((exports[(backend, seed)] / "augsbert_export.json").read_text(encoding="utf-8"))
            deployment = record["deployment"]
            measured.append({"row": f"{args.reference}_{backend}_int8", "label": f"{reference[1]}, {EXPORTED[backend]}",
                             "seed": seed, "experiment": reference[2], "backend": backend, "quantize": "int8",
                             "dim": None, "file": deployment["file"],
                             "spearman": deployment["parity"].get("test_spearman")})
        speed_rows.append({"name": f"{args.reference}_{backend}_int8", "seed": seeds[0],
                           "path": str(exports[(backend, seeds[0])]), "backend": backend,
                           "file": json.loads((exports[(backend, seeds[0])] / "augsbert_export.json").read_text())
                           ["deployment"]["file"]})

    # speed and size: every row in one process, one after the other
    import bench_encode

    bench_encode.STSB = Path(args.data_dir).resolve() / "stsb"  # the same files the grid trained on
    request = {"rows": speed_rows, "sentences": bench_encode.sentences(args.sentences), "threads": args.threads,
               "repeat": args.repeat, "batch_size": 64}
    (out / f"{args.grid}.speed_request.json").write_text(json.dumps(request), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS=str(args.threads), TQDM_DISABLE="1")
    print(f"[frontier] speed of {len(speed_rows)} rows in the deploy environment ({deploy})", flush=True)
    subprocess.run([str(deploy), str(ROOT / "benchmarks" / "frontier_speed.py"),
                    str(out / f"{args.grid}.speed_request.json"), str(out / f"{args.grid}.speed.json")],
                   check=True, env=env)
    speed = json.loads((out / f"{args.grid}.speed.json").read_text(encoding="utf-8"))
    by_name = {r["name"]: r for r in speed["rows"]}
    for entry in measured:
        timed = by_name[entry.pop("speed_of", entry["row"])]
        entry.update(sentences_per_s=timed["sentences_per_s"], size_mb=timed["size_mb"])
    loads = [r[k] for r in speed["rows"] for k in ("load_before", "load_after")]
    frontier = {"grid": args.grid, "reference": args.reference, "seeds": seeds, "configs": configs,
                "condition": {"sentences": speed["sentences"], "threads": speed["threads"], "repeat": speed["repeat"],
                              "cpus": speed["cpus"], "torch": speed["torch"], "load_min": min(loads),
                              "load_max": max(loads), "speed_seed": seeds[0],
                              "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
                "rows": report.summarise(measured), "seconds": round(time.time() - began)}
    paths = report.write(frontier, out)
    print(report.markdown(frontier))
    print(f"[frontier] written: {', '.join(str(p) for p in paths.values())} ({frontier['seconds']} s)")


if __name__ == "__main__":
    main()
