"""load_spec: read the `--spec` a workflow rule passes to a command (JSON, or @file holding it).

Every command that takes `--spec` reads it the same way: the stage commands
and the aggregate ones in `augsbert.face.cli`, and `augsbert export`, which cli
imports (so the reader lives below both of them).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import ConfigError
from ..config.reading import SPEC_LIMIT, check_depth, read_text
from ..planning.graph import KEY_PATTERN, key_hash
from ..stages import REGISTRY


def load_spec(text: str) -> dict:
    """The spec as a dict; a missing or unreadable @file, invalid JSON or a non-object is a ConfigError
    (one message naming the file, exit code 2)."""
    where = "--spec"
    if text.startswith("@"):
        where = f"--spec {text}"
        try:
            os.stat(text[1:])
        except OSError as err:
            raise ConfigError(f"{where}: cannot read the spec file ({err.__class__.__name__}: "
                              f"{err.strerror or err})") from None
        try:
            text = read_text(text[1:], "spec file", SPEC_LIMIT)  # regular, utf-8, bounded (augsbert.config.reading)
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{where}: not valid JSON ({err})") from None
    except RecursionError:
        raise ConfigError(f"{where}: arrays and objects nested too deep to read; not a spec the workflow "
                          "writes") from None
    check_depth(spec, where)
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: a spec is a JSON object (what the workflow writes to artifacts/.specs/), "
                          f"not {type(spec).__name__}")
    return spec


def check_stage_spec(spec: dict, stage: str, where: str = "--spec") -> None:
    """A stage job's spec is that stage's, its params are those its stage declares (names and types,
    `Stage.params`), and a spec carrying a content key still has the content it names.

    The workflow writes specs whose `key` is `<name>-<hash>` of the stage, its version, the keyed params and
    the input keys: a spec edited by hand (or written by another version of a stage) would otherwise be
    computed and stored under a key that says something else. Specs without such a key (written by hand for
    a standalone run) are checked for their shape only.
    """
    import re

    named = spec.get("stage")
    if named is not None and named != stage:
        raise ConfigError(f"{where}: a spec of stage {named!r}, given to `augsbert {stage.replace('_', '-')}`")
    for field in ("params", "inputs"):
        if not isinstance(spec.get(field), dict):
            found = "missing" if field not in spec else f"a {type(spec[field]).__name__}"
            raise ConfigError(f"{where}: a stage spec holds `params` and `inputs` as JSON objects; `{field}` is "
                              f"{found} (the workflow writes specs to artifacts/.specs/; or plan one with --config)")
    if stage in REGISTRY and REGISTRY[stage].params is not None:  # the stage's own parameter types
        REGISTRY[stage].params.from_json(spec["params"], f"{where} params")
    key = spec.get("key")
    if not (isinstance(key, str) and re.fullmatch(KEY_PATTERN, key) and "params" in spec and named in REGISTRY):
        return
    runtime = set(spec.get("runtime") or ())
    keyed = {k: v for k, v in spec["params"].items() if k not in runtime}
    inputs = {role: Path(path).name for role, path in (spec.get("inputs") or {}).items()}  # paths end in keys
    if key.rsplit("-", 1)[1] != key_hash(named, REGISTRY[named].version, keyed, inputs):
        raise ConfigError(f"{where}: its params or inputs are not those its key {key} was made from (edited by "
                          "hand, or written by another version of the stage): plan it again (`snakemake ...` "
                          "rewrites artifacts/.specs/) rather than editing a spec")


# The fields an experiment's and a grid's spec hold (Plan.experiment_spec / reporting.layout.grid_spec), with their JSON types
AGGREGATE_FIELDS = {
    "experiment": {"experiment": str, "config": dict, "dataset": dict, "config_hash": str, "seeds": list, "runs": dict},
    "grid": {"grid": str, "metrics": list, "columns": list, "rows": list, "experiments": list},
    "curve": {"grid": str, "columns": list, "experiments": list},  # a grid's label-budget curves (render-curve)
    "frontier": {"grid": str, "columns": list, "experiments": list, "settings": dict, "specs": dict},  # `frontier`
}


def check_aggregate_spec(spec: dict, what: str, where: str = "--spec") -> None:
    """An experiment's (`what`: experiment) or a grid's spec has the fields `collect-results`, `export` and
    `render-table` read, with their types: a spec cut short, or another command's, ends with one message naming
    the field instead of a KeyError."""
    names = {dict: "an object", list: "an array", str: "a string"}
    for field, kind in AGGREGATE_FIELDS[what].items():
        if not isinstance(spec.get(field), kind):
            found = "missing" if field not in spec else f"{type(spec[field]).__name__}, not {names[kind]}"
            raise ConfigError(f"{where}: {'an' if what[0] in 'aeiou' else 'a'} {what} spec holds `{field}` as {names[kind]}; it is {found} (the workflow "
                              f"writes {what} specs to artifacts/.specs/; or plan one with --config and "
                              f"--{'experiment' if what == 'experiment' else 'grid'})")
    if what == "experiment":
        for seed, roles in spec["runs"].items():
            for role, node in (roles.items() if isinstance(roles, dict) else [(None, roles)]):
                if not (isinstance(node, dict) and all(isinstance(node.get(k), str) for k in ("key", "stage", "path"))):
                    raise ConfigError(f"{where}: runs.{seed}{'.' + role if role else ''} is not a node (an object "
                                      "with `key`, `stage` and `path`)")
