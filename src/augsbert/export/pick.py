"""`augsbert export --pick-fastest-within POINTS --frontier GRID|FILE`: the frontier row it exports (the fastest whose
mean test Spearman is at most POINTS below the full student's), read from a frontier augsbert.export.frontier
measured. Light (no pandas, no model library): the command line imports it with its parser."""

from __future__ import annotations

import logging

from ..reporting.frontier import column_of, grid_or_file, pick_fastest_within, read
from .export import ExportError

log = logging.getLogger(__name__)


def read_frontier(value: str) -> dict:
    """The frontier `--frontier` names (a grid's name: results/tables/<grid>.frontier.json, or a file); one line
    naming the file and what is wrong where it cannot be read or is no frontier."""
    path = grid_or_file(value)
    try:
        return read(path)
    except FileNotFoundError:
        grid = path.name.removesuffix(".frontier.json") if path.name.endswith(".frontier.json") else None
        raise ExportError(f"--frontier {value}: no file {path}" + (
            f"; measure the grid's frontier first: `snakemake --cores 2 results/tables/{grid}.frontier.md`"
            if grid else "")) from None
    except (OSError, ValueError) as err:
        raise ExportError(f"--frontier {err}") from None


def picked(value: str, points: float, column: str | None = None) -> tuple[dict, dict]:
    """The frontier row `--pick-fastest-within POINTS` exports, and the frontier; says which, with its figures."""
    frontier = read_frontier(value)
    try:
        chosen = column_of(frontier, column)
        row = pick_fastest_within(chosen, points)
    except ValueError as err:
        raise ExportError(f"--frontier {value}: {err}") from None
    reference = next(r for r in chosen["rows"] if r["row"] == chosen["reference"])
    log.warning("picked %s: test Spearman %.2f (%s %.2f, within %.2f), %s sentences/s (%.1fx), %s MB", row["label"],
                row["spearman"], reference["label"], reference["spearman"], points, f"{row['sentences_per_s']:,.0f}",
                row["sentences_per_s"] / reference["sentences_per_s"], row["size_mb"])
    return row, frontier
