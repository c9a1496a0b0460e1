"""An experiment's report files, beside its results: `results/<experiment>.report/`.

The `collect_results` rule marks this directory and the results file as report
outputs, so `snakemake --report report.html results/<experiment>.json` shows the
experiment's own figures, not only the rule graph:

- `metrics.csv`: every model (role) and metric, mean, sample std and number of seeds;
- `rounds.csv` (active learning): every seed's rounds, from the untrained teacher on (labels, steps, test scores);
- `training_curves.png`: dev Spearman and training loss per epoch of every model
  trained with a dev split (teacher, lower bound, student), one line per seed;
- `silver_densities.seed<N>.png`: the labelling stage's teacher-score densities.

A figure whose data the experiment does not have (no trained model, no silver
pairs) is not written; the metrics table always is.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd

from ..stages import REGISTRY
from ..stages.active_select import UNTRAINED_ROLE
from ..store.artifacts import read_json
from .layout import table_rows



def metrics_table(result: dict) -> pd.DataFrame:
    rows = [{"model": role, "description": entry["description"], "metric": metric, "mean": s["mean"],
             "std": s["std"], "seeds": s["n"]}
            for role, entry in result["models"].items() for metric, s in entry["summary"].items()]
    return pd.DataFrame(rows, columns=["model", "description", "metric", "mean", "std", "seeds"])


def rounds_table(result: dict) -> pd.DataFrame:
    """An active-learning experiment's rounds, one row per seed and round (the untrained teacher first, round
    `untrained`): labels, the teacher's steps (an ensemble: its members', `;`-separated), test pairs scored and test
    Spearman / Pearson, the student's, and the chosen pairs' mean label and statistic."""
    untrained = ((result.get("models") or {}).get(UNTRAINED_ROLE) or {}).get("per_seed") or {}
    rows = []
    for seed, run in result["active"].items():
        if seed in untrained:
            scores = untrained[seed]
            rows.append({"seed": seed, "round": "untrained", "gold_labels": 0, "added": 0, "teacher_steps": "0",
                         "teacher_test_pairs": scores.get("n_pairs"), "teacher_spearman": scores.get("spearman"),
                         "teacher_pearson": scores.get("pearson")})
        for entry in run["rounds"]:
            teacher, student = entry.get("teacher_test") or {}, entry.get("student_test") or {}
            chosen = entry.get("chosen") or {}
            rows.append({"seed": seed, "round": str(entry["round"]), "gold_labels": entry["gold_labels"],
                         "added": entry["added"], "teacher_steps": ";".join(map(str, teacher.get("steps") or [])),
                         "teacher_test_pairs": teacher.get("test_pairs"), "teacher_spearman": teacher.get("spearman"),
                         "teacher_pearson": teacher.get("pearson"), "student_spearman": student.get("spearman"),
                         "student_pearson": student.get("pearson"),
                         "chosen_mean_label": (chosen.get("scores") or {}).get("mean"),
                         "chosen_mean_uncertainty": chosen.get("mean_uncertainty")})
    return pd.DataFrame(rows, columns=["seed", "round", "gold_labels", "added", "teacher_steps", "teacher_test_pairs",
                                       "teacher_spearman", "teacher_pearson", "student_spearman", "student_pearson",
                                       "chosen_mean_label", "chosen_mean_uncertainty"])


def curve_roles() -> list[str]:
    """The rows whose models train with a dev split (`Row.curves`): teacher, lower bound, student, classifier."""
    return [role for role, row in sorted(table_rows().items(), key=lambda item: item[1].place) if row.curves]


def curves(spec: dict) -> dict[str, dict[str, list[dict]]]:
    """role -> seed -> per-epoch history (dev_spearman, train_loss) of each trained model with a dev split."""
    out: dict[str, dict[str, list[dict]]] = {}
    for seed, roles in spec["runs"].items():
        for role in curve_roles():
            node = roles.get(role)
            if node is None:
                continue
            history = read_json(Path(node["path"]) / "metrics.json").get("dev_history") or []
            if history:
                out.setdefault(role, {})[seed] = history
    return out


def plot_curves(histories: dict[str, dict[str, list[dict]]], title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (dev_ax, loss_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for role, seeds in histories.items():
        for seed, history in seeds.items():
            epochs = [h["epoch"] for h in history]
            label = f"{role} (seed {seed})"
            dev_ax.plot(epochs, [h["dev_spearman"] for h in history], marker="o", label=label)
            loss_ax.plot(epochs, [h["train_loss"] if h.get("train_loss") is not None else float("nan")
                                  for h in history], marker="o", label=label)
    dev_ax.set(xlabel="epoch", ylabel="dev Spearman x 100", title="dev Spearman per epoch")
    loss_ax.set(xlabel="epoch", ylabel="training loss (last logged)", title="training loss per epoch")
    for ax in (dev_ax, loss_ax):
        ax.xaxis.get_major_locator().set_params(integer=True)
    dev_ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(result: dict, spec: dict, out_dir: str | Path) -> list[str]:
    """Write the report files of one experiment into `out_dir`; returns their names.

    Only files this function writes are replaced (old density plots of dropped
    seeds included); anything else a user keeps in a named directory stays.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {name for stage in REGISTRY.values() for name in stage.figures.values()}
    for old in [out_dir / "metrics.csv", out_dir / "rounds.csv", out_dir / "training_curves.png",
                *(p for name in sorted(figures) for p in out_dir.glob(f"{name}.seed*.png"))]:
        old.unlink(missing_ok=True)
    metrics_table(result).to_csv(out_dir / "metrics.csv", index=False)
    if result.get("active"):
        rounds_table(result).to_csv(out_dir / "rounds.csv", index=False)
    histories = curves(spec)
    if histories:
        plot_curves(histories, spec["experiment"], out_dir / "training_curves.png")
    for seed, roles in spec["runs"].items():  # the plots the runs' stages declare (labels: silver densities)
        for entry in roles.values():
            declared = REGISTRY.get(entry["stage"])
            for figure, name in (declared.figures if declared else {}).items():
                plot = Path(entry["path"]) / figure
                if plot.is_file():
                    shutil.copyfile(plot, out_dir / f"{name}.seed{seed}.png")
    return sorted(p.name for p in out_dir.iterdir())
