"""Experiment grids: one config section that expands to many named experiments.

A grid names its `columns` (usually datasets, each an experiment override such
as `{dataset: bws_cross_topic}` or `{source: stsb, dataset: bws_cross_topic}`)
and its `axes` (each value an experiment override). Every combination of axis
values, in every column, becomes an ordinary experiment named
`<grid>.<value>_<value>.<column>` (`<grid>.<column>` without axes), so it is
planned, cached and shared exactly like a hand-written one. `results/tables/
<grid>.md` later lays the experiments out as the thesis does: rows = methods,
columns = datasets.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from . import renames
from .merging import deep_merge
from .yaml_files import read_yaml


@dataclass(frozen=True)
class Cell:
    combo: tuple[tuple[str, str], ...]  # ((axis, value label), ...) in axis order
    column: str
    experiment: str


def experiment_name(grid: str, combo: tuple[tuple[str, str], ...], column: str) -> str:
    values = "_".join(value for _, value in combo)
    return f"{grid}.{values}.{column}" if values else f"{grid}.{column}"


def combos(grid: dict) -> list[tuple[tuple[str, str], ...]]:
    """Every combination of axis values, first axis slowest (the table's row order)."""
    axes = grid.get("axes") or {}
    return [tuple(zip(axes, values)) for values in itertools.product(*(list(v) for v in axes.values()))]


def cells(name: str, grid: dict) -> list[Cell]:
    return [Cell(combo, column, experiment_name(name, combo, column))
            for combo in combos(grid) for column in grid["columns"]]


def expand_grids(config: dict) -> dict:
    """Add every grid cell to `experiments` (raw overrides, before the merge over `defaults`)."""
    out = copy.deepcopy(config)
    experiments = out.setdefault("experiments", {}) or {}
    out["experiments"] = experiments
    for name, grid in (out.get("grids") or {}).items():
        if not isinstance(grid, dict) or not isinstance(grid.get("columns"), dict) or not grid["columns"]:
            raise ConfigError(f"grids.{name}.columns: give at least one column, e.g. `{{lee: {{dataset: lee}}}}`")
        for axis, values in (grid.get("axes") or {}).items():
            if not isinstance(values, dict) or not values:
                raise ConfigError(f"grids.{name}.axes.{axis}: give a mapping of value label -> experiment overrides")
        axes = grid.get("axes") or {}
        for cell in cells(name, grid):
            if cell.experiment in experiments:
                raise ConfigError(f"grids.{name}: expands to experiment '{cell.experiment}', which `experiments` "
                                  "already defines; rename the grid, an axis value or a column")
            section = copy.deepcopy(grid.get("options") or {})
            for axis, value in cell.combo:
                section = deep_merge(section, axes[axis][value] or {})
            section = deep_merge(section, grid["columns"][cell.column] or {})
            section.setdefault("dataset", cell.column)
            if grid.get("seeds") is not None:
                section.setdefault("seeds", grid["seeds"])
            labels = ", ".join(f"{axis}={value}" for axis, value in cell.combo)
            section.setdefault("description", f"grid {name}: {labels or 'single cell'}, column {cell.column}")
            experiments[cell.experiment] = section
    return out


GRIDS_DIR = "grids"  # beside a config file: one YAML file per grid, named as the grid


def with_grid_files(raw: dict, directories: list[Path]) -> dict:
    """`raw` with the grids of `<directory>/<grid>.yaml` files; the config's own `grids:` merge over them.

    The shipped grids live in config/grids/, read with config/config.yaml by the workflow and the CLI, so
    a user's `grids:` (in the config or another --configfile) adds grids or changes a shipped one.
    """
    files: dict = {}
    for directory in directories:
        for path in sorted(Path(directory).glob("*.yaml")):
            body = read_yaml(path)
            if not isinstance(body, dict):
                raise ConfigError(f"{path}: a grid file holds one grid, a mapping (description, columns, axes, ...)")
            files[path.stem] = renames.grid_file(body, str(path))
    if not files or not isinstance(raw, dict) or not isinstance(raw.get("grids", {}) or {}, dict):
        return raw  # nothing to add, or a config the schema rejects with its own message
    return {**raw, "grids": deep_merge(files, raw.get("grids") or {})}
