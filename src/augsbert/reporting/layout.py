"""A grid's table layout: rows = (role, axis values), columns = the grid's columns, from the plan.

Which roles are rows, in which order and under which title, is what their stages declare (`Stage.rows`);
ensemble members and Trans-Encoder rounds are numbered rows placed after the teacher and the student.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..config.grids import cells
from ..store.keys import canonical_json
from ..config.load import ConfigError
from ..config.names import unknown_name
from ..stages import REGISTRY
from ..stages.base import Row, Stage
from ..stages.teacher import TEACHER
from ..planning.graph import SPECS, write_spec

MEMBER_PLACE, ROUND_PLACE = 45, 55  # teacher ensemble members after the teacher; Trans-Encoder rounds after the student


def table_rows() -> dict[str, Row]:
    """Every role that is a row of a grid table: its place (thesis order) and title, as its stage declares them."""
    return {role: row for stage in REGISTRY.values() for role, row in stage.rows.items()}


def row_stages() -> dict[str, Stage]:
    """The stage that declares each row of `table_rows`."""
    return {role: stage for stage in REGISTRY.values() for role in stage.rows}


def row_of(role: str) -> Row:
    """The declared row of `role`; a numbered role (ensemble member, Trans-Encoder round) has the defaults."""
    return table_rows().get(role) or Row(0, role, "")


def row_label(role: str, arch: str, values: list[str], student_title: str = "AugSBERT", kind: str | None = None) -> str:
    """Thesis-style row names: "AugSBERT-BM25", "CBE (upper bound)", "SBERT (lower bound)"; numbered roles:
    "Teacher member 2 (CE)", "Trans-Encoder round 1: CE cross (mutual)"; a row's `kind` (row_kind) after it:
    "AugSBERT (static)"."""
    if role in table_rows() and not table_rows()[role].title:  # the student: the grid's title and axis values
        label = "-".join(part for part in [student_title, *values] if part)
    else:
        title = numbered_title(role, arch) or table_rows()[role].title.format(arch=arch)
        label = f"{title} [{', '.join(values)}]" if values else title
    return f"{label} ({kind})" if kind else label


def row_kind(role: str, config: dict) -> str | None:
    """What kind of model the row of `role` is (its Row's `kind`, from the experiment `config`'s section of its
    stage): "static" for a static student; None for a role without one."""
    row, stage = table_rows().get(role), row_stages().get(role)
    if row is None or row.kind is None or stage is None:
        return None
    return row.kind(config.get(stage.section) or {})


def sets_kind(role: str, axis_value: dict | None) -> bool:
    """Whether an axis value sets an option the kind of `role`'s row reads (its labels then say what it is)."""
    row, stage = table_rows().get(role), row_stages().get(role)
    return (row is not None and stage is not None
            and bool(set(row.kind_options) & set((axis_value or {}).get(stage.section) or {})))


def numbered_title(role: str, arch: str) -> str | None:
    """The title of an ensemble member's or a Trans-Encoder round's row (`arch`: that model's), else None."""
    match = re.fullmatch(r"teacher_member_(\d+)", role)
    if match:
        return f"Teacher member {int(match[1]) + 1} ({arch})"
    match = re.fullmatch(r"te_(cross|bi)_(\d+)(_mutual)?", role)
    if match:
        model = f"{arch} cross" if match[1] == "cross" else "Bi-Encoder"
        return f"Trans-Encoder round {match[2]}: {model}{' (mutual)' if match[3] else ''}"
    return None


def numbered_roles(roles) -> list[str]:
    """Ensemble members and Trans-Encoder rounds among `roles`, in table order (members; rounds, cross first)."""
    found = sorted({r for r in roles if numbered_title(r, "")},
                   key=lambda r: (r.startswith("te_"), [int(n) for n in re.findall(r"\d+", r)], r.startswith("te_bi"),
                                  r.endswith("_mutual")))
    return found


def grid_spec(plan, name: str) -> dict:
    """The table layout of a grid: rows = (role, axis values), columns = the grid's columns.

    A model shared by several cells (the lower bound of every sampling
    variant, the teacher of every student of one teacher, ...) has the same
    node keys there, so it becomes one row labelled only by the axis values
    it depends on.
    """
    grids = plan.config.get("grids") or {}
    if name not in grids:
        raise ConfigError(unknown_name(name, "grid", grids))
    grid = grids[name]
    columns = list(grid["columns"])
    by_combo: dict[tuple, dict[str, str]] = {}
    for cell in cells(name, grid):
        by_combo.setdefault(cell.combo, {})[cell.column] = cell.experiment
    varying = [axis for axis, values in (grid.get("axes") or {}).items() if len(values) > 1]
    rows = []
    planned = {r for exps in by_combo.values() for e in exps.values() for roles in plan.experiments[e].runs.values()
               for r in roles}
    numbered = numbered_roles(planned)
    # members after the teacher (place 45: the ensemble), Trans-Encoder rounds after the student (55)
    places = {**{role: row.place for role, row in table_rows().items()},
              **{r: MEMBER_PLACE if not r.startswith("te_") else ROUND_PLACE for r in numbered}}
    table_roles = sorted(places, key=lambda r: (places[r], numbered.index(r) if r in numbered else 0))
    for role in table_roles:
        groups: dict[tuple, list[tuple]] = {}
        for combo, experiments in by_combo.items():
            signature = tuple(
                tuple(plan.experiments[experiments[c]].runs[s].get(role)
                      for s in plan.experiments[experiments[c]].seeds)
                for c in columns)
            if any(k for keys in signature for k in keys):
                groups.setdefault(signature, []).append(combo)
        for combos in groups.values():
            first = by_combo[combos[0]]
            arch = arch_title(plan, role, plan.experiments[first[columns[0]]])
            # an axis that sets the arch of a row's model is already in its title ("CE (upper bound)")
            fixed = [grid["labels"].get(value, value) for axis, value in combos[0]
                     if axis in varying and all(dict(c)[axis] == value for c in combos)
                     and not sets_title_arch(role, grid["axes"][axis][value])]
            # a kind no varying axis names ("static": the grid's options or a one-value axis set it) is said
            named = any(sets_kind(role, grid["axes"][axis][value]) for axis in varying for value in grid["axes"][axis])
            kind = None if named else row_kind(role, plan.experiments[first[columns[0]]].config)
            rows.append({"label": row_label(role, arch, fixed, grid["student_title"], kind), "role": role,
                         "cells": {c: first[c] for c in columns}})
    return {"grid": name, "description": grid["description"], "metrics": grid["metrics"], "columns": columns,
            "rows": rows, "experiments": sorted({e for exps in by_combo.values() for e in exps.values()})}


def sets_title_arch(role: str, axis_value: dict | None) -> bool:
    """Whether an axis value sets the arch (in the section of the stage declaring `role`'s row) that the row's
    title shows as `{arch}`."""
    stage = row_stages().get(role)
    return (stage is not None and "{arch}" in stage.rows[role].title
            and "arch" in ((axis_value or {}).get(stage.section) or {}))


def arch_title(plan, role: str, exp) -> str:
    """What a row title says of the model's architecture: its stage's `row_arch` (a teacher's arch, an ensemble's
    members), else the experiment's teacher arch."""
    key = exp.runs[exp.seeds[0]].get(role)
    node = plan.nodes[key] if key else None
    if node is not None and REGISTRY[node.stage].row_arch is not None:
        return REGISTRY[node.stage].row_arch(plan, node)
    return exp.config[TEACHER.section]["arch"].upper()


def grid_spec_file(plan, name: str) -> str:
    """`@<path>` of a grid's spec file (artifacts/.specs/tables/<name>.json)."""
    return "@" + write_spec(Path(SPECS) / "tables" / f"{name}.json", canonical_json(grid_spec(plan, name)))
