"""The stage registry (augsbert.stages) is the one place a stage is declared: every stage has a command,
an entry point, job sizes, a config section and a rule, all under its one name."""

import argparse
import ast
import importlib
import re
from pathlib import Path

import pytest

from augsbert.face.cli import build_parser
from augsbert.config.schema import load_schema
from augsbert.training.distributed import DISTRIBUTED_COMMANDS
from augsbert.stages import REGISTRY, STAGES, stage
from augsbert.scheduling.resources import job_resources, needs_gpu
from conftest import REPO
from test_imports import SRC, import_graph


def commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_names_are_unique_and_safe_and_the_tables_are_the_registry():
    assert len(REGISTRY) == len(STAGES)
    for s in STAGES:
        assert re.fullmatch(r"[a-z][a-z_]*", s.name), s.name  # a rule name, a folder, a CLI word
        assert s.command == s.name.replace("_", "-")
    assert {s.name for s in STAGES if s.data_parallel} == {"teacher", "student"}
    assert DISTRIBUTED_COMMANDS == {"teacher", "student", "train-teacher", "train-student"}
    with pytest.raises(KeyError, match="unknown stage 'nope'"):
        stage("nope")


@pytest.mark.parametrize("declared", STAGES, ids=lambda s: s.name)
def test_every_stage_has_a_command_an_entry_point_sizes_and_a_config_section(declared):
    parsers = commands()
    # one command, named as the stage; its former names are aliases of the same parser
    assert declared.command in parsers
    for alias in declared.aliases:
        assert parsers[alias] is parsers[declared.command]
    options = {o for action in parsers[declared.command]._actions for o in action.option_strings}
    assert {"--spec", "--config", "--out", "--force"} <= options
    assert ("--device" in options) == declared.device
    assert callable(declared.load_runner())
    # sized: from the plan (per-item figures) or fixed (shards); GPU only for stages that run a model
    if declared.fixed_resources:
        assert set(declared.fixed_resources) == {"mem_mb", "runtime", "gpu"}
    else:
        assert declared.seconds_per_item > 0 and declared.base_mem_mb > 0
        node = type("Node", (), {"stage": declared.name, "inputs": (), "params": {"strategies": ["bm25"]}})
        assert needs_gpu(node) == (declared.gpu and declared.name != "candidates")  # BM25 encodes nothing
    # its options come from a section of the schema (`datasets`, or one of `defaults`)
    schema = load_schema()
    sections = {"datasets", *schema["$defs"]["stage_options"]["properties"]}
    assert declared.section in sections
    assert declared.roles and declared.env in ("models", "cpu")
    assert (REPO / "workflow" / "envs" / f"{declared.env}.yaml").is_file()


# ------------------------------------------------------------------ one word per concept (docs/development.md)

# A stage's config section and its role are its name (issue 59); where not, one of the rules written in
# docs/development.md "One word per concept" says why, and this table holds it: stage -> (section, rule).
OTHER_SECTION = {
    # a piece of another stage's job (a shard, the index, an ensemble or member) reads that stage's section
    "pool_index": "candidates", "candidate_shard": "candidates", "label_shard": "labels", "query_shard": "queries",
    "teacher_ensemble": "teacher", "rcl_entropy": "pretrain",
    # the steps of one loop read the loop's section (no stage is the loop itself)
    "active_select": "active", "active_label": "active", "active_rounds": "active",
    # a stage that runs the model another section sets reads that section
    "margins": "teacher", "gpl": "student", "zero_shot": "suite", "language_suite": "suite",
    # a piece of another stage's job: the multilingual student's targets read its section
    "source_embeddings": "multilingual",
    # not a section of `defaults`: the dataset's entry of `datasets`, the experiment's own key
    "data": "datasets", "gold_subset": "gold_fraction",
}
# roles that are not the stage's name, nor its name numbered (`<stage>_<n>`: shards, rounds, members), nor the row it
# serves (`<row>_<stage>`: the suite of each row): a row named for its model, or the role a stage stands for
OTHER_ROLES = {"student": {"lower_bound"}, "pretrain": {"pretrained"}, "data": {"source_data"},
               "active_select": {"gold_subset"}, "teacher_ensemble": {"teacher"}}


def naming_problems(declared, rows: set[str]) -> list[str]:
    """Why `declared` breaks section = stage = role beyond the written rules (`rows`: the table rows' roles)."""
    found = []
    if declared.section != OTHER_SECTION.get(declared.name, declared.name):
        found.append(f"{declared.name}: section `{declared.section}` is neither its name nor a rule's")
    for role in declared.roles:
        numbered = re.fullmatch(rf"{declared.name}_\d+", role)
        served = role.endswith(f"_{declared.name}") and role.removesuffix(f"_{declared.name}") in rows
        if role != declared.name and not numbered and not served and role not in OTHER_ROLES.get(declared.name, ()):
            found.append(f"{declared.name}: role `{role}` is neither its name nor a rule's")
    return found


def test_a_stage_is_its_section_and_its_role():
    rows = {role for s in STAGES for role in s.rows}
    assert [p for s in STAGES for p in naming_problems(s, rows)] == []
    assert set(OTHER_SECTION) <= set(REGISTRY) and set(OTHER_ROLES) <= set(REGISTRY)
    # the check can fail: a stage reading a section of another name, a role of another name
    odd = type(STAGES[0])("oddly", 1, "a probe", "x:run", section="labels", roles=("oddly_0", "labelled",
                                                                                      "student_oddly"))
    assert naming_problems(odd, rows) == ["oddly: section `labels` is neither its name nor a rule's",
                                          "oddly: role `labelled` is neither its name nor a rule's"]


def test_fixed_size_stages_are_sized_by_job_resources(monkeypatch):
    class Node:
        stage, inputs, params = "label_shard", (), {}

    class Plan:
        config = {"gpus": 4}

        @staticmethod
        def node(key):
            return Node

    monkeypatch.delenv("AUGSBERT_SLURM_PARTITION", raising=False)
    monkeypatch.setenv("AUGSBERT_SLURM_GPU_PARTITION", "gpu")
    assert job_resources(Plan, "x") == {"runtime": 720, "mem_mb": 8000, "cpus_per_task": None, "gpu": 1,
                                        "slurm_partition": "gpu", "gpu_model": None}
    Node.stage = "candidate_shard"
    assert job_resources(Plan, "x")["gpu"] == 0 and job_resources(Plan, "x")["slurm_partition"] is None


def test_the_rules_call_each_stage_by_its_name():
    """workflow/rules/stages.smk runs `augsbert {wildcards.stage}`: every stage's name reaches its own command."""
    from augsbert.face.cli import stage_names_as_commands

    parsers = commands()
    for s in STAGES:
        argv = stage_names_as_commands(["-q", s.name, "--spec", "{}"])
        assert argv == ["-q", s.command, "--spec", "{}"]
        assert parsers[argv[1]].get_default("handler").__closure__  # a stage command, not another one
    assert stage_names_as_commands(["plan", "--config", "x"]) == ["plan", "--config", "x"]
    assert ' augsbert {wildcards.stage:q} --spec' in (REPO / "workflow" / "rules" / "stages.smk").read_text()


# ------------------------------------------------------------------ jobs/: one thin entry module per stage

JOBS = REPO / "src" / "augsbert" / "jobs"
# the modules of jobs/ that are no stage's entry: plumbing every entry (or the CLI) shares
JOB_PLUMBING = {"__init__": "the package", "specs": "reading and checking a job's --spec",
                "job_inputs": "re-checking a job's raw files and models against its key"}
MAX_ENTRY_LINES = 100  # an entry reads its spec and inputs, calls library functions and writes the artifact


def entry_problems(path: Path) -> list[str]:
    """Why the entry module at `path` is not thin: a class, a public function besides `run`, too many lines."""
    tree = ast.parse(path.read_text())
    found = [f"{path.name}: defines class {node.name} (library code: move it to its layer)"
             for node in tree.body if isinstance(node, ast.ClassDef)]
    found += [f"{path.name}: defines {node.name}() (library code: move it to its layer, or make it a private "
              "helper of the entry)" for node in tree.body
              if isinstance(node, ast.FunctionDef) and node.name != "run" and not node.name.startswith("_")]
    if "run" not in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}:
        found.append(f"{path.name}: no `run`")
    lines = len(path.read_text().splitlines())
    if lines > MAX_ENTRY_LINES:
        found.append(f"{path.name}: {lines} lines (at most {MAX_ENTRY_LINES})")
    return found


def test_every_stage_runs_from_the_entry_module_named_after_it():
    for declared in STAGES:
        assert declared.runner == f"augsbert.jobs.{declared.name}:run", declared.name
        assert (JOBS / f"{declared.name}.py").is_file(), declared.name
        assert declared.load_runner() is importlib.import_module(f"augsbert.jobs.{declared.name}").run
    entries = {declared.name for declared in STAGES}
    others = {path.stem for path in JOBS.glob("*.py")} - entries
    assert others == set(JOB_PLUMBING), f"jobs/ holds modules that are neither an entry nor listed plumbing: " \
                                        f"{sorted(others - set(JOB_PLUMBING))}"


def test_entry_modules_are_thin_and_imported_by_no_module():
    """Entries hold no class and no public function besides `run` and stay short; nothing imports one (the CLI
    and the warm server reach them through `Stage.runner`), so what several use lives in a layer below."""
    found = [problem for declared in STAGES for problem in entry_problems(JOBS / f"{declared.name}.py")]
    assert not found, "\n".join(found)
    entries = {f"augsbert.jobs.{declared.name}" for declared in STAGES}
    _, edges, _ = import_graph(SRC)
    importers = sorted(f"{e.source} imports {e.target}" for e in edges if e.target in entries)
    assert not importers, "\n".join(importers)


def test_the_thin_entry_check_finds_library_code(tmp_path):
    job = tmp_path / "fat.py"
    job.write_text("class Scorer:\n    pass\n\n\ndef score(x):\n    return x\n\n\ndef _helper():\n    pass\n"
                   + "\n" * MAX_ENTRY_LINES)
    assert entry_problems(job) == [
        "fat.py: defines class Scorer (library code: move it to its layer)",
        "fat.py: defines score() (library code: move it to its layer, or make it a private helper of the entry)",
        "fat.py: no `run`", f"fat.py: {MAX_ENTRY_LINES + 10} lines (at most {MAX_ENTRY_LINES})"]


def test_the_hub_datasets_a_stage_downloads_are_in_its_declaration():
    """`augsbert fetch` lists what each node's stage declares (Stage.hub_datasets): a `download: true` dataset
    without local files, the STS suite's tasks read from the hub; nothing for a stage that declares none."""
    from types import SimpleNamespace

    from augsbert.stages import REGISTRY

    def node(settings):
        return SimpleNamespace(settings=settings)

    data, suite = REGISTRY["data"].hub_datasets, REGISTRY["suite"].hub_datasets
    assert data(node({"loader": "stsb", "download": True, "files": []})) == ["sentence-transformers/stsb"]
    assert data(node({"loader": "stsb", "download": True, "files": ["a.csv"]})) == []
    assert data(node({"loader": "stsb", "download": False, "files": []})) == []
    assert data(node({"loader": "lee", "download": True, "files": []})) == []
    assert suite(node({"sts": {"stsb": "hub", "sts12": "local", "sickr": "hub"}})) == ["mteb/stsbenchmark-sts",
                                                                                       "mteb/sickr-sts"]
    assert suite(node({})) == []
    assert [name for name, stage in REGISTRY.items() if stage.hub_datasets] == ["data", "suite"]
