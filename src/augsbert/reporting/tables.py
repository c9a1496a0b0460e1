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
from ..store.artifacts import DamagedArtifactError, write_with_siblings
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
    "sentences_per_s": ("Sentences per second encoding the test sentences, measured in each student job on its "
                        "device under the load it met (beside each figure: the 1-min load average, the job's own "
                        "threads included, and its cores); figures measured under other loads do not compare"),
    "model_size_mb": "Model size on disk, MB",
    "dev_spearman": "Spearman ρ × 100 on the dev split the model was selected on",
    "prompted_spearman": "Spearman ρ × 100 on the target test split, both sentences topic-prompted",
    "prompted_topic_macro_f1": "Topic classification macro-F1 × 100 on topic-prompted sentences (frozen encoder)",
    # a parallel dataset's figures per language (the column's; stage language_suite, docs/methods/multilingual.md)
    "sts_l_l": "Monolingual STS (l-l): Spearman ρ × 100 on the test pairs translated into the column's language",
    "sts_en_l": "Cross-lingual STS (en-l): sentence1 English, sentence2 in the column's language, Spearman ρ × 100",
    "sts_l_en": "Cross-lingual STS (l-en): sentence1 in the column's language, sentence2 English, Spearman ρ × 100",
    "translation_acc": ("Translation retrieval accuracy × 100: each English test sentence's own translation is the "
                        "nearest (cosine) of all the column's language's test sentences"),
    "unk_share": ("[UNK] tokens per 100 tokens of the column's language's test sentences (the model's vocabulary: "
                  "what it cannot read)"),
}
# Short column heads of the overview table (one dataset column, metrics side by side, as thesis Table 6.10)
METRIC_HEADS = {"askubuntu_map": "AskU", "cqadupstack_map@100": "CQADup", "twitterpara_ap": "TwitterP",
                "scidocs_map": "SciDocs", "useb_avg": "USEB Avg.", "sts_avg": "STS Avg.", "spearman": "Test ρ",
                "pearson": "Test r", "dev_spearman": "Dev ρ", "topic_macro_f1": "Raw F1",
                "prompted_topic_macro_f1": "Prompted F1", "prompted_spearman": "Prompted ρ",
                "ndcg@10": "nDCG@10", "mrr@10": "MRR@10", "recall@100": "R@100", "sentences_per_s": "Sent./s",
                "model_size_mb": "MB", "sts_l_l": "l-l ρ", "sts_en_l": "en-l ρ", "sts_l_en": "l-en ρ",
                "translation_acc": "Transl. acc.", "unk_share": "[UNK] %"}
# Figures the tables show as measured, not as correlations x 100 (the overview's heading says which)
UNSCALED = ("sentences_per_s", "model_size_mb", "alignment", "uniformity")
SPEED = "sentences_per_s"  # measured in each job under the load it met: labelled with it (`measured_under`)


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
                measured = measured_under((model or {}).get("per_seed") or {}) \
                    if metric == SPEED and not _missing(stats["mean"]) else ""
                records.append({"grid": spec["grid"], "row": order, "method": row["label"], "role": row["role"],
                                "column": column, "experiment": experiment, "metric": metric,
                                "mean": stats["mean"], "std": stats["std"], "n_seeds": stats["n"],
                                "seeds": " ".join(map(str, docs[experiment]["seeds"])),
                                "measured_under": measured, "planned_seeds": len(docs[experiment]["seeds"])})
    return pd.DataFrame.from_records(records), docs


def measured_under(per_seed: dict[str, dict]) -> str:
    """What a model's speed was measured under, over its seeds (augsbert.training.pair_job.speed_conditions):
    `load 9.1 on 2 cores` / `load 0.4–9.1 on 2 cores`, a GPU named first; `load not recorded` for results
    collected before the jobs recorded it."""
    entries = [e for e in per_seed.values() if isinstance(e.get(SPEED), (int, float))]
    loads = [e["speed_load"] for e in entries if isinstance(e.get("speed_load"), (int, float))]
    if not loads:
        return "load not recorded"
    cpus = sorted({e["speed_cpus"] for e in entries if isinstance(e.get("speed_cpus"), int)})
    devices = sorted({str(e["speed_device"]) for e in entries if e.get("speed_device") and e["speed_device"] != "cpu"})
    low, high = min(loads), max(loads)
    text = f"load {low:.1f}" + (f"–{high:.1f}" if f"{high:.1f}" != f"{low:.1f}" else "")
    if cpus:
        text += f" on {'/'.join(map(str, cpus))} core{'s' if cpus != [1] else ''}"
    return ", ".join([*devices, text])


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
    warned = _warnings(docs)
    if warned:  # above the scores they bear on (issue 56: the .md and the console's table had none of them)
        lines += ["## Warnings", "", "Recorded by the experiments' jobs (`warnings` of their results files); a test "
                  "pair also seen in training inflates the scores below.", "", *warned, ""]
    with_avg = len(columns) > 1
    if len(columns) == 1 and len(spec["metrics"]) > 1:
        lines += _overview(spec, long)
    for metric in spec["metrics"]:
        part = long[long["metric"] == metric]
        lines += [f"## {METRIC_TITLES.get(metric, metric)}", ""]
        header = ["Method", *columns, *(["Avg."] if with_avg else [])]
        lines += ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        for _, cells in part.groupby("row", sort=True):
            values = [_fmt(r.mean, r.std, r.n_seeds, r.planned_seeds, r.role) + _under(r.measured_under)
                      for r in cells.itertuples()]
            if with_avg:
                means = cells["mean"].tolist()
                complete = not any(_missing(m) for m in means) and metric != SPEED  # loads differ: no average
                values.append(f"{sum(means) / len(means):.2f}" if complete else "–")
            lines.append("| " + " | ".join([cells["method"].iloc[0], *values]) + " |")
        lines.append("")
    notes = _notes(spec, docs)
    if any(doc.get("active") for doc in docs.values()):  # issue 64 item 13: the rounds are not hidden
        notes.append(f"- The active-learning cells' rows are their last round's models (every label of their "
                     f"rounds); each round's teacher (and student), the untrained teacher, the steps each trained "
                     f"and whether the random baseline can be read: results/tables/{spec['grid']}.curve.md.")
    if set(spec["metrics"]) - {"spearman", "pearson"} and any(not row_of(r["role"]).bi_encoder for r in spec["rows"]):
        notes.append("- Evaluation-suite metrics (STS suite, topic, USEB, diagnostics) are computed for "
                     "Bi-Encoders only; teacher rows show – there.")
    if SPEED in spec["metrics"]:
        notes.append("- Sent./s is measured inside each student job, on its device, under whatever load that job "
                     "met; in brackets: the 1-min load average then (the job's own threads included: about 2 when it "
                     "ran alone on 2 cores) and its cores. Figures under different loads do not compare (identical "
                     "models differ up to 9x between load 1 and 10); `benchmarks/bench_encode.py` measures rows side "
                     "by side under one condition.")
    if notes:
        lines += ["## Notes", "", *notes, ""]
    lines += ["## Experiments", "", "| Column | Method | Experiment | Seeds | Config hash |", "|---|---|---|---|---|"]
    for row in spec["rows"]:
        for column in columns:
            doc = docs[row["cells"][column]]
            lines.append(f"| {column} | {row['label']} | `{doc['experiment']}` | "
                         f"{' '.join(map(str, doc['seeds']))} | {doc['config_hash']} |")
    return "\n".join(lines) + "\n"


def _under(measured: str) -> str:
    return f" ({measured})" if measured else ""


def _overview(spec: dict, long: pd.DataFrame) -> list[str]:
    """One dataset column: every metric side by side (the layout of thesis Table 6.10), means only; the speed with
    the load it was measured under."""
    metrics = spec["metrics"]
    unscaled = [METRIC_HEADS.get(m, m) for m in metrics if m in UNSCALED]
    scale = ("× 100" if not unscaled else
             f"scores × 100, {' and '.join(unscaled)} as measured" if len(unscaled) < len(metrics) else "as measured")
    lines = [f"## Overview ({spec['columns'][0]}; mean over seeds; {scale})", "",
             "| " + " | ".join(["Method", *(METRIC_HEADS.get(m, m) for m in metrics)]) + " |",
             "|" + "|".join(["---"] + ["---:"] * len(metrics)) + "|"]
    for _, cells in long.groupby("row", sort=True):
        by_metric = cells.set_index("metric")
        values = ["–" if _missing(by_metric["mean"].get(m)) else
                  f"{by_metric['mean'].get(m):.2f}{_under(by_metric['measured_under'].get(m))}" for m in metrics]
        lines.append("| " + " | ".join([cells["method"].iloc[0], *values]) + " |")
    return [*lines, ""]


def _warnings(docs: dict[str, dict]) -> list[str]:
    """The results files' warnings, each once, with the experiments that recorded it."""
    seen: dict[str, list[str]] = {}
    for experiment, doc in docs.items():
        for warning in doc.get("warnings") or ():
            seen.setdefault(warning, []).append(experiment)
    lines = []
    for warning, experiments in seen.items():
        named = ", ".join(f"`{e}`" for e in experiments[:3]) + (f" and {len(experiments) - 3} more"
                                                                  if len(experiments) > 3 else "")
        lines.append(f"- {warning} ({'every experiment' if len(experiments) == len(docs) > 1 else named})")
    return lines


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
    """Write the grid's table files (`out` = results/tables/<grid>.md; .csv, .png, the logs and figures beside it)."""
    def siblings(out: Path) -> str:
        long, docs = collect(spec, results_dir)
        text = markdown(spec, long, docs)
        long.drop(columns=["row", "planned_seeds"]).to_csv(out.with_suffix(".csv"), index=False)
        bar_chart(spec, long, out.with_suffix(".png"))
        copy_logs_and_figures(docs, out.with_name(f"{spec['grid']}.logs"), out.with_name(f"{spec['grid']}.figures"))
        return text

    return write_with_siblings(out, siblings)
