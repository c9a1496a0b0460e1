"""A grid's label-budget curves (active learning, docs/methods/active.md): what each strategy's labels bought.

Beside `results/tables/<grid>.md`, `augsbert render-curve` writes `<grid>.curve.md` (per grid column: the teacher's
test Spearman by the gold labels it learned, rows = the grid's active-learning cells (strategies), columns =
label counts, mean ± sample std over seeds; the labels each strategy needs to reach its random baseline's final
teacher Spearman; the student's curve where students were trained per round; the chosen pairs' mean label and
statistic), `<grid>.curve.csv` (every figure, long) and `<grid>.curve.png` (Spearman against labels, one line per
strategy with a band of ± one standard deviation over seeds, the full-gold teacher as a dashed ceiling).

The layout comes from the plan (`curve_spec`): a cell with `active.rounds` > 0 is a line, a cell with all the gold
(`gold_fraction: 1`, no rounds) the ceiling of its column. Every line that is not `random` is read against its
random baseline: the `random` cell of the same column whose round-0 teacher is the very same artifact (same data,
subset, teacher settings and seeds) and which runs the same rounds and batch. A grid without one for a strategy
is refused: the savings cannot be read off a curve without its baseline.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from ..config.grids import cells
from ..store.keys import canonical_json
from ..config.load import ConfigError
from ..config.names import unknown_name
from ..stages.active_select import TEACHER_ROLE
from ..stages.teacher import TEACHER
from ..store.artifacts import DamagedArtifactError, read_json, write_with_siblings
from ..planning.graph import SPECS, write_spec
from ..store.results_files import check_results

TEACHER_ROW = next(iter(TEACHER.rows))  # the experiment's teacher: the ceiling's model
BASELINE = "random"
METRICS = {"teacher_spearman": "Teacher test Spearman × 100", "student_spearman": "Student test Spearman × 100",
           "chosen_score": "Mean label (0–1) of the pairs chosen in the round",
           "chosen_uncertainty": "Mean statistic of the chosen pairs (the strategy's; scored candidates' mean after /)"}



def _ceiling_name(label: str) -> str:
    """An all-gold cell's row label, with "all gold" said once (a grid labels it `all gold` or, say, `full`)."""
    return label if "all gold" in label.lower() else f"{label}: all gold"

def curve_spec(plan, name: str) -> dict:
    """The curves of grid `name`: per column its lines (active-learning cells, each with its random baseline) and
    its ceilings (all-gold cells)."""
    grids = plan.config.get("grids") or {}
    if name not in grids:
        raise ConfigError(unknown_name(name, "grid", grids))
    grid = grids[name]
    columns: dict[str, dict] = {c: {"column": c, "lines": [], "ceilings": []} for c in grid["columns"]}
    for cell in cells(name, grid):
        exp = plan.experiments[cell.experiment]
        active = exp.config["active"]
        label = " ".join(str(grid["labels"].get(v, v)) for _, v in cell.combo) or cell.column
        if active["rounds"]:
            columns[cell.column]["lines"].append({
                "experiment": cell.experiment, "label": label, "strategy": active["strategy"],
                "round0": [exp.runs[s].get(TEACHER_ROLE.format(0)) for s in exp.seeds],
                "rounds": active["rounds"], "batch": active["batch"]})
        elif exp.config["gold_fraction"] >= 1 and TEACHER_ROW in next(iter(exp.runs.values())):
            columns[cell.column]["ceilings"].append({"experiment": cell.experiment, "label": label})
    if not any(c["lines"] for c in columns.values()):
        raise ConfigError(f"grids.{name}: no cell runs active learning (active.rounds > 0), so it has no curve")
    for column in columns.values():
        for line in column["lines"]:
            line["baseline"] = _baseline(name, column, line)
    return {"grid": name, "description": grid["description"], "columns": list(columns.values()),
            "experiments": sorted({e["experiment"] for c in columns.values() for e in (*c["lines"], *c["ceilings"])})}


def _baseline(grid: str, column: dict, line: dict) -> str:
    """The random cell `line` is read against (itself for a random line)."""
    if line["strategy"] == BASELINE:
        return line["experiment"]
    for other in column["lines"]:
        if other["strategy"] == BASELINE and all(other[k] == line[k] for k in ("round0", "rounds", "batch")):
            return other["experiment"]
    raise ConfigError(f"grids.{grid}: {line['experiment']} ({line['strategy']}) has no random baseline in column "
                      f"{column['column']}: add a cell with active.strategy: random and the same teacher, seeds, "
                      "gold_fraction, rounds and batch (random is always planned beside any other strategy)")


def curve_spec_file(plan, name: str) -> str:
    """`@<path>` of a grid's curve spec (artifacts/.specs/curves/<name>.json)."""
    return "@" + write_spec(Path(SPECS) / "curves" / f"{name}.json", canonical_json(curve_spec(plan, name)))


def has_curve(plan, name: str) -> bool:
    """Whether grid `name` has active-learning cells (its table then comes with the curve)."""
    grid = (plan.config.get("grids") or {}).get(name)
    return grid is not None and any(plan.experiments[c.experiment].config["active"]["rounds"]
                                    for c in cells(name, grid))


# ------------------------------------------------------------------ the figures

def _summary(values: list) -> tuple[float | None, float | None, int]:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not values:
        return None, None, 0
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0, len(values)


def _results(path: Path, grid: str) -> dict:
    if not path.is_file():
        raise DamagedArtifactError(f"{path}: no results file yet (the curve of grid {grid} needs it); run the "
                                   f"workflow for it (`snakemake --cores 2 results/tables/{grid}.curve.md`)")
    doc = read_json(path)
    check_results(doc, path)
    return doc


def line_points(doc: dict) -> list[dict]:
    """Per round of one experiment: its labels and the mean, std and count over seeds of each figure."""
    runs = [run["rounds"] for run in (doc.get("active") or {}).values()]
    points = []
    for r in range(min(map(len, runs)) if runs else 0):
        entries = [rounds[r] for rounds in runs]
        labels = sorted({e["gold_labels"] for e in entries})
        if len(labels) != 1:  # every seed's round r learned as many labels (same gold_fraction and batch)
            raise DamagedArtifactError(f"results/{doc['experiment']}.json: round {r} learned {labels} labels in "
                                       "different seeds")
        figures = {"teacher_spearman": [(e["teacher_test"] or {}).get("spearman") for e in entries],
                   "student_spearman": [(e["student_test"] or {}).get("spearman") for e in entries],
                   "chosen_score": [((e["chosen"] or {}).get("scores") or {}).get("mean") for e in entries],
                   "chosen_uncertainty": [(e["chosen"] or {}).get("mean_uncertainty") for e in entries],
                   "scored_uncertainty": [(e["chosen"] or {}).get("scored_mean_uncertainty") for e in entries]}
        points.append({"round": r, "gold_labels": labels[0], **{k: _summary(v) for k, v in figures.items()}})
    return points


def labels_to_reach(points: list[tuple[int, float]], target: float) -> float | None:
    """The labels at which a curve of (labels, mean Spearman) first reaches `target`, read off its straight
    segments between rounds; None when it never does."""
    previous = None
    for labels, value in sorted(points):
        if value >= target:
            if previous is None or value == previous[1]:
                return float(labels)
            (l0, v0) = previous
            return l0 + (target - v0) * (labels - l0) / (value - v0)
        previous = (labels, value)
    return None


def _cell(summary: tuple, digits: int = 2) -> str:
    mean, std, n = summary
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" if std is None or n < 2 else f"{mean:.{digits}f} ± {std:.{digits}f}"


def collect(spec: dict, results_dir: str | Path) -> tuple[list[dict], dict[str, dict]]:
    """Per column: its lines' points and its ceilings' teacher scores; and the documents read."""
    docs = {e: _results(Path(results_dir) / f"{e}.json", spec["grid"]) for e in spec["experiments"]}
    columns = []
    for column in spec["columns"]:
        lines = [{**line, "points": line_points(docs[line["experiment"]])} for line in column["lines"]]
        ceilings = []
        for ceiling in column["ceilings"]:
            doc = docs[ceiling["experiment"]]
            score = ((doc["models"].get(TEACHER_ROW) or {}).get("summary") or {}).get("spearman") or {}
            ceilings.append({**ceiling, "gold_labels": int(doc["data"]["sizes"]["train"]),
                             "teacher_spearman": (score.get("mean"), score.get("std"), score.get("n") or 0)})
        columns.append({"column": column["column"], "lines": lines, "ceilings": ceilings})
    return columns, docs


def savings(line: dict, baseline: dict) -> dict:
    """Labels `line` needs to reach its baseline's final mean teacher Spearman, against the baseline's labels."""
    final = baseline["points"][-1]
    target, budget = final["teacher_spearman"][0], final["gold_labels"]
    curve = [(p["gold_labels"], p["teacher_spearman"][0]) for p in line["points"]
             if p["teacher_spearman"][0] is not None]
    needed = labels_to_reach(curve, target) if target is not None else None
    best = max(curve, key=lambda p: p[1]) if curve else None
    return {"target": target, "budget": budget, "needed": needed, "best": best,
            "saved": None if needed is None else budget - needed}


def markdown(spec: dict, columns: list[dict], docs: dict[str, dict]) -> str:
    seeds = sorted({s for d in docs.values() for s in d["seeds"]})
    lines = [f"# {spec['grid']}: label-budget curves", ""]
    if spec.get("description"):
        lines += [spec["description"].strip(), ""]
    spread = (f"one seed ({seeds[0]})" if len(seeds) == 1 else
              f"mean ± sample standard deviation over seeds {', '.join(map(str, seeds))}")
    lines += [f"Each row is a strategy (a grid cell with active.rounds > 0); a column is the number of gold labels "
              f"the round's models learned (round 0: the gold_fraction subset; each round adds active.batch pairs "
              f"the strategy chose); {spread}; – = not trained. Generated by `augsbert render-curve` from the "
              "`active` sections of results/<experiment>.json.", ""]
    for column in columns:
        by_name = {line["experiment"]: line for line in column["lines"]}
        counts = sorted({p["gold_labels"] for line in column["lines"] for p in line["points"]}
                        | {c["gold_labels"] for c in column["ceilings"]})
        for metric in ("teacher_spearman", "student_spearman"):
            if metric == "student_spearman" and not any(p["student_spearman"][0] is not None for line in column["lines"]
                                               for p in line["points"]):
                continue
            lines += [f"## {column['column']}: {METRICS[metric]} by gold labels", "",
                      "| Strategy | " + " | ".join(f"{n:,}" for n in counts) + " |",
                      "|---|" + "---:|" * len(counts)]
            for line in column["lines"]:
                at = {p["gold_labels"]: p[metric] for p in line["points"]}
                lines.append(f"| {line['label']} | " + " | ".join(_cell(at.get(n, (None, None, 0))) for n in counts)
                             + " |")
            if metric == "teacher_spearman":
                for ceiling in column["ceilings"]:
                    lines.append(f"| {_ceiling_name(ceiling['label'])} (the ceiling) | " + " | ".join(
                        _cell(ceiling["teacher_spearman"]) if n == ceiling["gold_labels"] else ""
                        for n in counts) + " |")
            lines.append("")
        lines += [f"## {column['column']}: labels to reach the random baseline's final teacher Spearman", "",
                  "Read off each curve of means (straight lines between rounds): the labels at which a strategy's "
                  "teacher first reaches the mean Spearman its random baseline reached with all its labels.", "",
                  "| Strategy | Baseline | Baseline's final Spearman (labels) | Labels needed | Labels saved |",
                  "|---|---|---:|---:|---:|"]
        for line in column["lines"]:
            base = by_name[line["baseline"]]
            if base is line:
                final = base["points"][-1]
                lines.append(f"| {line['label']} | (itself) | {_cell(final['teacher_spearman'])} "
                             f"({final['gold_labels']:,}) | "
                             f"{final['gold_labels']:,} | – |")
                continue
            found = savings(line, base)
            final = "–" if found["target"] is None else f"{found['target']:.2f} ({found['budget']:,})"
            if found["needed"] is None:
                best = found["best"]
                needed = "not reached" + (f" (best {best[1]:.2f} at {best[0]:,})" if best else "")
                saved = "–"
            else:
                needed = f"{found['needed']:,.0f}"
                saved = f"{found['saved']:,.0f} ({100 * found['saved'] / found['budget']:.0f} %)"
            lines.append(f"| {line['label']} | {base['label']} | {final} | {needed} | {saved} |")
        rounds = sorted({p["round"] for line in column["lines"] for p in line["points"] if p["round"]})
        lines += ["", f"## {column['column']}: the pairs each round chose", "",
                  "Mean label (0–1) of the round's chosen pairs; under it the mean of the strategy's statistic over "
                  "them / over every scored candidate (none for random).", "",
                  "| Strategy | " + " | ".join(f"round {r}" for r in rounds) + " |", "|---|" + "---:|" * len(rounds)]
        for line in column["lines"]:
            at = {p["round"]: p for p in line["points"]}
            cells_ = []
            for r in rounds:
                point = at.get(r)
                if point is None:
                    cells_.append("–")
                    continue
                u, pool = point["chosen_uncertainty"][0], point["scored_uncertainty"][0]
                stat = "" if u is None else f"<br>{u:.3g} / {pool:.3g}" if pool is not None else f"<br>{u:.3g}"
                cells_.append(_cell(point["chosen_score"], 3) + stat)
            lines.append(f"| {line['label']} | " + " | ".join(cells_) + " |")
        lines.append("")
    lines += ["## Experiments", "", "| Column | Row | Experiment | Seeds | Config hash |", "|---|---|---|---|---|"]
    for column in columns:
        for entry in (*column["lines"], *column["ceilings"]):
            doc = docs[entry["experiment"]]
            lines.append(f"| {column['column']} | {entry['label']} | `{doc['experiment']}` | "
                         f"{' '.join(map(str, doc['seeds']))} | {doc['config_hash']} |")
    return "\n".join(lines) + "\n"


def long_table(spec: dict, columns: list[dict]):
    import pandas as pd

    records = []
    for column in columns:
        for line in column["lines"]:
            for point in line["points"]:
                for metric in (*METRICS, "scored_uncertainty"):
                    mean, std, n = point[metric]
                    records.append({"grid": spec["grid"], "column": column["column"], "row": line["label"],
                                    "strategy": line["strategy"], "experiment": line["experiment"],
                                    "baseline": line["baseline"], "round": point["round"],
                                    "gold_labels": point["gold_labels"],
                                    "metric": metric, "mean": mean, "std": std, "n_seeds": n})
        for ceiling in column["ceilings"]:
            mean, std, n = ceiling["teacher_spearman"]
            records.append({"grid": spec["grid"], "column": column["column"], "row": ceiling["label"],
                            "strategy": "all gold", "experiment": ceiling["experiment"], "baseline": "", "round": None,
                            "gold_labels": ceiling["gold_labels"], "metric": "teacher_spearman", "mean": mean,
                            "std": std, "n_seeds": n})
    return pd.DataFrame.from_records(records).astype({"round": "Int64"})


def line_chart(spec: dict, columns: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    trained = any(p["student_spearman"][0] is not None for c in columns for line in c["lines"] for p in line["points"])
    metrics = ["teacher_spearman"] + (["student_spearman"] if trained else [])
    fig, axes = plt.subplots(len(metrics), len(columns), figsize=(6.0 * len(columns), 4.2 * len(metrics)),
                             squeeze=False)
    for j, column in enumerate(columns):
        for i, metric in enumerate(metrics):
            ax = axes[i][j]
            for line in column["lines"]:
                points = [p for p in line["points"] if p[metric][0] is not None]
                if not points:
                    continue
                x = np.array([p["gold_labels"] for p in points], dtype=float)
                mean = np.array([p[metric][0] for p in points])
                std = np.array([p[metric][1] or 0.0 for p in points])
                (drawn,) = ax.plot(x, mean, marker="o", label=line["label"])
                ax.fill_between(x, mean - std, mean + std, color=drawn.get_color(), alpha=0.18, linewidth=0)
            if metric == "teacher_spearman":
                for ceiling in column["ceilings"]:
                    if ceiling["teacher_spearman"][0] is not None:
                        ax.axhline(ceiling["teacher_spearman"][0], color="gray", linestyle="--",
                                   label=f"{_ceiling_name(ceiling['label'])} ({ceiling['gold_labels']:,} labels)")
            ax.set_title(f"{column['column']}: {metric.split('_')[0]}")
            ax.set_xlabel("gold labels learned")
            ax.set_ylabel(METRICS[metric])
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(f"{spec['grid']}: mean ± std over seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(spec: dict, results_dir: str | Path, out: str | Path) -> str:
    """Write the grid's curve files (`out` = results/tables/<grid>.curve.md; .csv and .png beside it)."""
    def siblings(out: Path) -> str:
        columns, docs = collect(spec, results_dir)
        text = markdown(spec, columns, docs)
        long_table(spec, columns).to_csv(out.with_suffix(".csv"), index=False)
        line_chart(spec, columns, out.with_suffix(".png"))
        return text

    return write_with_siblings(out, siblings)
