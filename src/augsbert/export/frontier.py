"""`augsbert frontier`: a grid's frontier measured and written (rule `grid_frontier`, results/tables/<grid>.frontier
.{json,md,png}; augsbert.reporting.frontier lays it out, summarises and writes it).

What it reads: each row's test Spearman per seed from its results file (a Matryoshka student's also at each cut
size), each exported int8 row's from its export's record (`augsbert_export.json`: the parity gate's figures, on
sentences its calibration did not see), made by rule `export_model_backend_seed` for every seed. What it measures:
every row's speed and size on the first seed's model, all rows of the grid in one process one after the other
(deploy_speed.py, run by the deploy environment's Python where the frontier has exported rows, else by this one),
on the same sentences per column (the first distinct ones of its data's test, dev and train splits) with the same
threads, the load average recorded before and after each row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..data.pool import read_split
from ..reporting.frontier import STUDENT_ROLE, markdown, summarise, write
from ..stages.runs import INPUT_DATA
from ..store.artifacts import DamagedArtifactError, read_json, writer_lock, writing
from ..store.results_files import read_results
from .backends import BACKEND_TITLES, BackendError, backend_available, deploy_python
from .export import MARKER

SPEED_SCRIPT = Path(__file__).with_name("deploy_speed.py")


def _results(path: Path, grid: str) -> dict:
    if not path.is_file():
        raise DamagedArtifactError(f"{path}: no results file yet (the frontier of grid {grid} needs it); run the "
                                   f"workflow for it (`snakemake --cores 2 results/tables/{grid}.frontier.md`)")
    return read_results(path)


def _export_record(path: Path, grid: str, key: str) -> dict:
    """The deployment record of the export in `path`, made from the student artifact `key`."""
    if not (path / MARKER).is_file():
        raise DamagedArtifactError(f"{path}: no export yet (the frontier of grid {grid} needs it); run the workflow "
                                   f"for it (`snakemake --cores 2 results/tables/{grid}.frontier.md`)")
    record = read_json(path / MARKER, "export record", fix=f"delete the folder (`rm -r {path}`) and export again")
    if record.get("key") != key or not isinstance(record.get("deployment"), dict):
        raise DamagedArtifactError(f"{path}: exported from artifact {record.get('key')}, but the grid's student of "
                                   f"that seed is {key}{'' if record.get('deployment') else ' (and no backend)'}: "
                                   f"delete the folder (`rm -r {path}`) and run the workflow again")
    return record["deployment"]


def sentences(artifact: Path, count: int) -> list[str]:
    """The first `count` distinct sentences of the data the student of `artifact` was tested on: test, dev,
    train, each pair's sentence1 then sentence2."""
    inputs = read_json(artifact / "spec.json").get("inputs") or {}
    data = inputs.get("eval", inputs.get(INPUT_DATA))
    texts = [t for split in ("test", "dev", "train") for frame in [read_split(data, split, required=False)]
             if frame is not None for pair in zip(frame["sentence1"].tolist(), frame["sentence2"].tolist())
             for t in pair]
    return list(dict.fromkeys(t for t in texts if isinstance(t, str) and t.strip()))[:count]


def collect(spec: dict, results_dir: str | Path) -> tuple[list[dict], list[dict], dict[str, list[str]]]:
    """Per column its measured entries (row and seed, quality, parity); the rows to time; the sentences per
    column."""
    grid, settings = spec["grid"], spec["settings"]
    columns, timed, texts = [], [], {}
    for column in spec["columns"]:
        measured, artifacts = [], {}
        for row in column["rows"]:
            doc = _results(Path(results_dir) / f"{row['experiment']}.json", grid)
            student = doc["models"][STUDENT_ROLE]
            artifacts[row["row"]] = {int(s): Path(a["model"]) for s, a in student["artifacts"].items()}
            cuts = sorted(row["dims"] or [], reverse=True)[1:]  # the first size is the whole vector: the row itself
            for seed in row["seeds"]:
                per = student["per_seed"].get(str(seed), {})
                base = {"seed": seed, "experiment": row["experiment"], "backend": "torch", "quantize": None,
                        "kind": row["kind"]}
                measured.append({**base, "row": row["row"], "label": row["label"], "dim": None,
                                 "spearman": per.get("spearman")})
                measured += [{**base, "row": f"{row['row']}@{dim}", "label": f"{row['label']} @{dim}", "dim": dim,
                              "spearman": per.get(f"spearman@{dim}"), "speed_of": row["row"]} for dim in cuts]
            seed = row["seeds"][0]
            model = artifacts[row["row"]][seed] / "model"
            timed.append({"name": f"{column['column']}/{row['row']}", "path": str(model), "backend": "torch",
                          "file": None, "texts": column["column"]})
        labels = {row["row"]: row["label"] for row in column["rows"]}
        for export in column["exports"]:
            for seed, path in export["paths"].items():
                deployment = _export_record(Path(path), grid, artifacts[export["of"]][int(seed)].name)
                parity = deployment.get("parity") or {}
                measured.append({"row": export["row"], "label": f"{labels[export['of']]}, "
                                                              f"{BACKEND_TITLES[export['backend']]} int8",
                                 "seed": int(seed), "experiment": export["experiment"], "backend": export["backend"],
                                 "quantize": "int8", "dim": None, "file": deployment["file"], "kind": None,
                                 "spearman": parity.get("test_spearman"), "parity": parity})
            first = next(iter(export["paths"]))
            timed.append({"name": f"{column['column']}/{export['row']}", "path": export["paths"][first],
                          "backend": export["backend"], "file": measured[-1]["file"], "texts": column["column"]})
        reference = next(r for r in column["rows"] if r["row"] == column["reference"])
        texts[column["column"]] = sentences(artifacts[reference["row"]][reference["seeds"][0]], settings["sentences"])
        columns.append({"column": column["column"], "reference": column["reference"], "measured": measured})
    return columns, timed, texts


def time_rows(rows: list[dict], texts: dict[str, list[str]], settings: dict) -> dict:
    """deploy_speed.py over `rows` in one process: the deploy environment's Python where a row is an ONNX or
    OpenVINO export, else this one."""
    exported = sorted({r["backend"] for r in rows if r["backend"] != "torch"})
    if exported:
        missing = backend_available(exported[0])
        if missing:
            raise BackendError(missing)
        python = deploy_python()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PYTHONNOUSERSITE"] = "1"
    else:
        python, env = Path(sys.executable), dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TQDM_DISABLE="1", OMP_NUM_THREADS=str(settings["threads"]))
    with tempfile.TemporaryDirectory(prefix="augsbert-frontier-") as tmp:
        request = {"rows": rows, "texts": texts, **{k: settings[k] for k in ("threads", "repeat", "batch_size")}}
        (Path(tmp) / "request.json").write_text(json.dumps(request), encoding="utf-8")
        done = subprocess.run([str(python), str(SPEED_SCRIPT), str(Path(tmp) / "request.json"),
                               str(Path(tmp) / "result.json")], env=env, capture_output=True, text=True)
        for line in done.stdout.splitlines():
            print(f"frontier: {line}", file=sys.stderr, flush=True)  # each row as it is timed, into the job's log
        if done.returncode != 0 or not (Path(tmp) / "result.json").is_file():
            last = [line for line in done.stderr.splitlines() if line.strip()][-1:] or [f"exit code {done.returncode}"]
            raise BackendError(f"the speed measurement ({python} {SPEED_SCRIPT.name}) failed: {last[0].strip()[:300]}")
        return json.loads((Path(tmp) / "result.json").read_text(encoding="utf-8"))


def measure(spec: dict, results_dir: str | Path) -> dict:
    """The frontier of grid spec `spec` (augsbert.reporting.frontier.frontier_spec), measured."""
    began = time.time()
    columns, timed, texts = collect(spec, results_dir)
    speed = time_rows(timed, texts, spec["settings"])
    by_name = {row["name"]: row for row in speed["rows"]}
    seeds = sorted({e["seed"] for c in columns for e in c["measured"]})
    out = []
    for column in columns:
        for entry in column["measured"]:
            row = by_name[f"{column['column']}/{entry.pop('speed_of', entry['row'])}"]
            entry.update(sentences_per_s=row["sentences_per_s"], size_mb=row["size_mb"])
        out.append({"column": column["column"], "reference": column["reference"],
                    "sentences": len(texts[column["column"]]), "rows": summarise(column["measured"])})
    loads = [r[k] for r in speed["rows"] for k in ("load_before", "load_after")]
    exported = any(row["backend"] != "torch" for row in timed)
    condition = {**{k: speed[k] for k in ("threads", "repeat", "batch_size", "cpus")},
                 "python": f"the {'deploy' if exported else 'main'} environment, torch {speed['torch']}",
                 "interpreter": speed["python"], "load_min": min(loads), "load_max": max(loads),
                 "speed_seed": seeds[0], "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    return {"grid": spec["grid"], "description": spec.get("description", ""), "seeds": seeds, "columns": out,
            "condition": condition, "specs": spec["specs"], "seconds": round(time.time() - began)}


def run(spec: dict, results_dir: str | Path, out: str | Path) -> str:
    """Write the grid's frontier (`out` = results/tables/<grid>.frontier.md; .json and .png beside it)."""
    out = Path(out)
    with writing(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        with writer_lock(out):
            frontier = measure(spec, results_dir)
            write(frontier, out)
    return markdown(frontier)
