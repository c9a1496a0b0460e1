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
            + f"{doc.get('experiment', path.stem)}: test Spearman and Pearson × 100 ({over})\n" + "\n".join(lines))


def table_text(path: str | Path) -> str | None:
    """The console text of target `path`, or None for a target without a table (or not there)."""
    path = Path(path)
    if not path.is_file():
        return None
    if re.fullmatch(r"results/tables/[^/]+\.md", path.as_posix().removeprefix("./")) or path.suffix == ".md":
        return path.read_text().split("\n## Experiments", 1)[0].rstrip()
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
