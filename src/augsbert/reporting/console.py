"""The table of a finished target, for the console: what a run ends with (workflow/Snakefile `onsuccess`).

results/tables/<grid>.md: the rendered table up to its list of experiments; results/<experiment>.json:
one line per model with its test Spearman and Pearson (× 100, mean ± std over the seeds). Other targets
print nothing. `python -m augsbert.reporting.console PATH...` prints the same (the Makefile's demo).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

from ..stages.teacher import TEACHER
from ..store.artifacts import DamagedArtifactError
from ..store.results_files import read_results
from .curves import falling, flag_text, line_points, teacher_curve, untrained_point
from .layout import numbered_title, row_kind, row_label, table_rows

PRINT_ENV = "AUGSBERT_PRINT_TABLES"  # "0": the run prints no table at its end (the Makefile prints it itself)


def _cell(stats: dict | None) -> str:
    if not stats or stats.get("mean") is None:
        return "–"
    std = stats.get("std")
    return f"{stats['mean']:.2f}" + (f" ± {std:.2f}" if std is not None and stats.get("n", 1) > 1 else "")


def human_name(role: str, arch: str, config: dict | None = None) -> str:
    """A results file's model role as the grid tables title it ("SBERT (lower bound)", "CBE (upper bound)",
    "AugSBERT (static)": the kind its experiment's `config` gives it)."""
    if role in table_rows() or numbered_title(role, arch):
        return row_label(role, arch, [], kind=row_kind(role, config or {}))
    return role


def results_table(path: Path) -> str:
    """The models' lines of results file `path`; the one line saying why, for a file not as collected
    (augsbert.store.results_files: an edited results file is not shown as measured)."""
    try:
        doc = read_results(path)
    except DamagedArtifactError as err:
        return str(err)
    rows = [("model", "Spearman", "Pearson")]
    arch = str(((doc.get("config") or {}).get(TEACHER.section) or {}).get("arch") or "").upper()
    for name, model in doc.get("models", {}).items():
        summary = model.get("summary", {})
        rows.append((human_name(name, arch, doc.get("config") or {}), _cell(summary.get("spearman")),
                     _cell(summary.get("pearson"))))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    seeds = doc.get("seeds", [])
    over = (f"seed {seeds[0]}" if len(seeds) == 1 else
            f"mean ± std over seeds {', '.join(map(str, seeds))}")
    warnings = "".join(f"  - {w}\n" for w in doc.get("warnings") or ())
    return ((f"warnings:\n{warnings}\n" if warnings else "")
            + f"{doc.get('experiment', path.stem)}: test Spearman and Pearson × 100 ({over})\n" + "\n".join(lines)
            + rounds_table(doc, over))


def rounds_table(doc: dict, over: str) -> str:
    """An active-learning experiment's rounds (issue 64 item 13: not only the last round's teacher): per round the
    gold labels, the steps its teacher trained, its test Spearman and its student's, from the untrained teacher (0
    labels) on; and, for the random strategy, the line saying its curve cannot be read. Empty without rounds."""
    if not doc.get("active"):
        return ""
    points, untrained = line_points(doc), untrained_point(doc)
    strategy = next(iter(doc["active"].values())).get("strategy")
    rows = [("round", "gold labels", "steps", "teacher Spearman", "student Spearman")]
    for p in ([untrained] if untrained else []) + points:
        steps = p["teacher_steps"]
        rows.append(("untrained" if p["round"] is None else str(p["round"]), f"{p['gold_labels']:,}",
                     "–" if not steps else f"{steps[0]:,}" if len(steps) == 1 else f"{steps[0]:,}–{steps[-1]:,}",
                     _cell(_stats(p["teacher_spearman"])) + (" †" if p.get("test_subset") else ""),
                     _cell(_stats(p.get("student_spearman")))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    text = "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in rows)
    subset = next((p["test_subset"] for p in points if p.get("test_subset")), None)
    note = (f"\n† on a seeded {subset['pairs']:,} of the {subset['of']:,} test pairs (active.test_pairs)"
            if subset else "")
    flag = falling(teacher_curve({"points": points, "untrained": untrained})) if strategy == "random" else None
    warn = ("\n⚠ " + flag_text({"label": "random"}, flag)) if flag else ""
    return f"\n\nactive learning, {strategy} ({over}):\n{text}{note}{warn}"


def _stats(summary) -> dict | None:
    """A curve point's (mean, std, seeds) as a results summary."""
    if not summary or summary[0] is None:
        return None
    return {"mean": summary[0], "std": summary[1], "n": summary[2]}


def table_text(path: str | Path) -> str | None:
    """The console text of target `path`, or None for a target without a table (or not there)."""
    path = Path(path)
    if not path.is_file():
        return None
    if re.fullmatch(r"results/tables/[^/]+\.md", path.as_posix().removeprefix("./")) or path.suffix == ".md":
        text = path.read_text().split("\n## Experiments", 1)[0].rstrip()
        curve = path.with_name(f"{path.stem}.curve.md")
        if not path.name.endswith(".curve.md") and curve.is_file():  # its curve's flags, on the run's console too
            flagged = [line for line in curve.read_text().splitlines() if line.startswith("- ⚠ ")]
            text += (f"\n\nlabel-budget curves: {curve}" + "".join(f"\n{line}" for line in flagged))
        return text
    if path.suffix == ".json" and path.parent.name == "results":
        try:
            return results_table(path)
        except (ValueError, AttributeError, TypeError):  # not a results file after all
            return None
    return None


def print_tables(targets: Iterable[str], stream=None) -> None:
    stream = stream or sys.stdout
    for target in sorted(targets):
        text = table_text(target)
        if text:
            print(f"\n{target}:\n\n{text}\n", file=stream, flush=True)


if __name__ == "__main__":  # pragma: no cover
    print_tables(sys.argv[1:])
