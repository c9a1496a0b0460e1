"""The quality / speed / size frontier of the compact students (issue 58; docs/guide/compact.md "The frontier"):
benchmarks/frontier.py measures each row and seed, this module summarises the rows over seeds, marks the
Pareto-optimal ones, writes the table and the plot, and picks the row `augsbert export --pick-fastest-within`
exports.

A row's quality is its test Spearman x 100 (mean and std over seeds), its speed the CPU sentences per second that
one benchmark process measured for every row under one condition (frontier_speed.py; mean over seeds), its size
the megabytes its backend reads. A row is Pareto-optimal when no other row is at least as fast and at least as
good, and better in one of the two.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

FRONTIER_DIR = "results/frontier"


def summarise(measured: list[dict]) -> list[dict]:
    """Per-seed entries ({row, label, seed, spearman, sentences_per_s, size_mb, experiment, backend, quantize,
    dim}) -> one row each, in the order first seen: spearman mean / std / n, mean speed, mean size, and `pareto`."""
    rows: dict[str, dict] = {}
    for entry in measured:
        row = rows.setdefault(entry["row"], {k: entry.get(k) for k in ("row", "label", "experiment", "backend",
                                                                         "quantize", "dim", "file")}
                              | {"per_seed": {}})
        row["per_seed"][str(entry["seed"])] = {k: entry.get(k) for k in ("spearman", "sentences_per_s", "size_mb")}
    for row in rows.values():
        seeds = list(row["per_seed"].values())
        quality = [s["spearman"] for s in seeds if s["spearman"] is not None]
        row["spearman"] = round(statistics.mean(quality), 2) if quality else None
        row["spearman_std"] = round(statistics.stdev(quality), 2) if len(quality) > 1 else None
        row["seeds"] = len(quality)
        speeds = [s["sentences_per_s"] for s in seeds if s["sentences_per_s"]]
        row["sentences_per_s"] = round(statistics.mean(speeds), 1) if speeds else None
        sizes = [s["size_mb"] for s in seeds if s["size_mb"] is not None]
        row["size_mb"] = round(statistics.mean(sizes), 1) if sizes else None
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


def pick_fastest_within(frontier: dict, points: float) -> dict:
    """The fastest row whose mean test Spearman is at most `points` below the reference row's (the full student);
    rows that are a Matryoshka cut of another row (their speed is that row's: the whole vector is computed) are
    not candidates."""
    rows = frontier["rows"]
    reference = next((r for r in rows if r["row"] == frontier["reference"]), None)
    if reference is None or reference.get("spearman") is None:
        raise ValueError(f"the frontier has no measured reference row `{frontier['reference']}`")
    floor = reference["spearman"] - points
    candidates = [r for r in rows if r.get("dim") is None and r.get("spearman") is not None
                  and r.get("sentences_per_s") and r["spearman"] >= floor]
    return max(candidates, key=lambda r: (r["sentences_per_s"], r["spearman"]))


def markdown(frontier: dict) -> str:
    """The frontier table: one line per row, the Pareto-optimal ones marked, and how it was measured."""
    condition = frontier.get("condition") or {}
    reference = next((r for r in frontier["rows"] if r["row"] == frontier["reference"]), {})
    lines = [f"| row | test Spearman | vs {reference.get('label', frontier['reference'])} | CPU sentences/s | "
             "speed-up | size MB | Pareto |", "| --- | ---: | ---: | ---: | ---: | ---: | :---: |"]
    for row in frontier["rows"]:
        quality = "–" if row.get("spearman") is None else f"{row['spearman']:.2f}" + (
            f" ± {row['spearman_std']:.2f}" if row.get("spearman_std") is not None else "")
        delta = "–" if row.get("spearman") is None or reference.get("spearman") is None else \
            f"{row['spearman'] - reference['spearman']:+.2f}"
        speed = "–" if not row.get("sentences_per_s") else f"{row['sentences_per_s']:,.0f}"
        gain = "–" if not row.get("sentences_per_s") or not reference.get("sentences_per_s") else \
            f"{row['sentences_per_s'] / reference['sentences_per_s']:.1f}x"
        size = "–" if row.get("size_mb") is None else f"{row['size_mb']:.1f}"
        lines.append(f"| {row['label']} | {quality} | {delta} | {speed} | {gain} | {size} | "
                     f"{'**yes**' if row.get('pareto') else ''} |")
    lines += ["", f"Seeds {', '.join(map(str, frontier.get('seeds', [])))}; speed: {condition.get('sentences')} "
                  f"STS-B sentences, {condition.get('threads')} threads, best of {condition.get('repeat')}, all "
                  f"rows in one process one after another (load average {condition.get('load_min')}–"
                  f"{condition.get('load_max')} on {condition.get('cpus')} CPUs while they ran); a Matryoshka "
                  "cut (`@d`) encodes at the whole model's speed."]
    return "\n".join(lines)


def plot(frontier: dict, path: str | Path) -> None:
    """Test Spearman against CPU sentences per second (log scale), marker area by size on disk, Pareto-optimal
    rows filled and joined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in frontier["rows"] if r.get("spearman") is not None and r.get("sentences_per_s")]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for at, row in enumerate(sorted(rows, key=lambda r: (r["sentences_per_s"], -r["spearman"]))):
        area = 20 + 3 * (row.get("size_mb") or 0)
        ax.scatter(row["sentences_per_s"], row["spearman"], s=area, alpha=0.85 if row["pareto"] else 0.4,
                   facecolors="C0" if row["pareto"] else "none", edgecolors="C0")
        ax.annotate(f"{row['label']} ({row.get('size_mb', 0):.0f} MB)", (row["sentences_per_s"], row["spearman"]),
                    textcoords="offset points", xytext=(8, 10 - 10 * (at % 3)), fontsize=7)  # neighbours staggered
    front = sorted((r for r in rows if r["pareto"]), key=lambda r: r["sentences_per_s"])
    if len(front) > 1:
        ax.plot([r["sentences_per_s"] for r in front], [r["spearman"] for r in front], "C0--", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("CPU sentences per second (log scale)")
    ax.set_ylabel("STS-B test Spearman x 100")
    ax.set_title(f"{frontier['grid']}: quality, speed and size (filled: Pareto-optimal; area: MB on disk)",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write(frontier: dict, folder: str | Path = FRONTIER_DIR) -> dict[str, Path]:
    """results/frontier/<grid>.json, .md and .png."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {ext: folder / f"{frontier['grid']}.{ext}" for ext in ("json", "md", "png")}
    paths["json"].write_text(json.dumps(frontier, indent=1, allow_nan=False), encoding="utf-8")
    paths["md"].write_text(markdown(frontier) + "\n", encoding="utf-8")
    plot(frontier, paths["png"])
    return paths


def read(path: str | Path) -> dict:
    frontier = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(frontier, dict) or not isinstance(frontier.get("rows"), list) or "reference" not in frontier:
        raise ValueError(f"{path}: not a frontier file (benchmarks/frontier.py writes results/frontier/<grid>.json)")
    return frontier
