"""The schema's stage sections are written from the stages' options classes (augsbert.face.schema)."""

import re

import yaml

from augsbert.config.load import load_schema
from augsbert.face.schema import REGENERATE, SCHEMA_FILE, render, section_classes
from augsbert.params import section_schema

# sections of `stage_options` still written by hand in the schema (issue 48: each moves into its stage's options
# class; this list only shrinks)
HAND_WRITTEN = {"base_model", "models", "gold_fraction", "topic_prompt", "topic_delimiter", "teacher", "student",
                "adapt", "pretrain", "candidates", "queries", "negatives", "trans_encoder", "evaluation"}


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
    assert set(sections) == HAND_WRITTEN | set(classes)
    assert not HAND_WRITTEN & set(classes)


def test_a_stale_section_is_rewritten_from_its_class():
    text = SCHEMA_FILE.read_text(encoding="utf-8")
    stale = text.replace("description: Teacher scoring batch size.", "description: Old words.")
    assert stale != text and render(stale) == text
