"""The documents users read stay true to the code."""

import re

from augsbert.config_reference import render
from conftest import REPO


def test_config_reference_is_generated_from_schema():
    assert (REPO / "config" / "README.md").read_text() == render(), (
        "config/README.md is stale: run `augsbert config-reference > config/README.md`")


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^make test\b", readme, re.M) and re.search(r"^make test$", ci, re.M)
    assert re.search(r"^make demo\b", readme, re.M)


def test_every_rule_declares_threads_log_and_resources():
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        text = smk.read_text()
        for rule in re.split(r"\n(?=rule )", text)[1:]:
            name = rule.split(":")[0]
            for directive in ("threads:", "log:", "resources:", "shell:"):
                assert directive in rule, f"{smk.name}: {name} lacks {directive}"
