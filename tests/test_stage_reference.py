"""docs/reference/stages.md is written from the stage registry (augsbert.reference.stage_reference): it stays equal to
what the registry says, and a stage the registry holds but the page does not fails the check."""

import re

from augsbert.reference.stage_reference import PAGE, REGENERATE, main, render
from augsbert.stages import REGISTRY, register
from augsbert.stages.base import Stage


def listed(page: str) -> tuple[list[str], list[str]]:
    """The stages of the page's summary table and of its sections, in page order."""
    table = re.findall(r"^\| \[`(\w+)`\]\(#\w+\) \|", page, re.M)
    sections = re.findall(r"^### (\w+)$", page, re.M)
    return table, sections


def missing(page: str) -> list[str]:
    table, sections = listed(page)
    return [name for name in REGISTRY if name not in table or name not in sections]


def test_the_checked_in_page_is_the_registrys():
    text = PAGE.read_text(encoding="utf-8")
    assert text == render(), f"docs/reference/stages.md is stale: run `{REGENERATE}` (or `make schema`)"
    assert main(["--check"]) == 0
    table, sections = listed(text)
    assert table == sections == list(REGISTRY) and len(REGISTRY) >= 22
    assert missing(text) == []
    for name in ("gpl", "margins", "queries", "query_shard"):  # the four the hand-kept page lacked (issue 59)
        assert f"\n### {name}\n\n{REGISTRY[name].summary}" in text


def test_a_stage_added_to_the_registry_fails_the_check_until_the_page_is_written(monkeypatch, capsys):
    """A plugin's (or a new module's) stage: the checked-in page lacks it, so the freshness check fails; the page
    written again has its row and section, read from its declaration."""
    monkeypatch.delitem(REGISTRY, "word_counts", raising=False)
    toy = register(Stage("word_counts", 4, "count the words of a dataset's train split", "toy:run",
                         section="datasets", roles=("word_counts",), needs=("data",), gpu=False, env="cpu",
                         threads=1, aliases=("count-words",), holds=("counts.json",), plan=lambda seed_plan: {}))
    try:
        text = PAGE.read_text(encoding="utf-8")
        assert missing(text) == ["word_counts"]
        assert main(["--check"]) == 1 and REGENERATE in capsys.readouterr().err
        fresh = render()
        assert missing(fresh) == []
        assert ("| [`word_counts`](#word_counts) | count the words of a dataset's train split | `datasets` | "
                "`word_counts` | no |") in fresh
        section = fresh.split("\n### word_counts\n", 1)[1].split("\n### ", 1)[0]
        assert "- command: `augsbert word-counts` (formerly `count-words`); rule `word_counts`; version 4" in section
        assert "- reads roles (planned after the stages that fill them): `data`\n" in section
        assert "each holds `spec.json`, `metrics.json`, `counts.json`" in section
        assert "| `word_counts` | `count-words` |  |" in fresh  # the former-names table
    finally:
        REGISTRY.pop(toy.name, None)
    assert missing(PAGE.read_text(encoding="utf-8")) == []
