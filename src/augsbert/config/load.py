"""Load, coerce, merge and validate the workflow configuration.

The same steps run inside the Snakefile and in the standalone CLI, so a config
that plans in Snakemake plans identically outside it. Order matters:

1. coerce: `snakemake --config 'experiments={x: {student: {lr: 3e-5}}}'` turns
   every nested value into a string; strings are converted back by the types
   the schema declares before anything else looks at them; then the names of
   datasets, experiments, grids and grid labels are checked (they become paths);
2. expand: every `grids` cell becomes a named experiment (augsbert.config.grids);
3. merge: every experiment is deep-merged over `defaults`, so an experiment
   that sets one key inherits the rest (the schema's defaults are filled only
   afterwards, otherwise they would shadow the user's `defaults`);
4. validate with default filling (JSON Schema 2020-12).
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

# ConfigError and deep_merge live in modules of their own that grids can import without importing this
# one back; they are re-exported here, where every caller has always found them.
from ..errors import ConfigError
from ..objectives import pretrain_schema
from .grids import cells, expand_grids
from .merging import deep_merge
from . import reading, rehearsal, renames
from .reading import check_depth, read_text

SCHEMA_RESOURCE = "schemas/config.schema.yaml"
# libyaml's safe loader where PyYAML was built with it: the same documents, ~8x faster on the schema,
# which every dry run and CLI call reads
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@cache
def load_schema(resource: str = SCHEMA_RESOURCE) -> dict:
    """A JSON schema shipped in the package (mirrored in workflow/schemas): the config's by default."""
    text = resources.files("augsbert").joinpath(resource).read_text()
    schema = yaml.load(text, Loader=SAFE_LOADER)
    if resource == SCHEMA_RESOURCE:  # what the objectives' registry declares (one place per objective and option)
        pretrain_schema(schema["$defs"]["stage_options"]["properties"]["pretrain"]["properties"])
    return schema


def _normalise_numbers(obj: Any) -> Any:
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)  # 4 and 4.0 mean the same setting and must hash the same
    if isinstance(obj, dict):
        return {k: _normalise_numbers(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_normalise_numbers(v) for v in obj]
    return obj


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys, no whitespace and integral floats as ints: the input of every hash."""
    return json.dumps(_normalise_numbers(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def short_hash(obj: Any, length: int = 10) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:length]


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


MAX_CONFIG_VALUES = 1_000_000  # the shipped config with all grids holds ~20,000


def _check_size(config: Any) -> None:
    """Refuse a config that expands to more than MAX_CONFIG_VALUES values: YAML aliases can make a few hundred
    bytes stand for gigabytes once walked or printed (a "billion laughs"), and an error message echoing such a
    value took 52 MB. Counting stops at the limit, so the check itself stays cheap."""
    count, stack = 0, [config]
    while stack:
        value = stack.pop()
        count += 1
        if count > MAX_CONFIG_VALUES:
            raise ConfigError(f"the config expands to more than {MAX_CONFIG_VALUES:,} values (YAML anchors and "
                              "aliases repeated into a huge structure?); refusing to read it")
        if isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)


def _check_shapes(config: Any) -> None:
    """The shapes merging and grid expansion rely on, before they run (else `defaults: [1, 2]` or
    `experiments: [x]` end in a traceback from deep_merge / expand_grids instead of a message)."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"the config is a mapping of sections (datasets, defaults, experiments, ...), "
                          f"not {type(config).__name__}")
    if config.get("defaults") is not None and not isinstance(config["defaults"], Mapping):
        raise ConfigError(f"defaults: a mapping of stage sections, not {_not_mapping(config['defaults'], 'defaults')}")
    for section, noun in (("datasets", "dataset"), ("experiments", "experiment"), ("grids", "grid")):
        entries = config.get(section)
        if entries is None:
            continue
        if not isinstance(entries, Mapping):
            raise ConfigError(f"{section}: a mapping of name -> {noun}, not {_not_mapping(entries, section)}")
        for name, entry in entries.items():
            if not isinstance(entry, Mapping):
                raise ConfigError(f"{section}.{name}: each {noun} is a mapping of options, not "
                                  f"{_not_mapping(entry, f'{section}.{name}')}")


def _not_mapping(value: Any, where: str) -> str:
    """What stands where a mapping belongs; for a string (a `snakemake --config` value, read as YAML by
    Snakemake, stays a string when it does not parse: `experiments={a`), why it did not parse."""
    if not isinstance(value, str) or value.strip()[:1] not in ("{", "["):  # a plain string: meant as no mapping
        return type(value).__name__
    try:
        yaml.safe_load(value)
        why = "it is no {key: value} mapping"
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        why = (f"it is not valid YAML: {getattr(err, 'problem', None) or err}"
               + (f" at column {mark.column + 1}" if mark is not None else ""))
    top, _, rest = where.partition(".")
    if value.strip()[:1] == "[":
        why, example = why.replace("no {key: value} mapping", "no list"), f"{where}=[...]"
    elif rest:
        example = f"{top}={{{rest}: {{option: value}}}}"
    else:
        example = f"{top}={{name: {{option: value}}}}"
    return (f"the string {value!r} ({why}); a --config value is YAML in flow style: quote the whole argument, "
            f"e.g. --config '{example}'")


def _check_names(config: Mapping) -> None:
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


# ---------------------------------------------------------------- coercion
def resolve_ref(schema: dict, root: dict) -> dict:
    """Follow local `$ref`s (`#/...`), keeping sibling keywords."""
    while "$ref" in schema and schema["$ref"].startswith("#/"):
        target = root
        for part in schema["$ref"][2:].split("/"):
            target = target[part]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _branches(schema: dict, root: dict) -> list[dict]:
    """The schema plus every sub-schema that may add properties (allOf, then)."""
    schema = resolve_ref(schema, root)
    out = [schema]
    for sub in schema.get("allOf", []):
        out.extend(_branches(sub, root))
        if "then" in sub:
            out.extend(_branches(sub["then"], root))
    return out


def _types(schema: dict) -> list[str]:
    t = schema.get("type", [])
    return [t] if isinstance(t, str) else list(t)


_TRUE = {"true", "yes", "on"}
_FALSE = {"false", "no", "off"}


def _coerce_scalar(value: str, types: list[str], path: tuple = ()) -> Any:
    """Convert a command-line string to the first schema type it parses as (a list or mapping that is no valid
    YAML, `--config 'seeds=[1'`: one message naming the key; it ended in a YAML traceback)."""
    text = value.strip()
    unparsed = False
    if "null" in types and text.lower() in {"null", "none", "~"}:
        return None
    if "string" in types:
        return value
    for t in types:
        try:
            if t == "integer":
                return int(text)
            if t == "number":
                number = float(text)
                return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
            if t == "boolean" and text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
            if t == "null" and text.lower() in {"null", "none", "~", ""}:
                return None
            if t in ("array", "object"):
                try:
                    parsed = yaml.safe_load(text)
                except yaml.YAMLError:
                    if text[:1] in "[{":  # meant as a list or mapping: said below, outside this `except ValueError`
                        unparsed = True
                    continue
                if isinstance(parsed, list if t == "array" else dict):
                    return parsed
        except ValueError:
            continue
    if unparsed:
        where = _format_path(list(path))
        raise ConfigError(f"{where}: {_not_mapping(value, where)}")
    return value  # leave it; validation reports the type error with its path


def coerce(value: Any, schema: dict, root: dict | None = None, path: tuple = ()) -> Any:
    """Return `value` with strings converted to the types `schema` declares (`path`: where `value` stands)."""
    root = root if root is not None else schema
    branches = _branches(schema, root)
    types = [t for b in branches for t in _types(b)]
    if isinstance(value, str) and types and (types != ["string"]):
        value = _coerce_scalar(value, types, path)
    if isinstance(value, dict):
        props: dict[str, dict] = {}
        extra: list[dict] = []
        for b in branches:
            props.update(b.get("properties", {}))
            if isinstance(b.get("additionalProperties"), dict):
                extra.append(b["additionalProperties"])
        return {
            k: coerce(v, props[k], root, (*path, k)) if k in props
            else (coerce(v, extra[0], root, (*path, k)) if extra else v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        items = next((b["items"] for b in branches if isinstance(b.get("items"), dict)), None)
        return [coerce(v, items, root, (*path, i)) for i, v in enumerate(value)] if items else value
    return value


# ---------------------------------------------------------------- validation
def _default_filling_validator(schema: dict):
    """A Draft 2020-12 validator that writes each property's `default` into the instance."""
    from jsonschema import Draft202012Validator, validators

    base_props = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from base_props(validator, properties, instance, schema)

    cls = validators.extend(Draft202012Validator, {"properties": set_defaults})
    return cls(schema)


_VALIDATORS: dict[int, Any] = {}


def _experiment_validator(schema_id: int, schema: dict):
    """One default-filling validator per schema object, reused for every experiment (building one, and
    resolving its `$ref`s afresh, costs more than validating an experiment)."""
    if schema_id not in _VALIDATORS:
        _VALIDATORS.clear()  # schemas are module-level singletons (load_schema); keep at most one
        _VALIDATORS[schema_id] = (schema, _default_filling_validator(schema))
    return _VALIDATORS[schema_id][1]


def _format_path(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _error_line(error) -> str:
    if "propertyNames" in error.absolute_schema_path:  # a name the schema's name pattern rejects
        try:
            check_name(error.instance, _format_path([*error.absolute_path, error.instance]))
        except ConfigError as err:
            return str(err)
    return f"{_format_path(error.absolute_path)}: {_short(error.message)}"


def format_errors(errors, limit: int = 10) -> str:
    """One line per schema error, `  key.path: message`, sorted by path."""
    errors = sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])
    return "\n".join(f"  {_error_line(e)}" for e in errors[:limit])


def allowed_keys(schema: dict, instance: Mapping, root: dict) -> set[str]:
    """Property names `schema` declares for `instance`: its own, those of allOf / $ref, and of each
    `then` whose `if` holds (a dataset's keys depend on its loader)."""
    from jsonschema import Draft202012Validator

    schema = resolve_ref(schema, root)
    names = set(schema.get("properties", {}))
    for sub in schema.get("allOf", []):
        names |= allowed_keys(sub, instance, root)
    if "if" in schema and "then" in schema and Draft202012Validator(schema["if"]).is_valid(instance):
        names |= allowed_keys(schema["then"], instance, root)
    return names


def unknown_key_message(path: list, allowed: set[str]) -> str:
    """Two lines: the key path, then the closest allowed key (or, with none close, what is allowed there)."""
    close = difflib.get_close_matches(str(path[-1]), sorted(allowed), n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"allowed here: {', '.join(sorted(allowed)) or 'none'}"
    return f"unknown key {_format_path(path)}\n  {hint}"


def _lookup(tree: Any, path: list) -> tuple[bool, Any]:
    for part in path:
        if not isinstance(tree, Mapping) or part not in tree:
            return False, None
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
    bad_loaders = {_format_path(list(e.absolute_path)[:-1]) for e in errors
                   if e.validator == "enum" and list(e.absolute_path)[-1:] == ["loader"]}
    for error in errors:
        if error.validator == "enum":
            path = source_path(config, list(error.absolute_path))
            first.setdefault(_format_path(path), _choice_line(path, error.instance, error.validator_value))
        elif (error.validator in ("additionalProperties", "unevaluatedProperties")
              and _format_path(error.absolute_path) in bad_loaders):
            continue
        elif error.validator in ("additionalProperties", "unevaluatedProperties") and isinstance(error.instance, dict):
            allowed = allowed_keys(error.schema, error.instance, schema)
            for key in error.instance:
                if key not in allowed:
                    path = source_path(config, [*error.absolute_path, key])
                    problems.setdefault(_format_path(path), unknown_key_message(path, allowed))
        elif "propertyNames" in error.absolute_schema_path:
            problems.setdefault(_format_path([*error.absolute_path, error.instance]), _error_line(error))
        else:
            path = source_path(config, list(error.absolute_path))
            line = f"{_format_path(path)}: {_short(error.message)}"
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
    return f"{_format_path(path)}: {shown} is not a choice; {hint}choose from {', '.join(names)}"


def validate_with_defaults(config: dict, schema: dict | None = None) -> None:
    """Validate in place, filling defaults; raise ConfigError naming the key path."""
    schema = schema or load_schema()
    # Two passes: the first fills defaults (incl. inside if/then branches),
    # the second reports errors against the filled instance.
    validator = _default_filling_validator(schema)
    list(validator.iter_errors(config))
    errors = list(validator.iter_errors(config))
    if errors:
        raise ConfigError(describe_errors(errors, schema, config))


def merge_experiments(config: dict) -> dict:
    """Deep-merge every experiment over `defaults` (new dict)."""
    out = copy.deepcopy(config)
    defaults = out.get("defaults") or {}
    out["experiments"] = {
        name: deep_merge(defaults, section or {}) for name, section in (out.get("experiments") or {}).items()
    }
    return out


def prepare_config(raw: Mapping, validate: Callable[[dict], None] | None = None, lazy: bool = False) -> dict:
    """Coerce, check names, expand grids, merge and validate a raw config; return the effective config.

    `validate` defaults to the package's own default-filling validator, which the
    Snakefile uses too: a misspelt key reads the same in both (path + suggestion),
    where `snakemake.utils.validate` would print the schema.

    `lazy`: validate everything but the experiments now, and each experiment when it is first
    planned (`Plan` calls `validated_experiment`). The shipped config expands to ~200 experiments
    whose validation costs seconds; a dry run of one target validates and plans that target's
    experiments only, so an experiment nobody asked for never costs time or stops a run.
    """
    schema = load_schema()
    _check_size(raw)
    raw = renames.config_file(raw)  # Snakemake's merged config files: old section names (files read here are done)
    _check_shapes(raw)
    config = coerce(copy.deepcopy(dict(raw)), schema)
    _check_shapes(config)
    _check_names(config)
    config = expand_grids(config)
    # grid axes and columns are free-form overrides: coerce them once they are experiments
    config["experiments"] = coerce(config["experiments"], schema["properties"]["experiments"], schema)
    config = merge_experiments(config)  # over the raw `defaults`, before the top level's defaults are filled
    _check_finite(config)
    if lazy:
        experiments = config.pop("experiments")
        (validate or validate_with_defaults)(config)  # the top level: datasets, defaults, grids, ...
        config["experiments"] = experiments
        return rehearsal.overlay_top(config) if rehearsal.is_on(config) else config
    (validate or validate_with_defaults)(config)  # one pass over everything: faster than one per experiment
    _check_references(config)
    _check_parallel_batches(config)
    if rehearsal.is_on(config):  # a rehearsal: the same experiments, cut (augsbert.config.rehearsal)
        rehearsal.overlay_top(config)
        for exp in config["experiments"].values():
            rehearsal.overlay_experiment(exp)
    return config


def _check_finite(value: Any, path: str = "") -> None:
    """Refuse NaN and infinities anywhere (YAML's .nan / .inf): a schema bound compares false with NaN, so
    `lr: .nan` would pass it and train on NaN, and `score_range: [0, .inf]` would rescale every score to 0."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{path or 'config'}: {value} is not a finite number")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_finite(item, f"{path}[{i}]")


def validated_experiment(config: dict, name: str, schema: dict | None = None) -> dict:
    """Validate experiment `name` of a prepared config in place (defaults filled) and return it.

    Idempotent: validating a filled experiment again changes nothing. Errors name the key where
    the user wrote it (the experiment, `defaults` or a grid's options / axis value / column).
    """
    schema = schema or load_schema()
    exp = experiment_config(config, name)
    # the root schema resolves the experiment's `$ref`s; the wrapper's own top-level defaults are discarded
    wrapper = {"experiments": {name: exp}}
    validator = _experiment_validator(id(schema), schema)
    list(validator.iter_errors(wrapper))
    errors = list(validator.iter_errors(wrapper))
    if errors:
        raise ConfigError(describe_errors(errors, schema, config))
    one = {**config, "experiments": {name: exp}}
    _check_references(one)
    _check_parallel_batches(one)
    return rehearsal.overlay_experiment(exp) if rehearsal.is_on(config) else exp


def _check_parallel_batches(config: dict) -> None:
    """With `gpus` > 1 the teacher's and students' global batch must split evenly (augsbert.training.distributed)."""
    gpus = config.get("gpus", 1)
    for name, exp in config.get("experiments", {}).items() if gpus > 1 else ():
        for stage in ("teacher", "student"):
            size = (exp.get(stage) or {}).get("batch_size")
            if size is not None and size % gpus:
                raise ConfigError(f"experiments.{name}.{stage}.batch_size: {size} is the global batch of {gpus} "
                                  f"processes (gpus: {gpus}) and must be a multiple of {gpus}")


def _check_references(config: dict) -> None:
    datasets = config.get("datasets", {})
    for name, exp in config.get("experiments", {}).items():
        for key in ("dataset", "source"):
            if exp.get(key) is not None and exp[key] not in datasets:
                raise ConfigError(
                    f"experiments.{name}.{key}: unknown dataset '{exp[key]}' "
                    f"(defined under `datasets`: {', '.join(sorted(datasets)) or 'none'})"
                )


GRIDS_DIR = "grids"  # beside a config file: one YAML file per grid, named as the grid


_MERGE_TAG = "tag:yaml.org,2002:merge"


def _duplicate_key(node, path: str = "", seen: set | None = None) -> tuple[int, str, int] | None:
    """The first key written twice in one mapping of the node tree: (line, key path, line of its first use).

    YAML keeps the last of two equal keys without a word, so a setting changed further down a long file
    would silently replace (or be replaced by) one written earlier. Anchored nodes are walked once (an alias
    bomb stays cheap); `<<` merge keys are not duplicates (explicit keys override merged ones by design).
    """
    seen = set() if seen is None else seen
    if id(node) in seen or not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        return None
    seen.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        children = [(f"{path}[{i}]", item) for i, item in enumerate(node.value)]
    else:
        first: dict = {}
        children = []
        for key, value in node.value:
            if key.tag == _MERGE_TAG:
                children.append((path, value))
                continue
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            where = f"{path}.{name}" if path and name is not None else (name if name is not None else path)
            if name is not None:
                line = key.start_mark.line + 1
                if (key.tag, name) in first:
                    return line, where, first[(key.tag, name)]
                first[(key.tag, name)] = line
            children.append((where, value))
    for where, child in children:
        found = _duplicate_key(child, where, seen)
        if found:
            return found
    return None


def _load_yaml(text: str, path: Path):
    """`text` as YAML (the safe loader), refusing a key written twice in one mapping (naming file, line, key)."""
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        duplicate = _duplicate_key(node)
        if duplicate:
            line, key, first = duplicate
            key = key if len(key) <= 80 else key[:77] + "..."
            raise ConfigError(f"{path}:{line}: duplicate key {key} (first written at line {first}); YAML would "
                              "silently keep only the last one: remove or merge one of them")
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _read_yaml(path: Path):
    text = read_text(path, "config file", reading.CONFIG_LIMIT)  # a regular utf-8 file of bounded size
    try:
        loaded = _load_yaml(text, path)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        if mark is not None:  # file:line:column and the problem, not the parser's "<unicode string>" lines
            started = getattr(err, "context_mark", None)
            context = (f" ({err.context}" + (f" at line {started.line + 1}, column {started.column + 1}" if started
                                              else "") + ")") if getattr(err, "context", None) else ""
            raise ConfigError(f"{path}:{mark.line + 1}:{mark.column + 1}: not valid YAML: {err.problem}{context}") from None
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{path}: mappings and lists nested too deep to read; no setting is nested like that: is "
                          "it the right file?") from None
    check_depth(loaded, str(path))
    return loaded


def check_duplicate_keys(path: str | Path) -> None:
    """Raise ConfigError if the YAML file `path` writes a key twice in one mapping (Snakemake's own reading of
    a --configfile keeps the last one silently; the workflow calls this for each config file it read)."""
    _read_yaml(Path(path))


def with_grid_files(raw: dict, directories: list[Path]) -> dict:
    """`raw` with the grids of `<directory>/<grid>.yaml` files; the config's own `grids:` merge over them.

    The shipped grids live in config/grids/, read with config/config.yaml by the workflow and the CLI, so
    a user's `grids:` (in the config or another --configfile) adds grids or changes a shipped one.
    """
    files: dict = {}
    for directory in directories:
        for path in sorted(Path(directory).glob("*.yaml")):
            body = _read_yaml(path)
            if not isinstance(body, dict):
                raise ConfigError(f"{path}: a grid file holds one grid, a mapping (description, columns, axes, ...)")
            files[path.stem] = renames.grid_file(body, str(path))
    if not files or not isinstance(raw, dict) or not isinstance(raw.get("grids", {}) or {}, dict):
        return raw  # nothing to add, or a config the schema rejects with its own message
    return {**raw, "grids": deep_merge(files, raw.get("grids") or {})}


RESULTS_KEYS = {"config_hash", "models", "experiment"}  # top-level keys of results/<experiment>.json
# Snakemake's --configfile takes every path after it up to the next option, so a target written after it is
# read as one more config file; these are the workflow's targets (workflow/rules/*.smk)
TARGET_PATTERN = r"(results/[^/]+\.json|results/tables/[^/]+\.(md|csv|png)|models/[^/]+/[^/]+/?)"


def check_config_file(path: str | Path, body: Any = None, option: str = "--configfile") -> None:
    """Refuse a file given as a config that is not one, saying what happened and where the target goes.

    `body` is the file as read (None: read it here). A results file or a target path read as a config would
    otherwise end in "unknown key config_hash, created, ..." from the validator, which does not say why."""
    text = str(path)
    if Path(text).is_absolute() and not os.path.relpath(text).startswith(".."):
        text = os.path.relpath(text)  # Snakemake passes its config files as absolute paths: as the user wrote it
    if re.fullmatch(TARGET_PATTERN, Path(text).as_posix().removeprefix("./")) or (
            isinstance(body, Mapping) and RESULTS_KEYS <= set(body)):
        what = "a results file" if text.endswith(".json") else "a target of the workflow"
    else:
        body = _read_yaml(Path(path)) if body is None else body
        if body is None or (isinstance(body, Mapping) and set(body) & set(load_schema()["properties"])):
            return  # empty, or a config (what else is wrong in it the validator says)
        if isinstance(body, Mapping) and RESULTS_KEYS <= set(body):
            what = "a results file"
        else:
            keys = list(body)[:4] if isinstance(body, Mapping) else []
            what = (f"not a config (top-level keys {', '.join(map(str, keys))}{', ...' if len(body) > 4 else ''}; a "
                    f"config has {', '.join(load_schema()['properties'])})" if keys else
                    f"not a config (a {type(body).__name__}, not a mapping of config sections)")
    if option == "--configfile":
        raise ConfigError(
            f"{text} was read as a config file, but it is {what}. Snakemake's --configfile takes every path after "
            f"it up to the next option, so a target written after it becomes one more config file: end the config "
            f"files with `--` (snakemake -n --configfile my.yaml -- {text}) or name the targets first")
    raise ConfigError(f"{option} {text}: it is {what}; {option} takes config YAML files (config/config.yaml, "
                      "a file of your own)")


def configfile_args(argv: list[str]) -> list[str]:
    """The paths a Snakemake command line gives to `--configfile` / `--configfiles` (each takes every word after
    it up to the next option)."""
    paths, taking = [], False
    for word in argv:
        if word.startswith("-"):
            flag, eq, value = word.partition("=")
            taking = flag in ("--configfile", "--configfiles") and not eq
            if flag in ("--configfile", "--configfiles") and eq:
                paths.append(value)
        elif taking:
            paths.append(word)
    return paths


def check_configfile_syntax(argv: list[str] | None = None) -> None:
    """Stop with one message naming file, line and column when a `--configfile` of this Snakemake command line
    is not readable YAML (exit 2). Snakemake reads those files before any code of the workflow runs and says
    only "Config file is not valid JSON or YAML"; the workflow profile (profiles/default) calls this while
    Snakemake parses it, which is earlier. A missing file is left to Snakemake's own message."""
    import sys

    for path in configfile_args(sys.argv[1:] if argv is None else argv):
        try:
            # `--configfile my.yaml results/x.json` without `--`: the target is read as a config file, and when it
            # does not exist yet Snakemake ends in a traceback (FileNotFoundError) before any workflow code runs
            if re.fullmatch(TARGET_PATTERN, Path(path).as_posix().removeprefix("./")):
                check_config_file(path)
            if Path(path).is_file():
                _read_yaml(Path(path))
        except ConfigError as err:
            print(f"augsbert: error: {err}", file=sys.stderr)
            sys.exit(2)  # as the workflow's other config errors


def read_config(path: str | Path) -> dict:
    """A config file as written, with the grid files beside it (config/grids/*.yaml), not yet validated."""
    path = Path(path)
    return with_grid_files(renames.config_file(_read_yaml(path) or {}, str(path)), [path.parent / GRIDS_DIR])


# What the Snakefile reads first (`configfile:`), relative to the directory the workflow runs in
SHIPPED_CONFIG = Path("config") / "config.yaml"


def config_files(given: list[str | Path] | None) -> list[Path]:
    """The config files the CLI's `--config` reads, in order, as Snakemake reads its: the shipped
    config/config.yaml (when the current directory has one), then each given file, every file once."""
    files = [SHIPPED_CONFIG] if SHIPPED_CONFIG.is_file() else []
    given = [given] if isinstance(given, (str, Path)) else given  # one file, as --config took it before
    for path in map(Path, given or []):
        if not any(path.resolve() == seen.resolve() for seen in files):
            files.append(path)
    if not files:
        raise ConfigError(f"no config: {SHIPPED_CONFIG} is not in the current directory (run from the repository "
                          "root) and no --config FILE was given")
    return files


def load_configs(paths: list[str | Path] | None, lazy: bool = False) -> dict:
    """`--config FILE [FILE ...]`: the files of `config_files` merged in order (a later file's keys win, mappings
    merged key by key, as Snakemake merges --configfile over the Snakefile's configfile) and prepared."""
    raw: dict = {}
    for path in config_files(paths):
        check_config_file(path, option="--config")
        raw = deep_merge(raw, read_config(path))
    return prepare_config(raw, lazy=lazy)


def load_config(path: str | Path, overrides: Mapping | None = None, lazy: bool = False) -> dict:
    """Read a YAML config file and its grid files (plus optional overrides merged over them) and prepare it."""
    raw = read_config(path)
    if overrides:
        raw = deep_merge(raw, overrides)
    return prepare_config(raw, lazy=lazy)


def experiment_config(config: dict, name: str) -> dict:
    try:
        return config["experiments"][name]
    except KeyError:
        raise ConfigError(unknown_name(name, "experiment", config.get("experiments") or {})) from None


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
