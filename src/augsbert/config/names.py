"""Names that become paths (experiments, datasets, grids, grid labels): the one pattern the schema keeps,
the checks, and the message for an unknown experiment or grid."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from ..errors import ConfigError
from .schema import load_schema


# ---------------------------------------------------------------- names
# Experiment, grid and dataset names (and a grid's column and axis-value labels)
# become parts of paths and shell commands: results/<experiment>.json,
# results/tables/<grid>.md, logs/... One pattern, kept in the schema, says what
# a name may be; this is the one function that checks it.
NAME_RULE = ("letters, digits, '_' and '-', in parts joined by single dots, starting with a letter or digit "
             "(names become file names)")


@cache
def name_pattern() -> str:
    """The name pattern of the schema without anchors (Snakemake wildcard constraints take it so)."""
    return load_schema()["$defs"]["name"]["pattern"].removeprefix("^").removesuffix("$")


def check_name(name: Any, where: str) -> str:
    """Return `name` if it is a valid name, else raise ConfigError naming `where` (a key path or option)."""
    if not isinstance(name, str):  # YAML reads `1:` or `yes:` as a number or boolean key
        raise ConfigError(f"{where}: invalid name {name!r}: a name is a string (quote it in YAML); use {NAME_RULE}")
    if not re.fullmatch(name_pattern(), name):
        raise ConfigError(f"{where}: invalid name {name[:60]!r}{'...' if len(name) > 60 else ''}: use {NAME_RULE}")
    longest = load_schema()["$defs"]["name"]["maxLength"]  # files are named after it (a file name has 255 bytes)
    if len(name) > longest:
        where = where if len(where) <= 80 else where[:77] + "..."
        raise ConfigError(f"{where}: a name of {len(name)} characters; at most {longest}")
    return name


def check_names(config: Mapping) -> None:
    """Every name before grids expand into experiment names (a bad label would else surface as a bad experiment)."""
    problems = []

    def check(name, where):
        try:
            check_name(name, where)
        except ConfigError as err:
            problems.append(str(err))

    for section in ("datasets", "experiments", "grids"):
        entries = config.get(section)
        for name in entries if isinstance(entries, Mapping) else ():
            check(name, f"{section}.{name}")
    grids = config.get("grids")
    for grid_name, grid in (grids.items() if isinstance(grids, Mapping) else ()):
        grid = grid if isinstance(grid, Mapping) else {}
        columns = grid.get("columns")
        for column in columns if isinstance(columns, Mapping) else ():
            check(column, f"grids.{grid_name}.columns.{column}")
        axes = grid.get("axes")
        for axis, values in (axes.items() if isinstance(axes, Mapping) else ()):
            for value in values if isinstance(values, Mapping) else ():
                check(value, f"grids.{grid_name}.axes.{axis}.{value}")
    if problems:
        raise ConfigError("\n".join(problems))


# where a name of each kind is a Snakemake target, for the hint of `unknown_name`
_TARGETS = {"experiment": "results/{}.json", "grid": "results/tables/{}.md"}


def unknown_name(name: str, kind: str, known) -> str:
    """An unknown experiment or grid: the closest configured names and where to find all of them, instead of
    every name on one line (the shipped config holds hundreds). A name of the user's own config file is
    unknown when that file was not read: the last line says how to give it (Snakemake and the CLI)."""
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    names = [repr(c) for c in close]
    hint = (f"did you mean {' or '.join([', '.join(names[:-1]), names[-1]] if len(names) > 1 else names)}?" if close
            else f"no {kind} has a similar name")
    target = _TARGETS[kind].format(name)
    return (f"unknown {kind} '{name}'\n  {hint}\n  all {len(known)} {kind}s: .venv/bin/augsbert list {kind}s\n"
            f"  defined in a config file of your own? Name that file: snakemake --configfile my.yaml -- {target} "
            "(`--` ends the list of config files), or augsbert ... --config my.yaml")
