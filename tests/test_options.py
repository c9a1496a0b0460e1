"""The options class is the spec (issue 59): every (stage, option) is declared in one class, and its default is
written there and nowhere else.

A stage's params class derives from its section's options class (or from slices of another section's: `slice_of`
copies declarations, it declares nothing). Two exceptions are allowed, each named:
- `restate(...)` in a section's options class (one that declares `SECTION`): the section's own default, words or
  bounds of an option of the shared schedule (augsbert.stages.training_options). The default of (section, option)
  is then written once, in that line.
- RESOLVED: a params class may redeclare an option as a plain field when the planner writes a resolved value in its
  place (a null option filled from a preset, a task resolved to its files); each is pinned here with why.

The inventory (tests/options_inventory.py) prints what this test checks.

The shipped config/config.yaml does not write a default again either: a value of its `defaults:` equal to what the
options class declares would silently override a later change of the class's default (issue 66); one kept on
purpose is listed in KEPT_IN_CONFIG with why.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import yaml
from options_inventory import restated_defaults

from augsbert.params import Params, default_of, option, restate, section_class, slice_of
from augsbert.stages import REGISTRY
from augsbert.stages.runs import ExperimentOptions
from augsbert.stages.training_options import TrainingOptions

CONFIG = Path(__file__).resolve().parents[1] / "config" / "config.yaml"

# (stage, field): why its params class writes a resolved value in place of the option
RESOLVED = {
    ("gpl", "model"): "None when the student starts from its `init` input (the pretrained encoder)",
    ("source_embeddings", "model"): "None when the teacher is an artifact (its `teacher` input), not the base model",
    ("language_suite", "model"): "None when the model is the `model` input (set for the zero-shot base only)",
    **{("pretrain", name): "the option's null is filled from the objective's preset (objectives.resolved)"
       for name in ("max_steps", "batch_size", "lr", "warmup_ratio", "weight_decay", "scheduler", "pooling",
                    "group_by_length")},
    ("student", "selection"): "the option's null is resolved by transfer (source_dev / target_dev)",
    ("student", "freeze_embeddings"): "the option's null is resolved from the checkpoint (adapted or not)",
    ("teacher", "freeze_embeddings"): "the option's null is resolved from the checkpoint (adapted or not)",
}

# (file, option, literal default) that the scan of src/ finds but that give no stage option a default: a name an
# option shares with something else, or a sentinel; each with why
NOT_OPTION_DEFAULTS = {
    ("src/augsbert/export/facts.py", "arch", "'be'"): "an artifact's metrics: a student recorded before `arch` was",
    ("src/augsbert/export/facts.py", "selection", "'unset'"): "the model card's words for a spec without one",
    ("src/augsbert/export/facts.py", "strategies", "{}"): "the labels artifact's per-strategy counts",
    ("src/augsbert/export/model_card.py", "dataset", "{}"): "the config's dataset entry",
    ("src/augsbert/run/rehearse.py", "data_dir", "'data/raw'"): "the rehearsal root's data folder (config level)",
    ("src/augsbert/models/mlm.py", "seed", "None"): "an unseeded masking generator",
    ("src/augsbert/planning/graph.py", "hub_revisions", "{}"): "the config's pinned revisions (none pinned)",
    ("src/augsbert/stages/negatives.py", "hub_revisions", "{}"): "the config's pinned revisions (none pinned)",
    ("src/augsbert/stages/queries.py", "hub_revisions", "{}"): "the config's pinned revisions (none pinned)",
    ("src/augsbert/reporting/tables.py", "skipped", "{}"): "a suite's metrics: the tasks it skipped",
    ("src/augsbert/stages/suite.py", "sts", "{}"): "a suite spec's resolved task files (absent: none)",
    ("src/augsbert/stages/suite.py", "useb", "{}"): "a suite spec's resolved task files (absent: none)",
    ("src/augsbert/stages/suite.py", "mteb", "{}"): "a suite spec's resolved task files (absent: none)",
    ("src/augsbert/store/fingerprints.py", "path", "{}"): "a digest cache's stored entries",
}


def _origin(cls: type) -> type:
    return cls.__dict__.get("SLICE_OF", cls)  # a slice copies its origin's declarations


def own_declarations(params: type) -> dict[str, list[tuple[type, dataclasses.Field]]]:
    """field -> the classes declaring it in `params`'s ancestry (a slice counted as its origin), most derived
    first, with each one's own Field."""
    out: dict[str, list[tuple[type, dataclasses.Field]]] = {}
    for cls in params.__mro__:
        if not dataclasses.is_dataclass(cls):
            continue
        for name in cls.__dict__.get("__annotations__", {}):
            if name.isupper():  # SECTION, SECTION_DESCRIPTION: class constants
                continue
            found = out.setdefault(name, [])
            origin = _origin(cls)
            if all(c is not origin for c, _ in found):
                found.append((origin, cls.__dataclass_fields__[name]))
    return out


def double_declarations(stages: dict[str, type], resolved: dict) -> list[str]:
    """(stage, field) declared in two classes, but a section's `restate` and the pinned `resolved` ones."""
    found = []
    for stage, params in stages.items():
        for name, decls in own_declarations(params).items():
            if len(decls) == 1:
                continue
            (cls, own), rest = decls[0], decls[1:]
            restated = own.metadata.get("restated") and "SECTION" in cls.__dict__ and len(rest) == 1
            pinned = (stage, name) in resolved and "description" not in own.metadata and len(rest) == 1
            if not (restated or pinned):
                found.append(f"{stage}.{name}: declared in {', '.join(c.__name__ for c, _ in decls)}")
    return found


def stage_params() -> dict[str, type]:
    return {stage.name: stage.params for stage in REGISTRY.values() if stage.params is not None}


def test_every_stage_option_is_declared_in_one_class():
    found = double_declarations(stage_params(), RESOLVED)
    assert not found, "declared twice (derive from the class, or restate in a SECTION class):\n  " + \
        "\n  ".join(found)


def test_every_resolved_field_is_one():
    """The pinned list holds no stale entry: each is a plain field over an option of the stage's section."""
    stages = stage_params()
    for stage, name in RESOLVED:
        decls = own_declarations(stages[stage])[name]
        assert len(decls) == 2, (stage, name, decls)
        assert "description" not in decls[0][1].metadata, (stage, name)


def test_the_check_fails_on_a_redeclared_option():
    """It can fail: an option redeclared in a params class, or restated outside a section's class."""

    @dataclass(frozen=True, kw_only=True)
    class Options(slice_of(TrainingOptions, "lr")):
        SECTION = "made_up"
        size: int = option(3, "A size.")
        lr = restate(1e-4)

    @dataclass(frozen=True, kw_only=True)
    class Redeclared(Options):
        size: int = 4

    @dataclass(frozen=True, kw_only=True)
    class Sliced(slice_of(TrainingOptions, "batch_size")):
        batch_size: int = 8  # a default written outside its class

    @dataclass(frozen=True, kw_only=True)
    class RestatedInParams(Options):
        lr = restate(1e-3)  # a params class (no SECTION of its own) restating its section's default

    assert double_declarations({"ok": Options}, {}) == []
    assert double_declarations({"bad": RestatedInParams}, {}) == [
        "bad.lr: declared in RestatedInParams, Options, TrainingOptions"]
    assert double_declarations({"bad": Redeclared}, {}) == ["bad.size: declared in Redeclared, Options"]
    assert double_declarations({"bad": Sliced}, {}) == ["bad.batch_size: declared in Sliced, TrainingOptions"]
    assert double_declarations({"bad": Redeclared}, {("bad", "size"): "why"}) == []


def test_no_option_default_is_written_outside_its_class():
    """`getattr(x, "<option>", <literal>)`, `.get` / `.pop` with a literal default, `<literal> if <option> is None`
    in src/: a stage option's default written again. A reader of a spec that may lack the field takes
    `augsbert.params.default_of(<class>, "<option>")`."""
    found = [f"{path}:{line} {form} {name} = {value}" for path, line, form, name, value in restated_defaults()
             if (path, name, value) not in NOT_OPTION_DEFAULTS]
    assert not found, "defaults written outside their class:\n  " + "\n  ".join(found)


def test_the_not_option_list_holds_no_stale_entry():
    seen = {(path, name, value) for path, _, _, name, value in restated_defaults()}
    assert not set(NOT_OPTION_DEFAULTS) - seen, set(NOT_OPTION_DEFAULTS) - seen


# ------------------------------------------------------------------ config/config.yaml's `defaults:`

# `defaults.<section>.<option>` (or `defaults.<experiment key>`) the shipped config sets to its class's default on
# purpose: why (none today: the options' defaults are the thesis' settings, `augsbert config-reference` lists them)
KEPT_IN_CONFIG: dict[str, str] = {}


def _same(value, default) -> bool:
    """Equal as config values: 2e-5 and 2.0e-5, 1 and 1.0 are; True and 1 are not."""
    return value == default and isinstance(value, bool) == isinstance(default, bool)


def restated_in_config(defaults: dict, classes: dict[str, type] | None = None) -> list[str]:
    """`defaults.<path> = <value>` of every value of a config's `defaults:` equal to the default its options class
    declares (a section's class, by `SECTION`; an experiment's own keys: ExperimentOptions), nested options
    followed into their class. Keys no class declares are the schema's to refuse."""
    if classes is None:
        classes = {cls.SECTION: cls for cls in map(section_class, (s.params for s in REGISTRY.values())) if cls}

    def walk(values: dict, cls: type, where: str) -> list[str]:
        found = []
        names = {f.name for f in dataclasses.fields(cls)}
        for name, value in values.items():
            if name not in names:
                continue
            default = default_of(cls, name)
            if isinstance(default, Params) and isinstance(value, dict):
                found += walk(value, type(default), f"{where}.{name}")
            elif _same(value, default.to_json() if isinstance(default, Params) else default):
                found.append(f"{where}.{name} = {value!r}")
        return found

    found = walk({k: v for k, v in defaults.items() if k not in classes}, ExperimentOptions, "defaults")
    for section, values in defaults.items():
        if section in classes and isinstance(values, dict):
            found += walk(values, classes[section], f"defaults.{section}")
    return found


def test_the_config_restates_no_class_default():
    defaults = yaml.safe_load(CONFIG.read_text(encoding="utf-8")).get("defaults") or {}
    found = [f for f in restated_in_config(defaults) if f.split(" = ")[0] not in KEPT_IN_CONFIG]
    assert not found, ("config/config.yaml restates class defaults (remove them: the class's default applies; or "
                       "list one kept on purpose in KEPT_IN_CONFIG with why):\n  " + "\n  ".join(found))


def test_every_value_kept_in_the_config_is_there():
    defaults = yaml.safe_load(CONFIG.read_text(encoding="utf-8")).get("defaults") or {}
    there = {f.split(" = ")[0] for f in restated_in_config(defaults)}
    assert not set(KEPT_IN_CONFIG) - there, set(KEPT_IN_CONFIG) - there


def test_the_config_check_finds_a_restated_default():
    defaults = {"base_model": "minilm-l6", "gold_fraction": 1.0, "models": ["teacher"],
                "teacher": {"arch": "cbe", "lr": 2.0e-5, "epochs": 4},
                "candidates": {"strategies": ["none"], "candidate_pool": {"random": 5, "semantic_search": 3}},
                "labels": {"relabel_gold": True}, "suite": {"positive_threshold": 1}}
    assert restated_in_config(defaults) == [
        "defaults.base_model = 'minilm-l6'", "defaults.gold_fraction = 1.0", "defaults.teacher.arch = 'cbe'",
        "defaults.teacher.lr = 2e-05", "defaults.candidates.strategies = ['none']",
        "defaults.candidates.candidate_pool.semantic_search = 3", "defaults.labels.relabel_gold = True"]
