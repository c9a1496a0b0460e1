"""The quality / speed / size frontier of a grid's compact students (issues 58, 65; docs/guide/compact.md "The
frontier"): which student to deploy.

Any grid whose students include a compact one (`student.init: layers`, `arch: static`, `matryoshka_dims`) has a
frontier beside its table, `results/tables/<grid>.frontier.{json,md,png}` (rule `grid_frontier`, command `augsbert
frontier`). `frontier_spec` lays it out from the plan: per grid column its rows (each cell's student; a Matryoshka
student's cut sizes as rows of their own), the reference row the others are compared with (the full Transformer
student), and the exported int8 rows (the reference, or the grid's `frontier.export_rows`, for each of
`frontier.backends`, every seed: `models/<experiment>/student-<backend>-int8-seed<seed>`, rule
`export_model_backend_seed`). augsbert.export.frontier measures and writes it; this module summarises the rows over
seeds, marks the Pareto-optimal ones, writes the table and the plot, reads a frontier file back (one line naming
the file and what is wrong with it where it is not one) and picks the row `augsbert export --pick-fastest-within`
exports.

A row's quality is its test Spearman x 100 (mean and std over seeds; an int8 row's is its exported file's, from its
parity record), its speed the CPU sentences per second one process measured for every row of the grid under one
condition (the first seed's model), its size the megabytes its backend reads. A row is Pareto-optimal when no other
row is at least as fast and at least as good, and better in one of the two.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from ..config.grids import cells
from ..config.load import ConfigError
from ..config.names import unknown_name
from ..planning.graph import SPECS, write_spec
from ..stages.student import STUDENT, compact_kind
from ..store.artifacts import read_json, write_json, write_text
from ..store.keys import canonical_json

TABLES = Path("results/tables")
SUFFIX = ".frontier"  # results/tables/<grid>.frontier.{json,md,png}
STUDENT_ROLE = STUDENT.roles[0]
EXPORT_DIR = "models/{experiment}/" + STUDENT_ROLE + "-{backend}-int8-seed{seed}"  # rule export_model_backend_seed
# a row of a frontier file: the fields `augsbert export --pick-fastest-within` and the table read, with their types
ROW_FIELDS = {"row": (str,), "label": (str,), "experiment": (str,), "backend": (str,), "dim": (int, type(None)),
              "spearman": (int, float, type(None)), "sentences_per_s": (int, float, type(None)),
              "size_mb": (int, float, type(None))}
WRITER = "`augsbert frontier` writes (results/tables/<grid>.frontier.json)"
MEASURE = ("sentences", "threads", "repeat", "batch_size")  # the grid's `frontier` settings of the speed measurement


def frontier_path(grid: str, ext: str = "json") -> Path:
    return TABLES / f"{grid}{SUFFIX}.{ext}"


def _student(plan, experiment: str) -> list[dict] | None:
    """The student's params per seed of `experiment` (None: the experiment trains no student)."""
    exp = plan.experiments[experiment]
    keys = [exp.runs[seed].get(STUDENT_ROLE) for seed in exp.seeds]
    return None if not all(keys) else [plan.node(key).params for key in keys]


def frontier_spec(plan, name: str) -> dict:
    """The frontier of grid `name`: per column its rows, its reference and its exported rows; the experiments
    whose results it reads, their specs (what `--pick-fastest-within` exports from) and the measurement's
    settings (the grid's `frontier` section)."""
    grids = plan.config.get("grids") or {}
    if name not in grids:
        raise ConfigError(unknown_name(name, "grid", grids))
    grid = grids[name]
    options = grid["frontier"]
    where = f"grids.{name}.frontier"
    columns = {c: {"column": c, "rows": [], "exports": []} for c in grid["columns"]}
    for cell in cells(name, grid):
        students = _student(plan, cell.experiment)
        if students is None:
            continue
        params = students[0]
        value = "_".join(v for _, v in cell.combo) or cell.column
        label = " ".join(str(grid["labels"].get(v, v)) for _, v in cell.combo) or cell.column
        columns[cell.column]["rows"].append({
            "row": value, "label": label, "experiment": cell.experiment, "kind": compact_kind(params),
            "static": params.get("arch") == "static", "dims": params.get("matryoshka_dims"),
            "seeds": [int(s) for s in plan.experiments[cell.experiment].seeds]})
    if not any(row["kind"] for column in columns.values() for row in column["rows"]):
        raise ConfigError(f"grids.{name}: no cell's student is a compact one (student.init: layers, arch: static, "
                          "matryoshka_dims), so the grid has no frontier; its table is results/tables/"
                          f"{name}.md")
    for column in columns.values():
        rows = {row["row"]: row for row in column["rows"]}
        reference = options["reference"] or next((r for r, row in rows.items() if row["kind"] is None), None)
        if reference is None:
            raise ConfigError(f"{where}.reference: column {column['column']} has no full Transformer student to "
                              f"compare the others with; name one of its rows ({', '.join(rows)})")
        if reference not in rows:
            raise ConfigError(f"{where}.reference: {reference!r} is not a row of column {column['column']} "
                              f"(its rows: {', '.join(rows)})")
        column["reference"] = reference
        exported = options["export_rows"] if options["export_rows"] is not None else [reference]
        for value in exported:
            if value not in rows:
                raise ConfigError(f"{where}.export_rows: {value!r} is not a row of column {column['column']} "
                                  f"(its rows: {', '.join(rows)})")
            if rows[value]["static"] and options["backends"]:
                raise ConfigError(f"{where}.export_rows: {value!r} is a static student, a table of token vectors "
                                  "with no Transformer to convert to ONNX or OpenVINO; leave it out")
            row = rows[value]
            for backend in options["backends"]:
                column["exports"].append({
                    "row": f"{value}_{backend}_int8", "of": value, "experiment": row["experiment"], "backend": backend,
                    "paths": {str(seed): EXPORT_DIR.format(experiment=row["experiment"], backend=backend, seed=seed)
                              for seed in row["seeds"]}})
    experiments = sorted({row["experiment"] for c in columns.values() for row in c["rows"]})
    return {"grid": name, "description": grid["description"], "columns": list(columns.values()),
            "experiments": experiments, "settings": {k: options[k] for k in MEASURE},
            "specs": {e: plan.experiment_spec(e) for e in experiments}}


def export_targets(spec: dict) -> list[str]:
    """The exported int8 folders a frontier reads (the rule's inputs)."""
    return [path for column in spec["columns"] for export in column["exports"] for path in export["paths"].values()]


def frontier_spec_file(plan, name: str) -> str:
    """`@<path>` of a grid's frontier spec (artifacts/.specs/frontiers/<name>.json)."""
    return "@" + write_spec(Path(SPECS) / "frontiers" / f"{name}.json", canonical_json(frontier_spec(plan, name)))


# ------------------------------------------------------------------ the figures

def summarise(measured: list[dict]) -> list[dict]:
    """Per-seed entries ({row, label, seed, spearman, sentences_per_s, size_mb, experiment, backend, quantize, dim,
    parity}) -> one row each, in the order first seen: spearman mean / std / n, speed, size, the parity over seeds
    (mean of the mean cosines, the lowest minimum) and `pareto`."""
    rows: dict[str, dict] = {}
    for entry in measured:
        row = rows.setdefault(entry["row"], {k: entry.get(k) for k in ("row", "label", "experiment", "backend",
                                                                         "quantize", "dim", "file", "kind")}
                              | {"per_seed": {}})
        row["per_seed"][str(entry["seed"])] = {k: entry.get(k) for k in ("spearman", "sentences_per_s", "size_mb",
                                                                          "parity") if k in entry}
    for row in rows.values():
        seeds = list(row["per_seed"].values())
        quality = [s["spearman"] for s in seeds if s.get("spearman") is not None]
        row["spearman"] = round(statistics.mean(quality), 2) if quality else None
        row["spearman_std"] = round(statistics.stdev(quality), 2) if len(quality) > 1 else None
        row["seeds"] = len(quality)
        speeds = [s["sentences_per_s"] for s in seeds if s.get("sentences_per_s")]
        row["sentences_per_s"] = round(statistics.mean(speeds), 1) if speeds else None
        sizes = [s["size_mb"] for s in seeds if s.get("size_mb") is not None]
        row["size_mb"] = round(statistics.mean(sizes), 1) if sizes else None
        parities = [s["parity"] for s in seeds if s.get("parity")]
        if parities:
            row["parity"] = {"mean_cosine": round(statistics.mean(p["mean_cosine"] for p in parities), 4),
                             "min_cosine": round(min(p["min_cosine"] for p in parities), 4),
                             "sentences": min(p.get("sentences") or 0 for p in parities),
                             "passed": all(p.get("passed") for p in parities)}
    summary = list(rows.values())
    mark_pareto(summary)
    return summary


def mark_pareto(rows: list[dict]) -> None:
    """Set each row's `pareto`: no other row is at least as fast and as good, and strictly better in one."""
    known = [r for r in rows if r.get("spearman") is not None and r.get("sentences_per_s")]
    for row in rows:
        row["pareto"] = row in known and not any(
            other is not row and other["sentences_per_s"] >= row["sentences_per_s"]
            and other["spearman"] >= row["spearman"]
            and (other["sentences_per_s"] > row["sentences_per_s"] or other["spearman"] > row["spearman"])
            for other in known)


def column_of(frontier: dict, column: str | None) -> dict:
    """The frontier of one grid column: `column`, or the only one."""
    columns = {c["column"]: c for c in frontier["columns"]}
    if column is None:
        if len(columns) > 1:
            raise ValueError(f"the frontier has {len(columns)} columns ({', '.join(columns)}): name one with "
                             "--column")
        return next(iter(columns.values()))
    if column not in columns:
        raise ValueError(f"the frontier has no column {column!r} (its columns: {', '.join(columns)})")
    return columns[column]


def pick_fastest_within(column: dict, points: float) -> dict:
    """The fastest row of a frontier's column whose mean test Spearman is at most `points` below the reference
    row's (the full student); a Matryoshka cut (its speed is its model's: the whole vector is computed) is no
    candidate."""
    rows = column["rows"]
    reference = next((r for r in rows if r["row"] == column["reference"]), None)
    if reference is None or reference.get("spearman") is None:
        raise ValueError(f"the frontier has no measured reference row `{column['reference']}`")
    floor = reference["spearman"] - points
    candidates = [r for r in rows if r.get("dim") is None and r.get("spearman") is not None
                  and r.get("sentences_per_s") and r["spearman"] >= floor]
    return max(candidates, key=lambda r: (r["sentences_per_s"], r["spearman"]))


def _parity_text(row: dict) -> str:
    parity = row.get("parity")
    if not parity:
        return ""
    return f"{parity['mean_cosine']:.4f} / {parity['min_cosine']:.4f}" + ("" if parity.get("passed") else " (below)")


def column_markdown(frontier: dict, column: dict) -> list[str]:
    reference = next((r for r in column["rows"] if r["row"] == column["reference"]), {})
    lines = [f"| row | test Spearman | vs {reference.get('label', column['reference'])} | CPU sentences/s | "
             "speed-up | size MB | int8 parity: mean / min cosine | Pareto |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: |"]
    for row in column["rows"]:
        quality = "–" if row.get("spearman") is None else f"{row['spearman']:.2f}" + (
            f" ± {row['spearman_std']:.2f}" if row.get("spearman_std") is not None else "")
        delta = "–" if row.get("spearman") is None or reference.get("spearman") is None else \
            f"{row['spearman'] - reference['spearman']:+.2f}"
        speed = "–" if not row.get("sentences_per_s") else f"{row['sentences_per_s']:,.0f}"
        gain = "–" if not row.get("sentences_per_s") or not reference.get("sentences_per_s") else \
            f"{row['sentences_per_s'] / reference['sentences_per_s']:.1f}x"
        size = "–" if row.get("size_mb") is None else f"{row['size_mb']:.1f}"
        lines.append(f"| {row['label']} | {quality} | {delta} | {speed} | {gain} | {size} | {_parity_text(row)} | "
                     f"{'**yes**' if row.get('pareto') else ''} |")
    return lines


def markdown(frontier: dict) -> str:
    """The frontier tables (one per grid column): one line per row, the Pareto-optimal ones marked, and how it
    was measured."""
    condition = frontier.get("condition") or {}
    lines = [f"# Frontier of grid {frontier['grid']}", ""]
    for column in frontier["columns"]:
        if len(frontier["columns"]) > 1:
            lines += [f"## {column['column']}", ""]
        lines += [*column_markdown(frontier, column), "",
                  f"Speed: {column.get('sentences')} distinct sentences of the column's data (test, dev, train)."
                  if column.get("sentences") is not None else "", ""]
    lines += [f"Seeds {', '.join(map(str, frontier.get('seeds', [])))} (test Spearman: mean ± std over them; an int8 "
              f"row's is its exported file's, from its parity record). Speed and size: seed "
              f"{condition.get('speed_seed')}'s models, {condition.get('threads')} threads, batches of "
              f"{condition.get('batch_size')}, best of {condition.get('repeat')}, all rows in one process one after "
              f"another ({condition.get('python')}; load average {condition.get('load_min')}–"
              f"{condition.get('load_max')} on {condition.get('cpus')} CPUs while they ran); size is what the "
              "row's backend reads; a Matryoshka cut (`@d`) encodes at its whole model's speed. int8 parity: cosine "
              "of the exported model's and the PyTorch model's embeddings of sentences its calibration did not "
              "see (mean over seeds of the mean, the lowest minimum)."]
    return "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1]))


def plot(frontier: dict, path: str | Path) -> None:
    """Test Spearman against CPU sentences per second (log scale), one panel per grid column, marker area by size
    on disk, Pareto-optimal rows filled and joined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = frontier["columns"]
    fig, axes = plt.subplots(1, len(columns), figsize=(7.5 * len(columns), 4.8), squeeze=False)
    for ax, column in zip(axes[0], columns):
        rows = [r for r in column["rows"] if r.get("spearman") is not None and r.get("sentences_per_s")]
        for at, row in enumerate(sorted(rows, key=lambda r: (r["sentences_per_s"], -r["spearman"]))):
            area = 20 + 3 * (row.get("size_mb") or 0)
            ax.scatter(row["sentences_per_s"], row["spearman"], s=area, alpha=0.85 if row["pareto"] else 0.4,
                       facecolors="C0" if row["pareto"] else "none", edgecolors="C0")
            ax.annotate(f"{row['label']} ({row.get('size_mb') or 0:.0f} MB)", (row["sentences_per_s"],
                                                                               row["spearman"]),
                        textcoords="offset points", xytext=(8, 10 - 10 * (at % 3)), fontsize=7)  # staggered
        front = sorted((r for r in rows if r["pareto"]), key=lambda r: r["sentences_per_s"])
        if len(front) > 1:
            ax.plot([r["sentences_per_s"] for r in front], [r["spearman"] for r in front], "C0--", lw=1)
        ax.set_xscale("log")
        ax.set_xlabel("CPU sentences per second (log scale)")
        ax.set_ylabel("test Spearman x 100")
        ax.set_title(f"{frontier['grid']} {column['column']}: quality, speed and size (filled: Pareto-optimal; "
                     "area: MB on disk)", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(frontier: dict, table: str | Path) -> dict[str, Path]:
    """`table` (results/tables/<grid>.frontier.md) with its .json and .png beside it; the .md last (what
    Snakemake requests), each atomic."""
    table = Path(table)
    paths = {"json": table.with_suffix(".json"), "png": table.with_suffix(".png"), "md": table}
    write_json(paths["json"], frontier)
    plot(frontier, paths["png"])
    write_text(paths["md"], markdown(frontier) + "\n")
    return paths


# ------------------------------------------------------------------ reading a frontier file back

def grid_or_file(value: str) -> Path:
    """`--frontier`'s value: a frontier file, or a grid's name (its results/tables/<grid>.frontier.json)."""
    path = Path(value)
    if path.suffix == ".json" or "/" in value or path.exists():
        return path
    return frontier_path(value)


def _number_text(kinds: tuple) -> str:
    names = {str: "a string", int: "an integer", float: "a number", type(None): "null"}
    return " or ".join(dict.fromkeys(names[k] for k in kinds if not (k is int and float in kinds)))


def check(frontier, path) -> dict:
    """`frontier` if it has what the pick and the table read, else a ValueError naming `path` and what is wrong
    with it in one line."""
    def wrong(what: str) -> ValueError:
        return ValueError(f"{path}: {what}; not a frontier file as {WRITER}")

    if not isinstance(frontier, dict):
        raise wrong(f"holds a JSON {type(frontier).__name__}, not an object")
    if not isinstance(frontier.get("grid"), str):
        raise wrong("no `grid` (a string)")
    if not isinstance(frontier.get("columns"), list) or not frontier["columns"]:
        raise wrong("no `columns` (a list of the grid columns' frontiers)" if "rows" not in frontier else
                    "`rows` at its top, as benchmarks/frontier.py wrote it before issue 65: run "
                    ".venv/bin/python benchmarks/frontier.py again (the rows are kept; it re-measures)")
    for at, column in enumerate(frontier["columns"], 1):
        if not isinstance(column, dict) or not isinstance(column.get("column"), str) or \
                not isinstance(column.get("reference"), str) or not isinstance(column.get("rows"), list):
            raise wrong(f"column {at} is not an object with `column`, `reference` and `rows`")
        for line, row in enumerate(column["rows"], 1):
            where = f"row {line} of column {column['column']}"
            if not isinstance(row, dict):
                raise wrong(f"{where} is not an object")
            for field, kinds in ROW_FIELDS.items():
                if field not in row:
                    raise wrong(f"{where} has no `{field}`")
                value = row[field]
                if not isinstance(value, kinds) or isinstance(value, bool) or (
                        isinstance(value, float) and not math.isfinite(value)):
                    raise wrong(f"{where}: `{field}` is {value!r:.40}, not {_number_text(kinds)}")
    if frontier.get("specs") is not None and not isinstance(frontier["specs"], dict):
        raise wrong("`specs` is not an object")
    return frontier


def read(path: str | Path) -> dict:
    """A frontier file, checked (`check`); a file that is no UTF-8, no JSON, or not a frontier raises a ValueError
    (DamagedArtifactError for the first two) naming the file and what is wrong in one line; a missing one
    FileNotFoundError."""
    if Path(path).is_dir():
        raise ValueError(f"{path}: a folder, not a frontier file ({WRITER})")
    frontier = read_json(path, "frontier file", fix=f"a frontier file is the JSON {WRITER}")
    return check(frontier, path)
