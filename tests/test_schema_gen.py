"""The schema's stage sections are written from the stages' options classes (augsbert.reference.schema)."""

from dataclasses import dataclass
import re

import pytest
import yaml

from augsbert.config.datasets import BwsOptions, PairsFileOptions
from augsbert.config.schema import load_schema
from augsbert.data.loaders import LOADERS, Loader
from augsbert.reference.schema import PROPERTIES, REGENERATE, SCHEMA_FILE, dataset_schema, render, section_classes
from augsbert.params import Params, option, option_fields, options_schema, section_schema

# sections of `stage_options` still written by hand in the schema (issue 48: each moves into its stage's options
# class; this list only shrinks)
HAND_WRITTEN: set[str] = set()


def test_the_checked_in_schema_is_fresh():
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    assert render(text) == text, f"the schema's stage sections are stale: run `{REGENERATE}` (or `make schema`)"


def test_every_generated_section_is_its_class_and_no_section_is_written_twice():
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    blocks = re.findall(r"^ *# >>> generated section (\w+) ", text, re.M)
    classes = section_classes()
    assert sorted(blocks) == sorted(classes) and len(blocks) == len(set(blocks))
    sections = load_schema()["$defs"]["stage_options"]["properties"]
    for name, cls in classes.items():  # what the validator and the reference read is the class, value for value
        assert yaml.safe_load(yaml.safe_dump(section_schema(cls))) == sections[name], name
    # the experiment's own keys (base_model, models, ...): a generated block of stage_options' properties
    properties = re.findall(r"^ *# >>> generated properties (\w+) ", text, re.M)
    assert sorted(properties) == sorted(PROPERTIES) and len(properties) == len(set(properties))
    top = PROPERTIES["experiment"].schema_properties()
    for name, prop in top.items():
        assert yaml.safe_load(yaml.safe_dump(prop)) == sections[name], name
    member = load_schema()["$defs"]["teacher_member"]["properties"]  # a teacher ensemble member's options
    assert yaml.safe_load(yaml.safe_dump(PROPERTIES["teacher_member"].schema_properties())) == member
    assert not (HAND_WRITTEN | set(top)) & set(classes) and not HAND_WRITTEN & set(top)
    assert set(sections) == HAND_WRITTEN | set(classes) | set(top)
    if not HAND_WRITTEN:  # every key of stage_options is generated: none is written by hand any more
        assert set(sections) == set(classes) | set(top)


def _loaders_of(branch: dict) -> list[str]:
    condition = branch["if"]["properties"]["loader"]
    return condition.get("enum") or [condition["const"]]


def test_every_loader_has_an_options_class_and_the_dataset_definition_is_written_from_them():
    """`$defs.dataset` is one generated block (config/datasets.py and the registry of loaders): the `loader` enum
    is the registry's names, and each loader's keys are exactly its options class's options, in the blocks whose
    `if` names it (BWS' `path`: one block for the two BWS loaders, from their base class)."""
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    assert re.findall(r"^ *# >>> generated definition (\w+) ", text, re.M) == ["dataset"]
    dataset = load_schema()["$defs"]["dataset"]
    assert yaml.safe_load(yaml.safe_dump(dataset_schema())) == dataset
    assert dataset["properties"]["loader"]["enum"] == list(LOADERS)
    assert dataset["required"] == ["loader"] and dataset["unevaluatedProperties"] is False
    for name, loader in LOADERS.items():
        assert issubclass(loader.options_class, Params), name
        branches = [b["then"] for b in dataset["allOf"] if name in _loaders_of(b)]
        keys = [k for then in branches for k in then["properties"]]
        assert keys == [f.name for f in option_fields(loader.options_class)], name
        required = [k for then in branches for k in then.get("required", [])]
        assert required == {"pairs_file": ["train", "test"], "text_file": ["path"], "beir": ["path"],
                            "parallel_file": ["path"]}.get(name, [])
    assert [_loaders_of(b) for b in dataset["allOf"]][2] == ["bws_cross_topic", "bws_in_topic"]
    assert dataset["allOf"][2]["then"]["properties"] == options_schema(BwsOptions)


def test_a_loader_without_options_class_or_block_fails():
    """It can fail: a loader naming no options class stops the generator; a new loader's class gets its block (and
    the checked-in schema is stale without it); a block taken out of the file is written again."""

    class Bare(Loader):
        def load(self, name, options, data_dir, report):
            raise NotImplementedError

    with pytest.raises(ValueError, match="'bare' .*names no options class"):
        dataset_schema({**LOADERS, "bare": Bare()})

    @dataclass(frozen=True, kw_only=True)
    class ToyOptions(PairsFileOptions):
        size: int = option(3, "A size.", minimum=1)

    class Toy(Bare):
        options_class = ToyOptions

    grown = dataset_schema({**LOADERS, "toy": Toy()})
    assert grown["properties"]["loader"]["enum"][-1] == "toy"
    assert grown["allOf"][-1] == {"if": {"properties": {"loader": {"const": "toy"}}},
                                  "then": {"properties": {"size": {"type": "integer", "minimum": 1, "default": 3,
                                                                   "description": "A size."}}}}
    pairs = next(b for b in grown["allOf"] if "pairs_file" in _loaders_of(b))
    assert _loaders_of(pairs) == ["pairs_file", "toy"] and pairs["then"]["required"] == ["train", "test"]
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    start = text.index("    - if:\n        properties:\n          loader:\n            const: beir\n")
    stale = text[:start] + text[text.index("  # <<< generated definition dataset"):]
    assert stale != text and render(stale) == text


def test_the_models_choices_are_the_registrys_rows_but_two():
    """`models` lists its choices (augsbert.stages.runs.MODELS) because the rows do not give them: `pretrained` is
    a row that `pretrain.objective` asks for, and Trans-Encoder's rows are numbered rounds (te_cross_<k>, ...)."""
    from augsbert.stages import REGISTRY
    from augsbert.stages.runs import MODELS

    rows = {role for stage in REGISTRY.values() for role in stage.rows}
    assert set(MODELS) == rows - {"pretrained"} | {"trans_encoder"}
    models = load_schema()["$defs"]["stage_options"]["properties"]["models"]
    assert models["items"]["enum"] == list(MODELS) and set(models["default"]) <= set(MODELS)


# what a teacher / student spec resolves of its config section (the options' null: from an adapted checkpoint, by
# transfer), required in a spec; the options that only plan nodes are no field of the spec's class
RESOLVED = {"teacher": {"freeze_embeddings"}, "student": {"freeze_embeddings", "selection"}}


def test_a_training_spec_reads_its_sections_defaults_but_where_the_planner_resolves_them():
    """A teacher / student spec without an option reads the section's default (issue 48: weight_decay 0.01, the
    student's group_by_length true and megabatch 400, were 0.0 / false / 50 in the params classes; issue 59: the
    loss options and the compact students' too), but for the options the planner resolves (required in a spec) and
    those that plan nodes (`PLANNED`: no field of the spec)."""
    import dataclasses
    import importlib

    from augsbert.params import Params, section_class
    from augsbert.stages import REGISTRY

    def read(f: dataclasses.Field):
        value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        return value.to_json() if isinstance(value, Params) else value

    def default(schema: dict):  # a nested object's default {} is its options' defaults
        return {k: default(v) for k, v in schema["properties"].items()} if schema.get("type") == "object" \
            else schema["default"]

    sections = load_schema()["$defs"]["stage_options"]["properties"]
    for stage, resolved in RESOLVED.items():
        params = REGISTRY[stage].params
        assert section_class(params).SECTION == stage
        planned = set(importlib.import_module(f"augsbert.stages.{stage}").PLANNED)
        fields = {f.name: f for f in dataclasses.fields(params)}
        schema = sections[stage]["properties"]
        assert set(schema) - set(fields) == planned, stage
        assert {name for name in schema if name in fields and read(fields[name]) != default(schema[name])} == \
            resolved, stage
        assert all(fields[name].default is dataclasses.MISSING for name in resolved), stage


def test_the_shared_schedule_is_declared_once():
    """teacher and student (and trans_encoder's cross / bi) share their schedule options: the same schema but
    where a section says otherwise (the student's max_steps words, length grouping and mega-batch)."""
    from augsbert.stages.training_options import TrainingOptions
    from augsbert.stages.trans_encoder import BiOptions, CrossOptions, ScheduleOverrides

    sections = load_schema()["$defs"]["stage_options"]["properties"]
    teacher, student = sections["teacher"]["properties"], sections["student"]["properties"]
    shared = list(options_schema(TrainingOptions))
    assert shared[0] == "epochs" and shared[-1] == "early_stopping_patience" and len(shared) == 13
    assert [k for k in shared if teacher[k] != student[k]] == ["max_steps", "group_by_length", "megabatch"]
    for section, head in ((teacher, "selection"), (student, "selection")):  # one block, after the section's head
        start = list(section).index(head) + 1
        assert list(section)[start:start + len(shared)] == shared
    assert (student["group_by_length"]["default"], student["megabatch"]["default"]) == (True, 400)
    assert (teacher["group_by_length"]["default"], teacher["megabatch"]["default"]) == (False, 50)
    for kind in (CrossOptions, BiOptions):  # the rounds' overrides: after the kind's own options
        assert list(options_schema(kind))[-7:] == list(options_schema(ScheduleOverrides))


def test_a_stale_section_is_rewritten_from_its_class():
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    stale = text.replace("description: Teacher scoring batch size.", "description: Old words.")
    assert stale != text and render(stale) == text


# -- issue 48's acceptance: an option added by editing only its stage's options class, in a copy of the project
NEW_OPTION = '''    margin: float = option(0.0, "Test option: added to every teacher score.", minimum=0, keyed_default=False)
'''
ANCHOR = '''    batch_size: int = option(64, "Teacher scoring batch size.", minimum=1)
'''
CHECK = '''
import json, sys
from augsbert.config.load import load_configs
from augsbert.config.schema import load_schema
from augsbert.config.reference import render
from augsbert.errors import ConfigError
from augsbert.plan import Plan

def labels_params(override):
    config = load_configs(["config/config.yaml"], lazy=True)
    config["experiments"]["demo_augsbert_cbe"].setdefault("labels", {}).update(override)
    plan = Plan(config)
    runs = plan.experiment("demo_augsbert_cbe").runs
    node = plan.node(runs[min(runs)]["labels"])
    return node.key, node.params

try:
    load_configs(["config/config.yaml", "bad.yaml"])
    refused = ""
except ConfigError as err:
    refused = str(err)
print(json.dumps({"schema": load_schema()["$defs"]["stage_options"]["properties"]["labels"]["properties"]["margin"],
                  "refused": refused, "reference": [l for l in render().splitlines() if "`labels.margin`" in l],
                  "unset": labels_params({}), "set": labels_params({"margin": 0.5})}))
'''


def test_an_option_added_to_a_stage_class_reaches_schema_validation_reference_and_spec(tmp_path):
    import json
    import os
    import subprocess
    import sys

    from conftest import plan_shipped
    from workflow_helpers import checkout, keep_experiments

    root = checkout(tmp_path / "project", ("workflow", "config", "src"))
    keep_experiments(root, "demo_augsbert_cbe")
    declaration = root / "src" / "augsbert" / "stages" / "labels.py"
    text = declaration.read_text()
    assert text.count(ANCHOR) == 1
    declaration.write_text(text.replace(ANCHOR, ANCHOR + NEW_OPTION))  # the one edit
    (root / "bad.yaml").write_text("experiments: {demo_augsbert_cbe: {labels: {margin: -1}}}\n")
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "HF_HUB_OFFLINE": "1"}
    stale = subprocess.run([sys.executable, "-m", "augsbert.reference.schema", "--check"], cwd=root, env=env,
                           capture_output=True, text=True, timeout=120)
    assert stale.returncode == 1 and "run `python -m augsbert.reference.schema --write`" in stale.stderr
    for args in (["-m", "augsbert.reference.schema", "--write"], ["-c", CHECK]):
        proc = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.splitlines()[-1])
    assert found["schema"] == {"type": "number", "minimum": 0, "default": 0.0,
                               "description": "Test option: added to every teacher score."}
    assert "experiments.demo_augsbert_cbe.labels.margin: -1 is less than the minimum of 0" in found["refused"]
    assert found["reference"] == ["| `labels.margin` | number | `0.0` | Test option: added to every teacher score. |"]
    (unset_key, unset_params), (set_key, set_params) = found["unset"], found["set"]
    assert "margin" not in unset_params and set_params == {**unset_params, "margin": 0.5}
    assert set_key != unset_key
    # unset, the key is the one the project without the option plans (keyed_default=False)
    runs = plan_shipped({}).experiment("demo_augsbert_cbe").runs
    assert unset_key == runs[min(runs)]["labels"]


def test_a_teacher_members_overrides_are_the_teacher_sections_options_made_nullable():
    """`$defs.teacher_member` repeats no type or bound: each override is the teacher option's schema with null
    added (a bound changed in TeacherOptions changes the member's too), default null."""
    schema = load_schema()["$defs"]
    teacher, member = schema["stage_options"]["properties"]["teacher"]["properties"], \
        schema["teacher_member"]["properties"]
    assert list(member) == ["seed", "bag", "arch", "base_model", "base", "max_length", "symmetric", "loss",
                            "activation", "epochs", "batch_size", "lr", "warmup_ratio", "weight_decay",
                            "freeze_embeddings", "group_by_length", "megabatch"]
    assert member["max_length"] == {"type": ["integer", "null"], "minimum": 8, "default": None,
                                    "description": "See `teacher.max_length`."}
    assert member["loss"]["enum"] == ["bce", "mse", None] and member["freeze_embeddings"]["type"] == ["boolean",
                                                                                                   "null"]
    for name in list(member)[2:]:  # after the member's own options (seed, bag)
        assert {k: v for k, v in member[name].items() if k not in ("type", "enum", "default", "description")} \
            == {k: v for k, v in teacher[name].items() if k not in ("type", "enum", "default", "description")}


def test_trans_encoders_overrides_keep_their_sections_bounds():
    """`trans_encoder.cross` / `.bi` word their overrides for the paper (their own descriptions), but a value they
    accept is one the `teacher` / `student` section accepts: the same types, choices and bounds, null added."""
    from augsbert.params import override_schema

    schema = load_schema()["$defs"]["stage_options"]["properties"]
    kinds = schema["trans_encoder"]["properties"]
    for kind, section in (("cross", "teacher"), ("bi", "student")):
        options = schema[section]["properties"]
        for name, prop in kinds[kind]["properties"].items():
            assert prop == override_schema(options[name], prop["description"]), (kind, name)
