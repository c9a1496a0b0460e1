"""The stage registry (augsbert.stages) is the one place a stage is declared: every stage has a command,
an entry point, job sizes, a config section and a rule, all under its one name."""

import argparse
import re

import pytest

from augsbert.face.cli import build_parser
from augsbert.config.schema import load_schema
from augsbert.training.distributed import DISTRIBUTED_COMMANDS
from augsbert.stages import REGISTRY, STAGES, stage
from augsbert.scheduling.resources import job_resources, needs_gpu
from conftest import REPO


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
