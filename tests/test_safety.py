"""Names that become paths or shell words cannot escape the project or run commands.

Experiment, grid and dataset names (and a grid's column and axis-value labels)
are checked by one pattern (the schema's `$defs/name`, `augsbert.config.names.check_name`);
every rule constrains its wildcards to it and quotes every shell placeholder.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

from augsbert.export.backends import BACKEND_WILDCARD
from augsbert.face.cli import main
from augsbert.config.load import ConfigError, deep_merge, prepare_config, read_config
from augsbert.config.names import NAME_RULE, check_name
from augsbert.config.schema import load_schema
from augsbert.config.load import validate_with_defaults
from conftest import REPO

RULES = sorted((REPO / "workflow" / "rules").glob("*.smk"))


def raw_config(**override) -> dict:
    raw = read_config(REPO / "config" / "config.yaml")
    return deep_merge(raw, override)


def invalid(where: str, name: str) -> str:
    return f"{where}: invalid name {name!r}: use {NAME_RULE}"


@pytest.mark.parametrize("name", ["demo", "demo_cbe", "stsb2bws", "g.cbe_none.lee", "A-1.b-2", "0x"])
def test_valid_names(name):
    assert check_name(name, "x") == name


@pytest.mark.parametrize("name", ["../../x", "..", "a..b", ".x", "x.", "-x", "_x", "a/b", "a\\b", "a b", "g;touch x;y",
                                  "$(id)", "a`b`", "x'y", "", "é"])
def test_invalid_names(name):
    with pytest.raises(ConfigError) as err:
        check_name(name, "experiments")
    assert str(err.value) == invalid("experiments", name)


@pytest.mark.parametrize("name", [3, True, None])
def test_names_are_strings(name):
    with pytest.raises(ConfigError) as err:
        check_name(name, "grids.g.axes.top_k")
    assert str(err.value) == f"grids.g.axes.top_k: invalid name {name!r}: a name is a string (quote it in YAML); use {NAME_RULE}"


def test_grid_name_with_shell_syntax_is_rejected():
    grid = {"columns": {"lee": {"dataset": "lee"}}}
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config(grids={"g;touch x;y": grid}))
    # one message for the grid, not a second one for the experiment it would expand to
    assert str(err.value) == invalid("grids.g;touch x;y", "g;touch x;y")


def test_grid_labels_become_experiment_names_and_are_checked():
    grid = {"columns": {"lee x": {"dataset": "lee"}}, "axes": {"t": {"ce/../..": {"teacher": {"arch": "ce"}}}}}
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config(grids={"g": grid}))
    assert str(err.value) == "\n".join([invalid("grids.g.columns.lee x", "lee x"),
                                        invalid("grids.g.axes.t.ce/../..", "ce/../..")])


def test_experiment_and_dataset_names_are_checked():
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config(experiments={"../../x": {"dataset": "lee"}}))
    assert str(err.value) == invalid("experiments.../../x", "../../x")
    with pytest.raises(ConfigError) as err:
        prepare_config(raw_config(datasets={"a/b": {"loader": "lee"}}))
    assert str(err.value) == invalid("datasets.a/b", "a/b")


def test_the_schema_alone_rejects_the_same_names():
    # the same pattern guards configs validated without prepare_config (the schema is the source)
    config = {"experiments": {"../../x": {"dataset": "lee"}}, "datasets": {"a/b": {"loader": "lee"}}}
    with pytest.raises(ConfigError) as err:
        validate_with_defaults(config, load_schema())
    assert str(err.value) == "invalid configuration:\n" + "\n".join(
        ["  " + invalid("datasets.a/b", "a/b"), "  " + invalid("experiments.../../x", "../../x")])


def test_collect_results_spec_cannot_write_outside_the_project(tmp_path, monkeypatch, capsys):
    project = tmp_path / "a" / "b"
    project.mkdir(parents=True)
    monkeypatch.chdir(project)
    spec = {"experiment": "../../x", "runs": {}, "config": {}, "seeds": []}
    assert main(["collect-results", "--spec", json.dumps(spec)]) == 2
    assert capsys.readouterr().err == f"augsbert collect-results: error: {invalid('--spec: experiment', '../../x')}\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b"]
    grid = {"grid": "../../t", "experiments": []}
    assert main(["render-table", "--spec", json.dumps(grid)]) == 2
    assert invalid("--spec: grid", "../../t") in capsys.readouterr().err
    grid = {"grid": "t", "experiments": ["../../../etc/x"]}
    assert main(["render-table", "--spec", json.dumps(grid)]) == 2
    assert invalid("--spec: experiments", "../../../etc/x") in capsys.readouterr().err
    assert main(["collect-results", "--config", str(REPO / "config" / "config.yaml"), "--experiment", "../../x"]) == 2
    assert invalid("--experiment", "../../x") in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b"]


def shell_commands(text: str) -> list[str]:
    """The string literals of every `shell:` directive of a rules file."""
    # rules at the top level (4 spaces) or inside the loop of rules/stages.smk (8 spaces)
    return [" ".join(re.findall(r'"((?:[^"\\]|\\.)*)"', block))
            for indent, block in re.findall(r"\n( {4}| {8})shell:\n((?:\1    .*\n?)+)", text)]


def test_every_shell_placeholder_is_quoted():
    commands = [(smk.name, cmd) for smk in RULES for cmd in shell_commands(smk.read_text())]
    # one per rule: the parser found them all (rules/stages.smk: one rule for every registered stage; export.smk's
    # export_model, export_model_backend and export_model_backend_seed, tables.smk's grid_table, active_curve and
    # grid_frontier, results.smk)
    assert len(commands) == 8 and sum(smk.name == "stages.smk" for smk, _ in [(Path(n), c) for n, c in commands]) == 1
    unquoted = [(name, field) for name, cmd in commands for field in re.findall(r"\{([^{}]*)\}", cmd)
                if not field.endswith(":q")]
    assert unquoted == []


def test_every_wildcard_is_constrained():
    common = (REPO / "workflow" / "rules" / "common.smk").read_text()
    block = re.search(r"\nwildcard_constraints:\n((?:    .*\n)+)", common).group(1)
    constrained = set(re.findall(r"^    (\w+)=", block, re.M))
    used, inline = set(), {}
    for smk in RULES:
        for _, directive in re.findall(r"\n( {4}| {8})(?:output|log):\n((?:\1    .*\n)+)", smk.read_text()):
            # wildcards of paths, not the `{name}` of report(patterns=[...]) inside them; in the f-strings of
            # rules/stages.smk a wildcard is written `{{name}}`, or `{{name,regex}}` when the rule constrains it
            paths = re.sub(r"patterns=\[[^\]]*\]", "", directive).replace("{{", "{").replace("}}", "}")
            used |= set(re.findall(r"\{(\w+)\}", paths))
            inline.update(re.findall(r"\{\{(\w+),\{([\w.]+)\}\}\}", directive))
    # `stage` (rules/stages.smk) is constrained in the rule itself, to exactly that rule's stage name
    assert inline == {"stage": "_stage.name"}
    used |= set(inline)
    assert used == {"key", "experiment", "grid", "model", "stage", "backend", "seed"}
    assert used - {"stage", "backend", "seed"} <= constrained
    # `backend` (export.smk's export_model_backend and export_model_backend_seed) is constrained in each of its two
    # rules, to the exported backends (the registry's BACKEND_WILDCARD, tests/test_backends.py); `seed`
    # (export_model_backend_seed) to digits
    export = (REPO / "workflow" / "rules" / "export.smk").read_text()
    assert len(re.findall(r'\n    wildcard_constraints:\n        backend=BACKEND_WILDCARD,\n', export)) == 2
    assert re.search(r'\n        backend=BACKEND_WILDCARD,\n        seed="\[0-9\]\+",\n', export)
    assert re.fullmatch(r"[a-z0-9_]+(\|[a-z0-9_]+)*", BACKEND_WILDCARD)  # plain names: no separator, no pattern
