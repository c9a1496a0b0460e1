"""Schema errors as a user reads them: one line per error naming the key path, an unknown key with a
suggestion, a wrong choice with the choices."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from .grids import cells
from .names import check_name
from .schema import allowed_keys, format_path


def _error_line(error) -> str:
    if "propertyNames" in error.absolute_schema_path:  # a name the schema's name pattern rejects
        try:
            check_name(error.instance, format_path([*error.absolute_path, error.instance]))
        except ConfigError as err:
            return str(err)
    return f"{format_path(error.absolute_path)}: {_short(error.message)}"


def format_errors(errors, limit: int = 10) -> str:
    """One line per schema error, `  key.path: message`, sorted by path."""
    errors = sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])
    return "\n".join(f"  {_error_line(e)}" for e in errors[:limit])


def unknown_key_message(path: list, allowed: set[str]) -> str:
    """Two lines: the key path, then the closest allowed key (or, with none close, what is allowed there)."""
    close = difflib.get_close_matches(str(path[-1]), sorted(allowed), n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"allowed here: {', '.join(sorted(allowed)) or 'none'}"
    return f"unknown key {format_path(path)}\n  {hint}"


def _lookup(tree: Any, path: list) -> tuple[bool, Any]:
    for part in path:
        if isinstance(tree, list) and isinstance(part, int) and 0 <= part < len(tree):
            tree = tree[part]  # an item of a list (`candidates.strategies.0`): issue 56 C8
        elif not isinstance(tree, Mapping) or part not in tree:
            return False, None
        else:
            tree = tree[part]
    return True, tree


def source_path(config: Mapping, path: list) -> list:
    """Where the user wrote the key at `path` of the effective config.

    Experiments are merged over `defaults`, and grid cells are built from the
    grid's options, axis values and column: a misspelt key there shows up in
    every experiment it reaches, but is reported once, where it was written.
    """
    if len(path) < 3 or path[0] != "experiments":
        return path
    name, rest = path[1], list(path[2:])
    found, value = _lookup(config.get("experiments"), [name, *rest])
    in_defaults, default = _lookup(config.get("defaults"), rest)
    if in_defaults and default == value:
        return ["defaults", *rest]
    for grid_name, grid in (config.get("grids") or {}).items():
        for cell in cells(grid_name, grid) if isinstance(grid, Mapping) and isinstance(grid.get("columns"), Mapping) else ():
            if cell.experiment != name:
                continue
            # the merge order is options < axis values < column: the last one that sets the key wrote it
            places = [["grids", grid_name, "columns", cell.column]]
            places += [["grids", grid_name, "axes", axis, label] for axis, label in reversed(cell.combo)]
            places.append(["grids", grid_name, "options"])
            for place in places:
                if _lookup(config, [*place, *rest])[0]:
                    return [*place, *rest]
    return path


def _short(message: str, limit: int = 300) -> str:
    """A schema message cut to `limit` characters: they start with the offending value's repr, which can be long."""
    return message if len(message) <= limit else f"{message[:limit - 40]} ... ({len(message):,} characters)"


def describe_errors(errors, schema: dict, config: Mapping | None = None, limit: int = 10) -> str:
    """The schema errors as a user reads them: an unknown key as its path and a suggestion, the rest one line each.

    jsonschema reports an unknown key as "Additional/Unevaluated properties are not allowed"
    on the enclosing object, and a nested error also makes every sibling key "unevaluated":
    the allowed keys are recomputed here so only keys that are really unknown are named.
    Each problem is reported once, at the place it was written (see `source_path`).
    """
    config = config or {}
    problems: dict[str, str] = {}
    first: dict[str, str] = {}  # a mistyped choice: reported before everything else
    errors = list(errors)
    # a dataset's keys depend on its loader: with the loader mistyped, its other keys are unknown only as a
    # consequence, and reporting them would bury the one mistake made
    bad_loaders = {format_path(list(e.absolute_path)[:-1]) for e in errors
                   if e.validator == "enum" and list(e.absolute_path)[-1:] == ["loader"]}
    for error in errors:
        if error.validator == "enum":
            path = source_path(config, list(error.absolute_path))
            first.setdefault(format_path(path), _choice_line(path, error.instance, error.validator_value))
        elif (error.validator in ("additionalProperties", "unevaluatedProperties")
              and format_path(error.absolute_path) in bad_loaders):
            continue
        elif error.validator in ("additionalProperties", "unevaluatedProperties") and isinstance(error.instance, dict):
            allowed = allowed_keys(error.schema, error.instance, schema)
            for key in error.instance:
                if key not in allowed:
                    path = source_path(config, [*error.absolute_path, key])
                    problems.setdefault(format_path(path), unknown_key_message(path, allowed))
        elif "propertyNames" in error.absolute_schema_path:
            problems.setdefault(format_path([*error.absolute_path, error.instance]), _error_line(error))
        else:
            path = source_path(config, list(error.absolute_path))
            line = f"{format_path(path)}: {_short(error.message)}"
            problems.setdefault(line, line)
    messages = [first[k] for k in sorted(first)] + [problems[k] for k in sorted(problems)]
    if len(messages) == 1:
        return messages[0]
    more = [f"... and {len(messages) - limit} more"] if len(messages) > limit else []
    return "invalid configuration:\n" + "\n".join("  " + m.replace("\n", "\n  ") for m in messages[:limit] + more)


def _choice_line(path: list, value: Any, choices: list) -> str:
    """A value outside an enum: "did you mean" first (a typo is the usual cause), then the choices."""
    names = [str(c) for c in choices]
    close = difflib.get_close_matches(str(value), names, n=1) if isinstance(value, str) else []
    shown = _short(repr(value), 80)
    hint = f"did you mean '{close[0]}'? " if close else ""
    return f"{format_path(path)}: {shown} is not a choice; {hint}choose from {', '.join(names)}"
