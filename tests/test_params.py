"""Typed stage parameters (augsbert.params): every planned spec reads back through its stage's class, and
a spec with an unknown, missing or mistyped parameter stops with one message naming it."""

import json
from dataclasses import FrozenInstanceError
from typing import Literal

import pytest
from conftest import REPO

from augsbert.face.cli import main
from augsbert.errors import ConfigError
from augsbert.params import Params
from augsbert.stages import REGISTRY
from augsbert.stages.student import StudentParams
from augsbert.stages.teacher import TeacherParams
from augsbert.stages.training_options import SeedOptimization


def test_every_stage_declares_its_params():
    for stage in REGISTRY.values():
        assert isinstance(stage.params, type) and issubclass(stage.params, Params), stage.name


def holds(back, written) -> bool:
    """Every value `written` has is in `back` (which also has the defaults of what was left out)."""
    if isinstance(written, dict):
        return isinstance(back, dict) and all(k in back and holds(back[k], v) for k, v in written.items())
    return back == written and type(back) is type(written) or isinstance(written, int) and back == float(written)


def test_every_spec_of_the_shipped_config_reads_back_through_its_stage_class():
    """The planning hooks write plain JSON (the keys are made from it); the classes must accept all of it, and
    give back each value the plan wrote."""
    from augsbert.config.load import prepare_config, read_config
    from augsbert.plan import Plan

    plan = Plan(prepare_config(read_config(REPO / "config" / "config.yaml")))
    plan.plan_all()
    seen = set()
    for key, node in plan.nodes.items():
        spec = plan.spec(key)
        params = REGISTRY[node.stage].params.from_json(spec["params"], key)
        back = params.to_json()
        assert holds(back, spec["params"]), key
        seen.add(node.stage)
    # the shipped grids plan every stage but the sharded ones (candidates.shards > 1 is a large-pool option,
    # queries.shards > 1 a large-corpus one: tests/test_gpl.py plans it)
    assert seen == set(REGISTRY) - {"pool_index", "candidate_shard", "label_shard", "query_shard"}


TEACHER = {"model": "m", "batch_size": 16, "lr": 2e-5, "warmup_ratio": 0.1, "max_length": 64, "seed": 1,
           "epochs": 1, "arch": "cbe", "symmetric": True, "seed_optimization": {"trials": 2, "fraction": 0.5},
           "freeze_embeddings": False}


def test_values_are_typed_and_defaults_fill_what_a_spec_leaves_out():
    params = TeacherParams.from_json({**TEACHER, "lr": 1})
    assert params.lr == 1.0 and isinstance(params.lr, float)  # an int where a float is asked: converted
    assert params.seed_optimization == SeedOptimization(trials=2, fraction=0.5)
    # what a CBE's spec leaves out reads as the section's default (and is not read: a CBE's loss is MSE)
    assert (params.loss, params.activation, params.eval_batch_size, params.topic_prompt) == ("bce", "sigmoid", 64, None)
    with pytest.raises(FrozenInstanceError):
        params.lr = 3.0
    assert params.replace(lr=3.0).lr == 3.0 and params.lr == 1.0
    assert TeacherParams.from_json(params.to_json()) == params


@pytest.mark.parametrize("change,message", [
    ({"lrr": 1e-5}, "spec params: unknown parameter 'lrr' for TeacherParams"),
    ({"lr": None}, "spec params.lr: expected float, got NoneType None"),
    ({"lr": "1e-5"}, "spec params.lr: expected float, got str '1e-5'"),
    ({"epochs": 1.5}, "spec params.epochs: expected int, got float 1.5"),
    ({"epochs": True}, "spec params.epochs: expected int, got bool True"),  # bool is an int to Python
    ({"symmetric": 1}, "spec params.symmetric: expected bool, got int 1"),
    ({"arch": "be"}, "spec params.arch: expected one of 'ce', 'cbe', got 'be'"),
    ({"seed_optimization": {"trials": "2"}}, "spec params.seed_optimization.trials: expected int, got str '2'"),
    ({"seed_optimization": [2]}, "spec params.seed_optimization: expected an object, got list [2]"),
    ({"topic_prompt": 3}, "spec params.topic_prompt: expected str, got int 3"),
    ({"model_identity": {"model": 3}}, "spec params.model_identity.model: expected str, got int 3"),
])
def test_a_wrong_parameter_is_named(change, message):
    with pytest.raises(ConfigError) as err:
        TeacherParams.from_json({**TEACHER, **change}, "spec params")
    assert str(err.value).startswith(message)


def test_a_missing_parameter_is_named():
    with pytest.raises(ConfigError, match="^spec params: missing parameter 'seed' for TeacherParams$"):
        TeacherParams.from_json({k: v for k, v in TEACHER.items() if k != "seed"}, "spec params")
    # an option of the teacher section a spec leaves out reads as the section's default (the schema's)
    assert TeacherParams.from_json({k: v for k, v in TEACHER.items() if k != "arch"}).arch == "cbe"
    with pytest.raises(ConfigError, match="^params: expected an object, got list$"):
        TeacherParams.from_json([1])


def test_nested_lists_and_unions():
    @__import__("dataclasses").dataclass(frozen=True, kw_only=True)
    class Example(Params):
        files: str | list[str]
        pairs: list[list[str]] = ()
        mode: Literal["a", "b"] | None = None

    assert Example.from_json({"files": ["x", "y"], "pairs": [["n", "d"]]}) == Example(files=["x", "y"],
                                                                                       pairs=[["n", "d"]])
    assert Example.from_json({"files": "x", "mode": None}).files == "x"
    with pytest.raises(ConfigError, match=r"^params.files: expected str \| list\[str\], got int 3$"):
        Example.from_json({"files": 3})
    with pytest.raises(ConfigError, match=r"^params.pairs\[0\]\[1\]: expected str, got int 2$"):
        Example.from_json({"files": "x", "pairs": [["n", 2]]})


def test_a_resolved_field_reads_and_writes_its_options_name():
    """issue 66: a suite spec's `topic` (the topic task resolved for the dataset) is the field `topic_task`, so the
    option's name stands for one type in the class; the spec, and so the key, keeps `topic`."""
    from augsbert.stages.suite import SuiteParams, TopicTask

    raw = {"batch_size": 8, "max_length": 64, "topic": {"test_fraction": 0.2, "prompted": "¥"},
           "positive_threshold": 0.8, "retrieval": {"split": "test"}}
    params = SuiteParams.from_json(raw)
    assert params.topic_task == TopicTask(test_fraction=0.2, prompted="¥") and params.diagnostics_threshold == 0.8
    assert params.retrieval_task == {"split": "test"} and params.mteb_tasks is None
    assert not hasattr(params, "topic") and not hasattr(params, "positive_threshold")
    back = params.to_json()
    assert holds(back, raw) and "topic_task" not in back and back["mteb"] is None
    assert set(params.spec_json()) == set(raw)  # what the spec held, under its names
    changed = params.replace(mteb_tasks={"STS12": "hub"}).spec_json()
    assert set(changed) == {*raw, "mteb"} and changed["mteb"] == {"STS12": "hub"}
    with pytest.raises(ConfigError, match="^spec params.topic.test_fraction: expected float, got str 'x'$"):
        SuiteParams.from_json({**raw, "topic": {"test_fraction": "x"}}, "spec params")
    with pytest.raises(ConfigError, match="^params: unknown parameter 'topic_task' for SuiteParams"):
        SuiteParams.from_json({"topic_task": None})


def test_the_data_stage_keeps_each_loaders_own_options():
    from augsbert.stages.data import DataParams

    raw = {"dataset": "bws", "loader": "bws_cross_topic", "path": "bws/x.csv", "split_sizes": [1, 2, 3]}
    params = DataParams.from_json(raw)
    assert params.options == {"path": "bws/x.csv", "split_sizes": [1, 2, 3]} and params.on_bad_rows == "error"
    assert holds(params.to_json(), raw)
    with pytest.raises(ConfigError, match="^params.on_bad_rows: expected one of 'error', 'skip', got 'drop'$"):
        DataParams.from_json({**raw, "on_bad_rows": "drop"})


def test_the_command_refuses_a_mistyped_spec_before_running(tmp_path, capsys):
    spec = {"stage": "student", "params": {**TEACHER, "use_gold_labels": True, "selection": "last", "lr": "fast"},
            "inputs": {"data": str(tmp_path / "data")}}
    spec["params"].pop("arch"), spec["params"].pop("symmetric")
    StudentParams.from_json({**spec["params"], "lr": 1.0})  # the rest is a valid student spec
    (tmp_path / "s.json").write_text(json.dumps(spec))
    assert main(["-q", "student", "--spec", f"@{tmp_path / 's.json'}", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"--spec @{tmp_path / 's.json'} params.lr: expected float, got str 'fast'" in err
    assert not (tmp_path / "out").exists()


def test_early_stopping_enters_a_key_only_when_set():
    from conftest import plan_shipped

    def student(patience):
        plan = plan_shipped({"experiments": {"demo_cbe": {"student": {"early_stopping_patience": patience}}}},
                            plan=("demo_cbe",))
        key = plan.experiment("demo_cbe").runs[42]["lower_bound"]
        return key, plan.spec(key)["params"]

    default_key, default_params = student(0)
    assert "early_stopping_patience" not in default_params  # off: the keys planned before the option stay
    key, params = student(2)
    assert key != default_key and params["early_stopping_patience"] == 2
    from augsbert.stages.student import StudentParams

    assert StudentParams.from_json(params).early_stopping_patience == 2


@pytest.mark.parametrize("section,role", [("teacher", "teacher"), ("student", "lower_bound"), ("adapt", "adapt"),
                                          ("pretrain", "pretrained")])
def test_torch_compile_enters_a_key_only_when_set(section, role):
    from conftest import plan_shipped

    def planned(compiled):
        options = {"teacher": {"arch": "cbe"}, section: {"torch_compile": compiled}}
        if section == "adapt":
            options["adapt"]["variant"] = "domain"
        if section == "pretrain":
            options.update(models=["zero_shot"], pretrain={"objective": "simcse", "torch_compile": compiled})
        plan = plan_shipped({"experiments": {"demo_cbe": options}}, plan=("demo_cbe",))
        key = plan.experiment("demo_cbe").runs[42][role]
        return key, plan.spec(key)["params"]

    default_key, default_params = planned(False)
    assert "torch_compile" not in default_params  # off: the keys planned before the option stay
    key, params = planned(True)
    assert key != default_key and params["torch_compile"] is True


def test_training_arguments_compile_only_when_asked_and_change_nothing_on_cpu(tmp_path):
    from transformers import TrainingArguments

    from augsbert.training.common import device_flags

    assert device_flags("cpu") == {} and device_flags("mps") == {}
    assert device_flags("cpu", torch_compile=True) == {"torch_compile": True}
    cuda = device_flags("cuda:1", torch_compile=True)
    assert cuda == {"torch_compile": True, "logging_nan_inf_filter": False, "accelerator_config": {"non_blocking": True},
                    "dataloader_pin_memory": True, "optim": "adamw_torch_fused"}
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **cuda)  # names and values transformers takes
    assert args.accelerator_config.non_blocking and args.optim == "adamw_torch_fused" and args.torch_compile
