"""Render a grid as the thesis lays its results out: rows = methods, columns = datasets, mean ± std.

Reads `results/<experiment>.json` of every cell of the grid (the layout comes
from `augsbert.reporting.layout.grid_spec`) and writes `<grid>.md` (one table per metric), a long
`<grid>.csv` (one row per method, column and metric) and `<grid>.png` (grouped
bar chart of the first metric with std error bars). Beside them, `<grid>.logs/`
collects the log of every stage the grid used and `<grid>.figures/` the
silver-score density plots, so `snakemake --report` can show them.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd

from ..stages import REGISTRY
from ..store.artifacts import DamagedArtifactError, write_text, writer_lock, writing
from ..store.results_files import read_results
from .layout import row_of

METRIC_TITLES = {
    "spearman": "Spearman ρ × 100 on the target test split",
    "pearson": "Pearson r × 100 on the target test split",
    "sts_avg": "STS suite (STS12–16, STS-B, SICK-R) average Spearman × 100",
    "topic_macro_f1": "Topic classification macro-F1 × 100 (frozen encoder, linear head)",
    "useb_avg": "USEB average (AskUbuntu, CQADupStack, TwitterPara, SciDocs) × 100",
    "askubuntu_map": "USEB AskUbuntu MAP × 100",
    "cqadupstack_map@100": "USEB CQADupStack MAP@100 × 100 (forum average)",
    "twitterpara_ap": "USEB TwitterPara AP × 100 (TURL, PIT average)",
    "scidocs_map": "USEB SciDocs MAP × 100 (Cite, Co-Cite, Co-Read, Co-View average)",
    "ndcg@10": "nDCG@10 × 100 on the BEIR-format test qrels (dense retrieval, exact search)",
    "mrr@10": "MRR@10 × 100 on the BEIR-format test qrels",
    "recall@100": "Recall@100 × 100 on the BEIR-format test qrels",
    "sentences_per_s": "Sentences per second encoding the test sentences (the training job's device; noisy)",
    "model_size_mb": "Model size on disk, MB",
    "dev_spearman": "Spearman ρ × 100 on the dev split the model was selected on",
    "prompted_spearman": "Spearman ρ × 100 on the target test split, both sentences topic-prompted",
    "prompted_topic_macro_f1": "Topic classification macro-F1 × 100 on topic-prompted sentences (frozen encoder)",
}
# Short column heads of the overview table (one dataset column, metrics side by side, as thesis Table 6.10)
METRIC_HEADS = {"askubuntu_map": "AskU", "cqadupstack_map@100": "CQADup", "twitterpara_ap": "TwitterP",
                "scidocs_map": "SciDocs", "useb_avg": "USEB Avg.", "sts_avg": "STS Avg.", "spearman": "Test ρ",
                "pearson": "Test r", "dev_spearman": "Dev ρ", "topic_macro_f1": "Raw F1",
                "prompted_topic_macro_f1": "Prompted F1", "prompted_spearman": "Prompted ρ",
                "ndcg@10": "nDCG@10", "mrr@10": "MRR@10", "recall@100": "R@100", "sentences_per_s": "Sent./s",
                "model_size_mb": "MB"}


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _fmt(mean, std, n: int, seeds: int, role: str) -> str:
    """`mean ± std`; `(n=k)` when fewer seeds than planned have a value; no ± for the seed-independent zero-shot."""
    if _missing(mean):
        return "–"
    # one planned seed has no spread to show: no "± 0.00" (issue 50 item 7)
    seeded = row_of(role).seeded
    text = f"{mean:.2f}" if not seeded or seeds == 1 else f"{mean:.2f} ± {std:.2f}"
    return text if not seeded or n >= seeds else f"{text} (n={n})"


def collect(spec: dict, results_dir: str | Path) -> tuple[pd.DataFrame, dict[str, dict]]:
    """Long table of (row, column, metric) -> mean, std, n; plus the results documents read."""
    docs = {e: _results_file(Path(results_dir) / f"{e}.json", spec["grid"]) for e in spec["experiments"]}
    records = []
    for order, row in enumerate(spec["rows"]):
        for column in spec["columns"]:
            experiment = row["cells"][column]
            model = docs[experiment]["models"].get(row["role"])
            for metric in spec["metrics"]:
                stats = (model or {}).get("summary", {}).get(metric) or {"mean": None, "std": None, "n": 0}
                records.append({"grid": spec["grid"], "row": order, "method": row["label"], "role": row["role"],
                                "column": column, "experiment": experiment, "metric": metric,
                                "mean": stats["mean"], "std": stats["std"], "n_seeds": stats["n"],
                                "seeds": " ".join(map(str, docs[experiment]["seeds"])),
                                "planned_seeds": len(docs[experiment]["seeds"])})
    return pd.DataFrame.from_records(records), docs


def _results_file(path: Path, grid: str) -> dict:
    """A grid cell's results document, as collect-results wrote it from artifacts that still hold what they held
    (augsbert.reporting.results.check_results): an edited or stale results file is not published."""
    if not path.exists():  # a folder of that name is named by read_results
        raise DamagedArtifactError(f"{path}: no results file yet (grid {grid} needs it); run the workflow for the "
                                   f"grid's table (`snakemake --cores 2 results/tables/{grid}.md`), which collects "
                                   "it first")
    return read_results(path)


def markdown(spec: dict, long: pd.DataFrame, docs: dict[str, dict]) -> str:
    columns = spec["columns"]
    seeds = sorted({s for d in docs.values() for s in d["seeds"]})
    lines = [f"# {spec['grid']}", ""]
    if spec.get("description"):
        lines += [spec["description"], ""]
    spread = (f"One seed ({seeds[0]}): single runs, no spread" if len(seeds) == 1 else
              f"Mean ± sample standard deviation over seeds {', '.join(map(str, seeds))} ((n=k): only k seeds "
              "have a value; the zero-shot model does not depend on the seed)")
    experiments = f"the {len(docs)} experiments" if len(docs) != 1 else "the experiment"
    lines += [f"{spread}; – = not evaluated (see the notes below). Generated by `augsbert render-table` from "
              f"results/<experiment>.json of {experiments} of this grid.", ""]
    with_avg = len(columns) > 1
    if len(columns) == 1 and len(spec["metrics"]) > 1:
        lines += _overview(spec, long)
    for metric in spec["metrics"]:
        part = long[long["metric"] == metric]
        lines += [f"## {METRIC_TITLES.get(metric, metric)}", ""]
        header = ["Method", *columns, *(["Avg."] if with_avg else [])]
        lines += ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        for _, cells in part.groupby("row", sort=True):
            values = [_fmt(r.mean, r.std, r.n_seeds, r.planned_seeds, r.role) for r in cells.itertuples()]
            if with_avg:
                means = cells["mean"].tolist()
                complete = not any(_missing(m) for m in means)
                values.append(f"{sum(means) / len(means):.2f}" if complete else "–")
            lines.append("| " + " | ".join([cells["method"].iloc[0], *values]) + " |")
        lines.append("")
    notes = _notes(spec, docs)
    if set(spec["metrics"]) - {"spearman", "pearson"} and any(not row_of(r["role"]).bi_encoder for r in spec["rows"]):
        notes.append("- Evaluation-suite metrics (STS suite, topic, USEB, diagnostics) are computed for "
                     "Bi-Encoders only; teacher rows show – there.")
    if notes:
        lines += ["## Notes", "", *notes, ""]
    lines += ["## Experiments", "", "| Column | Method | Experiment | Seeds | Config hash |", "|---|---|---|---|---|"]
    for row in spec["rows"]:
        for column in columns:
            doc = docs[row["cells"][column]]
            lines.append(f"| {column} | {row['label']} | `{doc['experiment']}` | "
                         f"{' '.join(map(str, doc['seeds']))} | {doc['config_hash']} |")
    return "\n".join(lines) + "\n"


def _overview(spec: dict, long: pd.DataFrame) -> list[str]:
    """One dataset column: every metric side by side (the layout of thesis Table 6.10), means only."""
    metrics = spec["metrics"]
    lines = [f"## Overview ({spec['columns'][0]}; mean over seeds, × 100)", "",
             "| " + " | ".join(["Method", *(METRIC_HEADS.get(m, m) for m in metrics)]) + " |",
             "|" + "|".join(["---"] + ["---:"] * len(metrics)) + "|"]
    for _, cells in long.groupby("row", sort=True):
        by_metric = cells.set_index("metric")["mean"]
        values = ["–" if _missing(by_metric.get(m)) else f"{by_metric.get(m):.2f}" for m in metrics]
        lines.append("| " + " | ".join([cells["method"].iloc[0], *values]) + " |")
    return [*lines, ""]


def _notes(spec: dict, docs: dict[str, dict]) -> list[str]:
    """Skipped evaluation tasks, once per column and reason."""
    seen: dict[tuple[str, str], set[str]] = {}
    for row in spec["rows"]:
        for column in spec["columns"]:
            model = docs[row["cells"][column]]["models"].get(row["role"]) or {}
            for task, reason in model.get("skipped", {}).items():  # one line for tasks skipped alike
                seen.setdefault((column, reason.replace(f"/{task}", "/<task>")), set()).add(task)
    # an optional task without its data is not a failure of the run, and the note says so (issue 42)
    return [f"- {column}: {', '.join(sorted(tasks))} not evaluated (optional, not a failure): {reason}"
            for (column, reason), tasks in seen.items()]


def bar_chart(spec: dict, long: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    metric = spec["metrics"][0]
    part = long[long["metric"] == metric]
    order = sorted(part["row"].unique())
    columns = spec["columns"]
    width = 0.8 / max(len(order), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 + len(columns) * len(order) * 0.45), 4.5))
    x = np.arange(len(columns))
    for i, row in enumerate(order):
        rows = part[part["row"] == row].set_index("column").reindex(columns)
        method = rows["method"].dropna().iloc[0]
        means = rows["mean"].astype(float).to_numpy()
        stds = rows["std"].astype(float).fillna(0).to_numpy()
        ax.bar(x + (i - (len(order) - 1) / 2) * width, np.nan_to_num(means), width, yerr=stds, capsize=2,
               label=method)
    ax.set_xticks(x, columns)
    ax.set_ylabel(METRIC_TITLES.get(metric, metric))
    ax.set_title(f"{spec['grid']}: mean ± std over seeds")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def copy_logs_and_figures(docs: dict[str, dict], logs_dir: Path, figures_dir: Path, log_root: str = "logs") -> None:
    """Copy each stage's log (logs/<stage>/<key>.log) and each silver-density plot beside the table."""
    for target in (logs_dir, figures_dir):
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
    for doc in docs.values():
        for key, stage in doc["stages"].items():
            log = Path(log_root) / stage["stage"] / f"{key}.log"
            if log.is_file():
                shutil.copyfile(log, logs_dir / f"{stage['stage']}.{key}.log")
            declared = REGISTRY.get(stage["stage"])
            for figure in declared.figures if declared else ():
                plot = Path(stage["path"]) / figure
                if plot.is_file():
                    shutil.copyfile(plot, figures_dir / f"{doc['experiment']}.{key}.png")


def run(spec: dict, results_dir: str | Path, out: str | Path) -> str:
    """Write the grid's table files; one writer at a time (the lock on the .md covers its siblings)."""
    out = Path(out)
    with writing(out.parent):
        out.parent.mkdir(parents=True, exist_ok=True)
        with writer_lock(out):
            long, docs = collect(spec, results_dir)
            text = markdown(spec, long, docs)
            long.drop(columns=["row", "planned_seeds"]).to_csv(out.with_suffix(".csv"), index=False)
            bar_chart(spec, long, out.with_suffix(".png"))
            copy_logs_and_figures(docs, out.with_name(f"{spec['grid']}.logs"), out.with_name(f"{spec['grid']}.figures"))
            write_text(out, text)  # last and atomic: the .md is what Snakemake requests
    return text
