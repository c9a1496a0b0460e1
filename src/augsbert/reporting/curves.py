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
import sys
from pathlib import Path

from ..config.grids import cells
from ..store.keys import canonical_json
from ..config.load import ConfigError
from ..config.names import unknown_name
from ..stages.active_select import MEMBER_ROLE, TEACHER_ROLE, UNTRAINED_ROLE
from ..stages.teacher import TEACHER
from ..stages.teacher_ensemble import MEMBER_ROLE as TEACHER_MEMBER
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


def round_steps(doc: dict, seed: str, r: int, last: int, entry: dict) -> list[int]:
    """The optimizer steps round `r`'s teacher (an ensemble: each member) trained in run `seed`: rounds.json's, else
    (a file written before it recorded them) the results' model entries of that round's teacher or members."""
    steps = (entry.get("teacher_test") or {}).get("steps")
    if steps:
        return list(steps)
    models = doc.get("models") or {}

    def of(role: str):
        value = (((models.get(role) or {}).get("per_seed") or {}).get(seed) or {}).get("steps")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    own = of("teacher" if r == last else TEACHER_ROLE.format(r))
    if own is not None:
        return [own]
    prefix = MEMBER_ROLE.format(r, "") if r < last else TEACHER_MEMBER.format("")
    return [v for role in sorted(models) if role.startswith(prefix) and role[len(prefix):].isdigit()
            for v in [of(role)] if v is not None]


def line_points(doc: dict) -> list[dict]:
    """Per round of one experiment: its labels, the mean, std and count over seeds of each figure, the steps its
    teachers trained (every seed's and member's) and, where a seeded subset of the test split was scored
    (active.test_pairs), its size."""
    active = doc.get("active") or {}
    runs = [run["rounds"] for run in active.values()]
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
        steps = [v for seed, run in active.items() for v in round_steps(doc, seed, r, len(run["rounds"]) - 1,
                                                                         run["rounds"][r])]
        subsets = [(e["teacher_test"] or {}).get("test_subset") for e in entries]
        points.append({"round": r, "gold_labels": labels[0], **{k: _summary(v) for k, v in figures.items()},
                       "teacher_steps": sorted(set(steps)), "test_subset": next((x for x in subsets if x), None)})
    return points


def untrained_point(doc: dict) -> dict | None:
    """The curve's 0-label point: the untrained teacher's test Spearman (mean, std, count over seeds), or None in a
    results file without one."""
    model = (doc.get("models") or {}).get(UNTRAINED_ROLE)
    if not model:
        return None
    score = (model.get("summary") or {}).get("spearman") or {}
    return {"round": None, "gold_labels": 0, "teacher_spearman": (score.get("mean"), score.get("std"),
                                                                     score.get("n") or 0),
            "teacher_steps": [0], "test_subset": None}


def teacher_curve(line: dict, ceilings: list[dict] = ()) -> list[tuple[int, tuple]]:
    """(labels, teacher Spearman summary) of a line from its untrained point (0 labels) on, then `ceilings`."""
    points = ([line["untrained"]] if line.get("untrained") else []) + line["points"]
    return [(p["gold_labels"], p["teacher_spearman"]) for p in points if p["teacher_spearman"][0] is not None] + [
        (c["gold_labels"], c["teacher_spearman"]) for c in ceilings if c["teacher_spearman"][0] is not None]


def falling(curve: list[tuple[int, tuple]]) -> dict | None:
    """The largest fall of a curve's mean teacher Spearman between two budgets (any two, the smaller first) by
    more than its seed spread there (the larger sample std of the two; with one seed, any fall), or None: the
    flag of a random baseline that cannot be read."""
    worst = None
    for i, (low, (m0, s0, n0)) in enumerate(curve):
        for high, (m1, s1, n1) in curve[i + 1:]:
            if high <= low:
                continue
            fall, spread = m0 - m1, max(s0 or 0.0, s1 or 0.0)
            if fall > spread and fall > 0 and (worst is None or fall > worst["fall"]):
                worst = {"from_labels": low, "from": m0, "to_labels": high, "to": m1, "fall": fall,
                         "spread": spread, "seeds": max(n0, n1)}
    return worst


def flag_text(line: dict, flag: dict) -> str:
    """One line saying that a random baseline cannot be read, and why."""
    spread = ("one seed: any fall counts" if flag["seeds"] < 2 else
              f"its seed spread is {flag['spread']:.2f}, the larger sample std of the two")
    return (f"{line['label']} (the random baseline) cannot be read: its mean teacher Spearman falls from "
            f"{flag['from']:.2f} at {flag['from_labels']:,} labels to {flag['to']:.2f} at {flag['to_labels']:,}, "
            f"by {flag['fall']:.2f} ({spread}); its teachers are not learning from more labels, so no strategy "
            "can be read against it (docs/methods/active.md, Results)")


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
    return assemble(spec, docs), docs


def assemble(spec: dict, docs: dict[str, dict]) -> list[dict]:
    """Per column of the curve spec: its lines (points by round, the untrained point, the random baseline's flag)
    and ceilings, from the experiments' results documents."""
    columns = []
    for column in spec["columns"]:
        lines = [{**line, "points": line_points(docs[line["experiment"]]),
                  "untrained": untrained_point(docs[line["experiment"]])} for line in column["lines"]]
        ceilings = []
        for ceiling in column["ceilings"]:
            doc = docs[ceiling["experiment"]]
            model = doc["models"].get(TEACHER_ROW) or {}
            score = (model.get("summary") or {}).get("spearman") or {}
            steps = sorted({v["steps"] for v in (model.get("per_seed") or {}).values()
                            if isinstance(v.get("steps"), int)})
            ceilings.append({**ceiling, "gold_labels": int(doc["data"]["sizes"]["train"]), "teacher_steps": steps,
                             "teacher_spearman": (score.get("mean"), score.get("std"), score.get("n") or 0)})
        for line in lines:  # a random baseline whose mean falls beyond its seed spread (the ceiling included)
            line["flag"] = falling(teacher_curve(line, ceilings)) if line["strategy"] == BASELINE else None
        columns.append({"column": column["column"], "lines": lines, "ceilings": ceilings})
    return columns


def flags(columns: list[dict]) -> list[str]:
    """The lines saying which random baselines cannot be read (none: every baseline rises within its spread)."""
    return [f"{column['column']}: {flag_text(line, line['flag'])}" for column in columns for line in column["lines"]
            if line.get("flag")]


def _steps(steps: list[int]) -> str:
    return "–" if not steps else f"{steps[0]:,}" if len(steps) == 1 else f"{steps[0]:,}–{steps[-1]:,}"


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
              f"the round's models learned (0: the untrained teacher, max_steps 0, the same model every strategy "
              f"starts from; round 0: the gold_fraction subset; each round adds active.batch pairs the strategy "
              f"chose); {spread}; – = not trained. Generated by `augsbert render-curve` from the `active` sections "
              "of results/<experiment>.json.", ""]
    unreadable = flags(columns)
    if unreadable:
        lines += ["**A curve that cannot be read** (a random baseline whose mean teacher Spearman falls between two "
                  "budgets by more than its seed spread):", "", *(f"- ⚠ {text}" for text in unreadable), ""]
    for column in columns:
        by_name = {line["experiment"]: line for line in column["lines"]}
        counts = sorted({p["gold_labels"] for line in column["lines"] for p in line["points"]}
                        | {c["gold_labels"] for c in column["ceilings"]}
                        | {0 for line in column["lines"] if line.get("untrained")})
        subsets = [p["test_subset"] for line in column["lines"] for p in line["points"] if p.get("test_subset")]
        for metric in ("teacher_spearman", "student_spearman"):
            if metric == "student_spearman" and not any(p["student_spearman"][0] is not None for line in column["lines"]
                                               for p in line["points"]):
                continue
            lines += [f"## {column['column']}: {METRICS[metric]} by gold labels", "",
                      "| Strategy | " + " | ".join(f"{n:,}" for n in counts) + " |",
                      "|---|" + "---:|" * len(counts)]
            for line in column["lines"]:
                points = line["points"] + ([line["untrained"]] if line.get("untrained") and metric == "teacher_spearman"
                                           else [])
                at = {p["gold_labels"]: p for p in points}
                cells_ = [_cell(at[n][metric]) + (" †" if metric == "teacher_spearman" and at[n].get("test_subset")
                                                  else "") if n in at else "–" for n in counts]
                label = f"{line['label']} ⚠" if line.get("flag") else line["label"]
                lines.append(f"| {label} | " + " | ".join(cells_) + " |")
            if metric == "teacher_spearman":
                for ceiling in column["ceilings"]:
                    lines.append(f"| {_ceiling_name(ceiling['label'])} (the ceiling) | " + " | ".join(
                        _cell(ceiling["teacher_spearman"]) if n == ceiling["gold_labels"] else ""
                        for n in counts) + " |")
                if subsets:
                    lines += ["", f"† scored on a seeded {subsets[0]['pairs']:,} of the {subsets[0]['of']:,} test "
                              "pairs (active.test_pairs: the same pairs for every round, strategy and seed); the "
                              "untrained teacher, each line's last round and the ceiling on all of them."]
                if any(line.get("flag") for line in column["lines"]):
                    lines += ["", "⚠ " + " ".join(flag_text(line, line["flag"]) + "."
                                                  for line in column["lines"] if line.get("flag"))]
            lines.append("")
        lines += [f"## {column['column']}: optimizer steps each teacher trained", "",
                  "The steps of every seed's teacher (an ensemble: each member), one figure where all are equal: "
                  "a budget in steps is the same whatever the round's size (teacher.max_steps); with epochs it "
                  "grows with the labels.", "",
                  "| Strategy | " + " | ".join(f"{n:,}" for n in counts) + " |", "|---|" + "---:|" * len(counts)]
        for line in column["lines"]:
            points = line["points"] + ([line["untrained"]] if line.get("untrained") else [])
            at = {p["gold_labels"]: p["teacher_steps"] for p in points}
            lines.append(f"| {line['label']} | " + " | ".join(_steps(at[n]) if n in at else "–" for n in counts)
                         + " |")
        for ceiling in column["ceilings"]:
            lines.append(f"| {_ceiling_name(ceiling['label'])} (the ceiling) | " + " | ".join(
                _steps(ceiling["teacher_steps"]) if n == ceiling["gold_labels"] else "" for n in counts) + " |")
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
            if base.get("flag"):  # read against a baseline that cannot be read: the figures stand, the verdict not
                saved += " ⚠ (its baseline cannot be read)"
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
            flag = flag_text(line, line["flag"]) if line.get("flag") else ""
            points = ([line["untrained"]] if line.get("untrained") else []) + line["points"]
            for point in points:
                steps = point["teacher_steps"]
                subset = point.get("test_subset") or {}
                for metric in (*METRICS, "scored_uncertainty"):
                    if metric not in point:  # the untrained point has a teacher score only
                        continue
                    mean, std, n = point[metric]
                    records.append({"grid": spec["grid"], "column": column["column"], "row": line["label"],
                                    "strategy": line["strategy"], "experiment": line["experiment"],
                                    "baseline": line["baseline"], "round": point["round"],
                                    "point": "untrained" if point["round"] is None else "round",
                                    "gold_labels": point["gold_labels"],
                                    "metric": metric, "mean": mean, "std": std, "n_seeds": n,
                                    "teacher_steps": _steps(steps) if steps else "",
                                    "test_pairs": subset.get("pairs") if metric == "teacher_spearman" else None,
                                    "unreadable": flag})
        for ceiling in column["ceilings"]:
            mean, std, n = ceiling["teacher_spearman"]
            records.append({"grid": spec["grid"], "column": column["column"], "row": ceiling["label"],
                            "strategy": "all gold", "experiment": ceiling["experiment"], "baseline": "", "round": None,
                            "point": "ceiling", "gold_labels": ceiling["gold_labels"], "metric": "teacher_spearman",
                            "mean": mean, "std": std, "n_seeds": n,
                            "teacher_steps": _steps(ceiling["teacher_steps"]) if ceiling["teacher_steps"] else "",
                            "test_pairs": None, "unreadable": ""})
    return pd.DataFrame.from_records(records).astype({"round": "Int64", "test_pairs": "Int64"})


def line_chart(spec: dict, columns: list[dict], path: Path) -> list[str]:
    """Draw the chart to `path`; returns the texts written on it (the title, the axes' notes)."""
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
                start = [line["untrained"]] if line.get("untrained") and metric == "teacher_spearman" else []
                points = [p for p in start + line["points"] if p[metric][0] is not None]
                if not points:
                    continue
                x = np.array([p["gold_labels"] for p in points], dtype=float)
                mean = np.array([p[metric][0] for p in points])
                std = np.array([p[metric][1] or 0.0 for p in points])
                (drawn,) = ax.plot(x, mean, marker="o", label=line["label"] + (" ⚠ cannot be read" if line.get("flag")
                                                                               else ""))
                ax.fill_between(x, mean - std, mean + std, color=drawn.get_color(), alpha=0.18, linewidth=0)
            if metric == "teacher_spearman" and any(line.get("untrained") for line in column["lines"]):
                ax.axvline(0, color="black", linewidth=0.6, alpha=0.4)
                ax.annotate("untrained", (0, 0), xycoords=("data", "axes fraction"), xytext=(3, 3),
                            textcoords="offset points", fontsize=7, alpha=0.7)
            warned = [line for line in column["lines"] if line.get("flag")]
            if metric == "teacher_spearman" and warned:  # said on the chart's face, not only in the table
                ax.text(0.02, 0.98, "\n".join(_wrap("⚠ " + flag_text(line, line["flag"])) for line in warned),
                        transform=ax.transAxes, va="top", fontsize=6.5, color="firebrick",
                        bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "firebrick"})
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
    unreadable = any(line.get("flag") for c in columns for line in c["lines"])
    fig.suptitle(f"{spec['grid']}: mean ± std over seeds" + (" (⚠ a random baseline falls: cannot be read)"
                                                             if unreadable else ""),
                 color="firebrick" if unreadable else "black")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    texts = [fig.get_suptitle()] + [t.get_text() for ax in fig.axes for t in ax.texts]
    plt.close(fig)
    return texts


def _wrap(text: str, width: int = 95) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def run(spec: dict, results_dir: str | Path, out: str | Path) -> str:
    """Write the grid's curve files (`out` = results/tables/<grid>.curve.md; .csv and .png beside it)."""
    drawn = {}

    def siblings(out: Path) -> str:
        drawn["columns"], docs = collect(spec, results_dir)
        text = markdown(spec, drawn["columns"], docs)
        long_table(spec, drawn["columns"]).to_csv(out.with_suffix(".csv"), index=False)
        line_chart(spec, drawn["columns"], out.with_suffix(".png"))
        return text

    text = write_with_siblings(out, siblings)
    # into the job's log (the run's console prints the grid table's, augsbert.reporting.console)
    for line in flags(drawn["columns"]):
        print(f"augsbert: warning: {spec['grid']}: {line}", file=sys.stderr, flush=True)
    return text
