"""Config sections renamed to their stage's name (issues 48, 59): a user's config with an old name still loads.

Each old section name found where stage options stand (`defaults`, an experiment, a grid's `options`, one of its
axis values or columns) is read as the new one, with one line on stderr naming the file and the key:

    config.yaml: defaults.silver is now `labels`; read as `labels` (rename it)

A place that sets both the old and the new name is refused (which one was meant is not known).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError

# accepted until the first release (pyproject's version is still the first one's), as the stages' former names
RENAMED_SECTIONS = {"silver": "labels", "sampling": "candidates", "adapt_mlm": "adapt", "evaluation": "suite"}
# set by `augsbert run` for the Snakemake it starts, which reads the same config again: the notice was said once
SAID = "AUGSBERT_RENAMES_SAID"


def _section(options: Any, where: str, source: str) -> Any:
    """`options` (stage options at `where`) with old section names replaced, warning once per key."""
    if not isinstance(options, Mapping) or not set(options) & set(RENAMED_SECTIONS):
        return options
    out = {}
    for key, value in options.items():
        new = RENAMED_SECTIONS.get(key)
        if new is None:
            out[key] = value
            continue
        if new in options:
            raise ConfigError(f"{source}: {where}.{key} and {where}.{new} are both set; `{key}` is the old name of "
                              f"`{new}`: keep `{new}` only")
        if os.environ.get(SAID) != "1":
            print(f"{source}: {where}.{key} is now `{new}`; read as `{new}` (rename it)", file=sys.stderr)
        out[new] = value
    return out


def _grid(grid: Any, where: str, source: str) -> Any:
    if not isinstance(grid, Mapping):
        return grid
    grid = dict(grid)
    if "options" in grid:
        grid["options"] = _section(grid["options"], f"{where}.options", source)
    for part in ("axes", "columns"):
        values = grid.get(part)
        if not isinstance(values, Mapping):
            continue
        if part == "columns":
            grid[part] = {c: _section(v, f"{where}.columns.{c}", source) for c, v in values.items()}
        else:
            grid[part] = {a: {label: _section(v, f"{where}.axes.{a}.{label}", source) for label, v in vals.items()}
                          if isinstance(vals, Mapping) else vals for a, vals in values.items()}
    return grid


def grid_file(body: Any, source: str) -> Any:
    """A grid file's grid (config/grids/<grid>.yaml) with old section names replaced."""
    return _grid(body, "grid", source)


def config_file(raw: Any, source: str = "config") -> Any:
    """A config as written (`source`: the file it was read from) with old section names replaced."""
    if not isinstance(raw, Mapping):
        return raw
    raw = dict(raw)
    if "defaults" in raw:
        raw["defaults"] = _section(raw["defaults"], "defaults", source)
    if isinstance(raw.get("experiments"), Mapping):
        raw["experiments"] = {name: _section(exp, f"experiments.{name}", source)
                              for name, exp in raw["experiments"].items()}
    if isinstance(raw.get("grids"), Mapping):
        raw["grids"] = {name: _grid(grid, f"grids.{name}", source) for name, grid in raw["grids"].items()}
    return raw
