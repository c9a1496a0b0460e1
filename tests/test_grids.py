"""Grids expand to ordinary experiments; the table layout dedupes shared models; seeds and suite tasks plan as stated."""

import pytest
import yaml

from augsbert.config.load import ConfigError, deep_merge, prepare_config, read_config
from augsbert.config.grids import experiment_name
from augsbert.plan import Plan
from augsbert.reporting.layout import row_label
from augsbert.reporting.layout import grid_spec
from conftest import REPO, plan_shipped

GRID = {
    "seeds": [1, 2],
    "options": {"teacher": {"epochs": 1}},
    "columns": {"lee": {"dataset": "lee"}},
    "axes": {"teacher": {"ce": {"teacher": {"arch": "ce"}}, "cbe": {"teacher": {"arch": "cbe"}}},
             "candidates": {"none": {"candidates": {"strategies": ["none"]}},
                          "bm25": {"candidates": {"strategies": ["bm25"], "pool": "train+unlabeled"}}}},
    "labels": {"bm25": "BM25", "ce": "Cross-Encoder"},
}


def plan_for(**override):
    return plan_shipped(override, grids=False)


def test_grid_expands_to_named_experiments_with_options_axes_and_columns():
    plan = plan_for(grids={"g": GRID})
    names = sorted(e for e in plan.experiments if e.startswith("g."))
    assert names == ["g.cbe_bm25.lee", "g.cbe_none.lee", "g.ce_bm25.lee", "g.ce_none.lee"]
    exp = plan.experiment("g.ce_bm25.lee")
    assert exp.seeds == [1, 2]
    assert exp.config["teacher"]["arch"] == "ce" and exp.config["teacher"]["epochs"] == 1
    assert exp.config["candidates"]["strategies"] == ["bm25"] and exp.config["candidates"]["pool"] == "train+unlabeled"
    assert exp.config["student"]["lr"] == 2e-5  # untouched keys come from `defaults`
    assert experiment_name("g", (), "lee") == "g.lee"


def test_grid_cells_share_every_common_stage():
    plan = plan_for(grids={"g": GRID})
    ce_none, ce_bm25 = plan.experiment("g.ce_none.lee").runs[1], plan.experiment("g.ce_bm25.lee").runs[1]
    cbe_none = plan.experiment("g.cbe_none.lee").runs[1]
    assert ce_none["teacher"] == ce_bm25["teacher"] != cbe_none["teacher"]
    assert ce_none["lower_bound"] == ce_bm25["lower_bound"] == cbe_none["lower_bound"]
    assert ce_none["zero_shot"] == cbe_none["zero_shot"]
    assert ce_none["student"] != ce_bm25["student"]


def test_table_rows_are_one_per_distinct_model_labelled_by_what_it_depends_on():
    spec = grid_spec(plan_for(grids={"g": GRID}), "g")
    labels = [r["label"] for r in spec["rows"]]
    assert labels == ["Zero-shot base model", "SBERT (lower bound)", "CE (upper bound)", "CBE (upper bound)",
                      "AugSBERT-Cross-Encoder-none", "AugSBERT-Cross-Encoder-BM25", "AugSBERT-cbe-none",
                      "AugSBERT-cbe-BM25"]
    teacher_ce = spec["rows"][2]
    assert teacher_ce["role"] == "teacher" and teacher_ce["cells"] == {"lee": "g.ce_none.lee"}
    assert spec["columns"] == ["lee"] and spec["metrics"] == ["spearman"] and len(spec["experiments"]) == 4


def test_row_labels():
    assert row_label("student", "CBE", ["CE", "BM25"]) == "AugSBERT-CE-BM25"
    assert row_label("student", "CE", ["CE"], "Distill") == "Distill-CE"
    assert row_label("teacher", "CBE", ["x"]) == "CBE (upper bound) [x]"
    assert row_label("lower_bound", "CBE", []) == "SBERT (lower bound)"


def test_a_static_students_row_says_it_is_the_static_one():
    """Issue 64 item 13: a static student's row read "AugSBERT", as the Transformer student's (its own-data run
    set `arch: static` in its experiment). Its kind follows the label unless a varying axis sets it (the compact
    grids' rows are labelled by their axis: "Compact-static", unchanged)."""
    from augsbert.reporting.console import human_name

    static = {**GRID, "options": {"teacher": {"epochs": 1}, "student": {"arch": "static"}}}
    labels = [r["label"] for r in grid_spec(plan_for(grids={"g": static}), "g")["rows"]]
    assert labels[-4:] == ["AugSBERT-Cross-Encoder-none (static)", "AugSBERT-Cross-Encoder-BM25 (static)",
                           "AugSBERT-cbe-none (static)", "AugSBERT-cbe-BM25 (static)"]
    assert labels[1] == "SBERT (lower bound)"  # the lower bound is the full Transformer
    one = {"columns": {"lee": {"dataset": "lee"}}, "options": {"student": {"arch": "static",
                                                                          "static_pretrain": "full"}}}
    assert [r["label"] for r in grid_spec(plan_for(grids={"one": one}), "one")["rows"]][-1] == \
        "AugSBERT (static, pre-trained)"
    compact = [r["label"] for r in grid_spec(plan_shipped(plan=()), "demo_compact")["rows"]]
    assert compact[-4:] == ["Compact-full", "Compact-3-layer", "Compact-Matryoshka", "Compact-static"]
    # a results file's console table (its experiment's config)
    assert human_name("student", "CE", {"student": {"arch": "static"}}) == "AugSBERT (static)"
    assert human_name("student", "CE", {"student": {"init": "layers", "layers": [0, 2, 4]}}) == \
        "AugSBERT (layers 0, 2, 4)"
    assert human_name("student", "CE", {"student": {"arch": "transformer"}}) == human_name("student", "CE") == \
        "AugSBERT"


def test_grid_errors_name_the_key():
    with pytest.raises(ConfigError, match="grids.g: expands to experiment 'g.lee'"):
        plan_for(grids={"g": {"columns": {"lee": {}}}}, experiments={"g.lee": {"dataset": "lee"}})
    with pytest.raises(ConfigError, match="unknown grid 'nope'"):
        grid_spec(plan_for(), "nope")
    with pytest.raises(ConfigError, match="grids.g.columns"):
        plan_for(grids={"g": {"columns": {}}})


def test_command_line_grid_values_are_coerced():
    # `snakemake --config 'grids={g: {...}}'` hands every nested value over as a string
    grid = deep_merge(GRID, {"options": {"student": {"lr": "3e-5", "epochs": "2"}}})
    exp = plan_for(grids={"g": grid}).experiment("g.ce_none.lee")
    assert exp.config["student"]["lr"] == 3e-5 and exp.config["student"]["epochs"] == 2


def test_adding_a_seed_adds_only_that_seeds_chain():
    before = plan_for(experiments={"demo_cbe_distill": {"seeds": [42, 43]}})
    after = plan_for(experiments={"demo_cbe_distill": {"seeds": [42, 43, 44]}})
    old = before.experiment("demo_cbe_distill").runs
    new = after.experiment("demo_cbe_distill").runs
    assert new[42] == old[42] and new[43] == old[43]
    fresh = set(new[44].values()) - {k for roles in old.values() for k in roles.values()}
    # everything seed-dependent is new; data, zero-shot and its suite are shared
    assert {after.node(k).stage for k in fresh} == {"teacher", "labels", "student", "suite"}
    assert new[44]["zero_shot"] == new[42]["zero_shot"] and new[44]["data"] == new[42]["data"]


def test_suite_tasks_follow_the_files_present(tmp_path):
    (tmp_path / "sts_suite").mkdir()
    (tmp_path / "sts_suite" / "sts12.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1\n")
    (tmp_path / "useb" / "data-eval" / "askubuntu").mkdir(parents=True)
    plan = plan_for(data_dir=str(tmp_path))
    key = plan.experiment("demo_zeroshot").runs[42]["zero_shot_suite"]
    params = plan.node(key).settings
    assert params["sts"] == {"sts12": str(tmp_path / "sts_suite" / "sts12.tsv")}
    assert params["useb"] == {"askubuntu": str(tmp_path / "useb" / "data-eval" / "askubuntu")}
    assert set(params["skipped"]) == {"sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "cqadupstack",
                                      "twitterpara", "scidocs", "topic"}
    assert "no file" in params["skipped"]["sts13"] and params["skipped"]["topic"] == "the dataset has no topic labels"
    assert plan.raw_inputs(key) == sorted([params["sts"]["sts12"], params["useb"]["askubuntu"]])
    # a new file is a new key (the old evaluation stays cached); hub fetching lists the task instead
    (tmp_path / "sts_suite" / "sts13.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t1\n")
    assert plan_for(data_dir=str(tmp_path)).experiment("demo_zeroshot").runs[42]["zero_shot_suite"] != key
    key = plan_for(data_dir=str(tmp_path)).experiment("demo_zeroshot").runs[42]["zero_shot_suite"]
    # files enter the key by content: touching one changes nothing, editing one changes the key
    import os

    os.utime(tmp_path / "sts_suite" / "sts13.tsv", (1, 1))
    assert plan_for(data_dir=str(tmp_path)).experiment("demo_zeroshot").runs[42]["zero_shot_suite"] == key
    (tmp_path / "sts_suite" / "sts13.tsv").write_text("sentence1\tsentence2\tscore\na\tb\t2\n")
    assert plan_for(data_dir=str(tmp_path)).experiment("demo_zeroshot").runs[42]["zero_shot_suite"] != key
    hub = plan_for(data_dir=str(tmp_path), defaults={"suite": {"sts_hub": True}})
    assert hub.node(hub.experiment("demo_zeroshot").runs[42]["zero_shot_suite"]).settings["sts"]["sickr"] == "hub"


def test_no_suites_means_no_suite_jobs_and_bws_gets_topics():
    plan = plan_for(defaults={"suite": {"suites": []}})
    assert not any(role.endswith("_suite") for role in plan.experiment("demo_cbe_distill").runs[42])
    bws = plan_for()
    params = bws.node(bws.experiment("bws_cbe").runs[42]["student_suite"]).params
    assert params["topic"]["lr"] == 1e-3 and params["topic"]["epochs"] == 10


def test_thesis_grids_plan():
    plan = Plan(prepare_config(read_config(REPO / "config" / "config.yaml")))
    semi = grid_spec(plan, "augsbert_semi")
    assert semi["columns"] == ["spanish_sts", "bws_cross_topic", "bws_in_topic"]
    assert len(semi["experiments"]) == 2 * 5 * 3
    assert [r["label"] for r in semi["rows"]][:3] == ["SBERT (lower bound)", "CE (upper bound)", "CBE (upper bound)"]
    assert "AugSBERT-CBE-S.S." in [r["label"] for r in semi["rows"]]
    distill = grid_spec(plan, "distill")
    losses = ["cosine", "CoSENT", "AnglE", "MNRL"]  # the student.loss axis: the lower bound learns with it too
    assert [r["label"] for r in distill["rows"]] == [f"SBERT (lower bound) [{x}]" for x in losses] + [
        f"Distill-{t}-{x}" for t in ("CBE", "CE") for x in losses]
    transfer = plan.experiment("distill.ce_cosine.stsb2bws")
    assert transfer.config["source"] == "stsb" and transfer.config["candidates"]["strategies"] == ["target_pairs"]


# ---- checkpoint selection of the paper grids (issue 28): as each source selected, read from the planned specs
PAPER_SELECTION = {"unsupervised": "last",          # TSDAE App. B fixed steps; thesis 5.4.2 12.5K steps
                   "consert_ae": "held_out_loss",   # seed 000 5.2.2: validation loss every 250 steps
                   "simcse_variants": "target_dev",  # seed 001 5.1: best on STS-B dev
                   "rcl": "target_dev"}              # seed 002 App. A: STS-B dev every 10 %


def pretrain_specs(plan, grid: str) -> list[dict]:
    """The params of every pretrain node the grid plans (each cell, each seed)."""
    spec = grid_spec(plan, grid)
    nodes = {key for name in spec["experiments"] for roles in plan.experiment(name).runs.values()
             for key in [roles.get("pretrained")] if key}
    return [plan.node(key).params for key in sorted(nodes)]


@pytest.mark.parametrize("grid", sorted(PAPER_SELECTION))
def test_paper_grid_selects_checkpoints_as_its_source(grid):
    plan = Plan(prepare_config(read_config(REPO / "config" / "config.yaml"), lazy=True))
    specs = pretrain_specs(plan, grid)
    assert specs and {s["selection"] for s in specs} == {PAPER_SELECTION[grid]}
    if grid == "consert_ae":
        assert {s["eval_steps"] for s in specs} == {250}


def test_no_paper_grid_leaves_selection_to_the_schema_default():
    """`target_dev` is a choice a paper grid states, never the silent default: every grid that pre-trains
    (demo grids aside) sets `pretrain.selection` in its shared options."""
    raw = read_config(REPO / "config" / "config.yaml")
    for name, grid in raw["grids"].items():
        pretrains = any((value or {}).get("pretrain", {}).get("objective") for axis in grid.get("axes", {}).values()
                        for value in axis.values()) or grid.get("options", {}).get("pretrain", {}).get("objective")
        if pretrains and not name.startswith("demo"):
            assert "selection" in grid["options"]["pretrain"], name


def test_unsupervised_lambda_axis_plans_both_readings_for_the_multi_task_rows_only():
    plan = Plan(prepare_config(read_config(REPO / "config" / "config.yaml"), lazy=True))
    specs = pretrain_specs(plan, "unsupervised")
    multi = {(s["objective"], s["pooling"], s["aux_weight"], s.get("aux_weight_on", "contrastive")) for s in specs
             if s["objective"] in ("mlm+simcse", "mlm+nm", "tsdae+nm")}
    assert multi == {(o, p, 0.1, on) for o in ("mlm+simcse", "mlm+nm", "tsdae+nm") for p in ("cls", "mean")
                     for on in ("contrastive", "main")}
    others = [s for s in specs if s["objective"] not in ("mlm+simcse", "mlm+nm", "tsdae+nm")]
    assert others and not any("aux_weight" in s or "aux_weight_on" in s for s in others)
    # a single-objective row is one artifact in both cells of the λ axis
    simcse = plan.experiment("unsupervised.simcse_cls_lc01.useb").runs[42]["pretrained"]
    assert plan.experiment("unsupervised.simcse_cls_lm01.useb").runs[42]["pretrained"] == simcse


def test_unsupervised_augsbert_rows_are_the_thesis_setup():
    """Thesis 5.4.3, the grid's default: RoBERTa-base; MLM adaptation 12.5K steps of 64 at 3e-5; CBE teacher 5
    epochs on STS-B (embeddings frozen after the adaptation); semantic-search top-1 + random pairs of the titles
    (thesis 6.2), the same pairs MLM trains on (4.3.1), labelled; students 12.5K steps of 64 on them alone,
    FullDomainSBERT's from the adapted checkpoint."""
    plan = Plan(prepare_config(read_config(REPO / "config" / "config.yaml"), lazy=True))
    for row, adapted in (("augsbert", False), ("domain", True), ("full_domain", True)):
        runs = plan.experiment(f"unsupervised.{row}_lc01.useb").runs[42]
        student, candidates = plan.node(runs["student"]), plan.node(runs["candidates"])
        teacher = plan.node(dict(plan.node(runs["labels"]).inputs)["teacher"])
        roberta = {"model": "hub:FacebookAI/roberta-base@main"}
        assert student.params["model_identity"] == teacher.params["model_identity"] == roberta
        assert (student.params["max_steps"], student.params["batch_size"], "epochs" in student.params) == (
            12500, 64, False)
        assert (candidates.params["strategies"], candidates.params["top_k"], candidates.params["pool"]) == (
            ["semantic_search", "random"], 1, "unlabeled")
        assert plan.node(runs["labels"]).params["relabel_gold"] is False
        assert (teacher.params["arch"], teacher.params["epochs"], teacher.params["freeze_embeddings"]) == (
            "cbe", 5, adapted)
        assert ("adapt" in runs) == adapted and "lower_bound" not in runs
        if adapted:
            adapt = plan.node(runs["adapt"])
            assert (adapt.params["max_steps"], adapt.params["batch_size"], adapt.params["lr"]) == (12500, 64, 3e-5)
            assert adapt.params["model_identity"] == roberta and dict(teacher.inputs)["init"] == adapt.key
            assert dict(adapt.inputs)["candidates"] == candidates.key and adapt.params["pairs"] == "candidates"
        assert dict(student.inputs).get("init") == (runs["adapt"] if row == "full_domain" else None)


def test_consert_ae_trains_wangs_epochs_with_his_warm_up():
    """Seed 000 Table 5.3 (910 warm-up steps, lr 3e-5, batch 64) and 5.3.5-5.3.7: Table 5.4's rows and the 1-epoch
    SimCSE train one epoch of 100k (1,563 steps of 64), the autoencoders and multi-task rows three (4,689)."""
    plan = Plan(prepare_config(read_config(REPO / "config" / "config.yaml"), lazy=True))
    steps = {}
    for name in grid_spec(plan, "consert_ae")["experiments"]:
        params = plan.node(plan.experiment(name).runs[1]["pretrained"]).params
        assert (params["warmup_steps"], params["lr"], params["batch_size"], params["scheduler"]) == (
            910, 3e-5, 64, "linear")
        steps[name.split(".")[1]] = params["max_steps"]
    assert steps == {**{m: 1563 for m in ("consert1", "consert2", "simcse")},
                     **{m: 4689 for m in steps if m not in ("consert1", "consert2", "simcse")}}
    assert len(steps) == 14


def test_early_stopping_grids_key_patience_only_where_set():
    """Issue 25: the patience axis; the "off" rows are the thesis protocol's own artifacts (`bws_cbe`)."""
    plan = plan_for(grids=read_config(REPO / "config" / "config.yaml")["grids"])
    for grid, roles in (("early_stopping", ("teacher", "lower_bound", "student")),
                        ("demo_early_stopping", ("teacher", "lower_bound"))):
        spec = grid_spec(plan, grid)
        assert spec["metrics"] == ["spearman", "wall_time_s", "epochs_trained"]
        column = "bws" if grid == "early_stopping" else "lee"
        on, off = (plan.experiment(f"{grid}.{value}.{column}") for value in ("1", "off"))
        for role in roles:
            assert plan.node(on.runs[42][role]).params["early_stopping_patience"] == 1, (grid, role)
            assert "early_stopping_patience" not in plan.node(off.runs[42][role]).params, (grid, role)
    assert plan.experiment("early_stopping.off.bws").runs[42] == {
        role: key for role, key in plan.experiment("bws_cbe").runs[42].items() if role not in ("zero_shot", "zero_shot_suite")}


@pytest.mark.parametrize("path", sorted((REPO / "config" / "measure").glob("*.yaml")), ids=lambda p: p.name)
def test_measure_configs_plan_their_grids(path):
    """Each config/measure file, read over the shipped config as its header says, plans every grid it defines."""
    own = read_config(path)
    plan = Plan(prepare_config(deep_merge(read_config(REPO / "config" / "config.yaml"), own), lazy=True))
    for grid in own["grids"]:
        spec = grid_spec(plan, grid)
        assert spec["rows"] and spec["experiments"], grid
        assert all(e.startswith(f"{grid}.") for e in spec["experiments"]), spec["experiments"]
