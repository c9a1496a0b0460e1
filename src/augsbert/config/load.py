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

What these steps use lives beside this module, one concern each: `schema` (loading, references, coercion),
`names` (names that become paths), `messages` (schema errors as a user reads them), `yaml_files` (reading
config YAML, which files `--config` reads), `grids` (grid files and cells), `keys` (artifact-key hashing),
`renames` (old section names).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# ConfigError and deep_merge live in modules of their own; they are re-exported here, where every caller has always
# found them (as prepare_config, read_config, load_config(s)).
from ..errors import ConfigError
from . import rehearsal, renames
from .grids import GRIDS_DIR, expand_grids, with_grid_files
from .merging import deep_merge
from .messages import describe_errors
from .names import check_names, unknown_name
from .schema import coerce, load_schema, not_mapping
from .yaml_files import check_config_file, config_files, read_yaml


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
        raise ConfigError(f"defaults: a mapping of stage sections, not {not_mapping(config['defaults'], 'defaults')}")
    for section, noun in (("datasets", "dataset"), ("experiments", "experiment"), ("grids", "grid")):
        entries = config.get(section)
        if entries is None:
            continue
        if not isinstance(entries, Mapping):
            raise ConfigError(f"{section}: a mapping of name -> {noun}, not {not_mapping(entries, section)}")
        for name, entry in entries.items():
            if not isinstance(entry, Mapping):
                raise ConfigError(f"{section}.{name}: each {noun} is a mapping of options, not "
                                  f"{not_mapping(entry, f'{section}.{name}')}")


# ---------------------------------------------------------------- validation
MEMO_SIZE = 20_000  # validated mappings remembered per validator (a few MB for the shipped config)


def _add_missing(instance, filled) -> None:
    """Give `instance` what default filling added to an equal instance (`filled`): every key it lacks, in `filled`'s
    order, at any depth; what it has is kept, the same objects."""
    if isinstance(instance, dict):
        for key, value in filled.items():
            if key in instance:
                _add_missing(instance[key], value)
            else:
                instance[key] = copy.deepcopy(value)
    elif isinstance(instance, list):
        for item, value in zip(instance, filled):
            _add_missing(item, value)


def _default_filling_validator(schema: dict):
    """A Draft 2020-12 validator that writes each property's `default` into the instance.

    A mapping validated without error against a `properties` schema is remembered as it was filled (by that schema
    node and the mapping's repr): an equal mapping met again gets the same defaults without being walked. The
    experiments of a grid share most sections, and every plan of the shipped config validated its ~330 experiments
    key by key (most of a full plan's time); errors are never remembered, so every message is found as before.
    """
    from jsonschema import Draft202012Validator, validators

    base_props = Draft202012Validator.VALIDATORS["properties"]
    memo: dict[tuple[int, str], dict] = {}

    def set_defaults(validator, properties, instance, schema):
        if not isinstance(instance, dict):
            yield from base_props(validator, properties, instance, schema)
            return
        key = (id(properties), repr(instance))
        if key in memo:
            _add_missing(instance, memo[key])
            return
        for name, sub in properties.items():
            if isinstance(sub, dict) and "default" in sub:
                instance.setdefault(name, copy.deepcopy(sub["default"]))
        clean = True
        for error in base_props(validator, properties, instance, schema):
            clean = False
            yield error
        if clean:
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            memo[key] = copy.deepcopy(instance)

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
    check_names(config)
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
    return rehearsal.overlay_experiment(exp) if rehearsal.is_on(config) else exp


def _check_references(config: dict) -> None:
    datasets = config.get("datasets", {})
    for name, exp in config.get("experiments", {}).items():
        for key in ("dataset", "source"):
            if exp.get(key) is not None and exp[key] not in datasets:
                raise ConfigError(
                    f"experiments.{name}.{key}: unknown dataset '{exp[key]}' "
                    f"(defined under `datasets`: {', '.join(sorted(datasets)) or 'none'})"
                )


def read_config(path: str | Path) -> dict:
    """A config file as written, with the grid files beside it (config/grids/*.yaml), not yet validated."""
    path = Path(path)
    return with_grid_files(renames.config_file(read_yaml(path) or {}, str(path)), [path.parent / GRIDS_DIR])


def merged_files(paths: list[str | Path], overrides: Mapping | None = None) -> dict:
    """Config files read one by one (`read_config`: old section names renamed in the file that wrote them, the grid
    files beside each) and merged in order, a later file's keys winning (mappings merged key by key, as Snakemake
    merges --configfile over the Snakefile's configfile), then `overrides` (Snakemake's --config). The CLI and the
    workflow both build their config so: Snakemake merges the files itself before the workflow sees them, and an
    old name in a user's file (`defaults.silver`) met the new one of config/config.yaml as "both set", while the
    CLI, renaming each file before merging, accepted it (issue 56 C2)."""
    raw: dict = {}
    for path in paths:
        raw = deep_merge(raw, read_config(path))
    return deep_merge(raw, renames.config_file(overrides, "--config")) if overrides else raw


def load_configs(paths: list[str | Path] | None, lazy: bool = False) -> dict:
    """`--config FILE [FILE ...]`: the files of `config_files` merged in order (`merged_files`) and prepared."""
    paths = config_files(paths)
    for path in paths:
        check_config_file(path, option="--config")
    return prepare_config(merged_files(paths), lazy=lazy)


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
