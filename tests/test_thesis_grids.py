"""The thesis' grids as the thesis ran them (issue 38): each changed cell's planned spec carries the thesis'
setting (base model, MLM on the pairs the teacher labels, no re-labelled gold in the students, steps or epochs),
and the adapt stage trains on those very pairs."""

import math

import pandas as pd
import pytest

from augsbert.config.load import ConfigError
from augsbert.reporting.layout import grid_spec
from conftest import REPO, plan_shipped

ROBERTA = "FacebookAI/roberta-base"


@pytest.fixture(scope="module")
def plan():
    return plan_shipped(plan=())  # lazy: the cells looked up below are planned


def cells(plan, grid: str) -> list[str]:
    from augsbert.config.grids import cells as grid_cells

    return sorted({c.experiment for c in grid_cells(grid, plan.config["grids"][grid])})


def run_nodes(plan, experiment: str) -> dict:
    exp = plan.experiment(experiment)
    return {role: plan.nodes[key] for role, key in exp.runs[exp.seeds[0]].items()}


@pytest.mark.parametrize("grid,epochs", [("topics_ukp", 5), ("topics_20ng", 5)])
def test_topic_grids_are_roberta_mlm_on_the_labelled_pairs_for_5_epochs_without_gold(plan, grid, epochs):
    experiments = cells(plan, grid)
    assert len(experiments) == 6
    for name in experiments:
        nodes = run_nodes(plan, name)
        # thesis 5.6.1 "we use the RoBERTa model": every model of the cell, baselines included
        for role in ("zero_shot", "classifier", "adapt", "candidates", "student"):
            assert nodes[role].settings["model"] == ROBERTA, (name, role)
        labels = nodes["labels"]
        teacher = plan.nodes[dict(labels.inputs)["teacher"]]
        assert teacher.settings["model"] == ROBERTA
        adapt = nodes["adapt"]
        # 4.3.1: MLM trains on the candidates the teacher labels; 5.6.1: "for 5 epochs"
        assert dict(adapt.inputs)["candidates"] == dict(labels.inputs)["candidates"] == nodes["candidates"].key
        assert adapt.settings["pairs"] == "candidates" and adapt.settings["epochs"] == epochs
        assert "max_steps" not in adapt.settings
        assert nodes["candidates"].settings["strategies"] == ["semantic_search", "random"]
        # 5.6.1: the Bi-Encoders learn (x1, x2, s) of the scored pairs alone
        assert labels.settings["relabel_gold"] is False
        assert nodes["student"].settings["use_gold_labels"] is False


def test_unsupervised_augsbert_rows_share_semantic_plus_random_pairs_and_train_12_5k_steps(plan):
    rows = [e for e in cells(plan, "unsupervised") if e.split(".")[1].split("_")[0] in ("augsbert", "domain", "full")]
    assert len(rows) == 6  # 3 rows x 2 values of the weight axis (which they do not read)
    for name in rows:
        nodes = run_nodes(plan, name)
        assert nodes["student"].settings["model"] == ROBERTA
        labels, candidates = nodes["labels"], nodes["candidates"]
        assert candidates.settings["strategies"] == ["semantic_search", "random"]  # thesis 6.2
        assert labels.settings["relabel_gold"] is False and nodes["student"].settings["use_gold_labels"] is False
        if "adapt" in nodes:  # DomainSBERT, FullDomainSBERT
            adapt = nodes["adapt"]
            assert dict(adapt.inputs)["candidates"] == dict(labels.inputs)["candidates"] == candidates.key
            assert adapt.settings["pairs"] == "candidates" and adapt.settings["max_steps"] == 12500
            assert "epochs" not in adapt.settings and adapt.settings["model"] == ROBERTA
        else:
            assert name.split(".")[1].startswith("augsbert")


def test_adapt_pairs_and_epochs_enter_the_key_only_when_set_and_kde_is_refused():
    default = plan_shipped(grids=False, plan=("demo_domain_cbe",))
    base = default.experiment("demo_domain_cbe").runs[42]
    assert set(dict(default.nodes[base["adapt"]].inputs)) == {"data"}
    assert not {"pairs", "epochs"} & set(default.nodes[base["adapt"]].settings)
    shared = plan_shipped({"experiments": {"demo_domain_cbe": {"adapt": {"pairs": "candidates", "epochs": 2}}}},
                          grids=False).experiment("demo_domain_cbe").runs[42]
    assert shared["candidates"] == base["candidates"]  # the same candidates, now also the adaptation's input
    assert shared["adapt"] != base["adapt"]
    with pytest.raises(ConfigError, match="adapt.pairs: candidates, but candidates.strategies has kde"):
        plan_shipped({"experiments": {"demo_domain_cbe": {"adapt": {"pairs": "candidates"},
                                                          "candidates": {"strategies": ["bm25", "kde"]}}}}, grids=False)


def test_adapt_stage_trains_on_the_candidates_for_the_epochs_asked(tiny_model, tmp_path):
    """`pairs: candidates`: the adaptation's pairs are the candidates, a pair a second strategy repeats (either
    order) once, as the labels stage keeps them; `epochs` sets the steps from the pairs it trains on."""
    from augsbert.jobs.adapt import run

    data, cand = tmp_path / "data", tmp_path / "cand"
    data.mkdir(), cand.mkdir()
    words = "dog cat horse bank loan rain snow goal team piano song bread".split()
    texts = [f"{words[i % 12]} {words[(i * 5) % 12]} number {i}" for i in range(40)]
    table = pd.DataFrame({"sentence1": texts[:20], "sentence2": texts[20:], "score": 0.5})
    table.to_parquet(data / "train.parquet", index=False)
    firsts = pd.DataFrame({"sentence1": texts[:20], "sentence2": texts[1:21], "strategy": "semantic_search"})
    repeated = firsts.head(3).rename(columns={"sentence1": "sentence2", "sentence2": "sentence1"})
    others = pd.DataFrame({"sentence1": texts[:10], "sentence2": texts[30:40], "strategy": "random"})
    candidates = pd.concat([firsts, repeated.assign(strategy="random")[firsts.columns], others])
    candidates.to_parquet(cand / "candidates.parquet", index=False)
    params = dict(model=tiny_model, epochs=2, pairs="candidates", batch_size=4, lr=1e-3, warmup_ratio=0.1,
                  weight_decay=0.0, max_length=32, mask_probability=0.2, masking="uniform", seed=1,
                  checkpoint_steps=100, held_out=0.1, pool="train", exclude_eval_sentences=True,
                  config_kwargs={"num_hidden_layers": 1})
    spec = {"stage": "adapt", "key": "t", "params": params, "inputs": {"data": str(data), "candidates": str(cand)}}
    metrics = run(spec, tmp_path / "out")
    pairs = pd.read_parquet(tmp_path / "out" / "pairs.parquet")
    assert pairs[["sentence1", "sentence2", "strategy"]].values.tolist() == \
        candidates.iloc[[*range(20), *range(23, 33)]].values.tolist()
    assert metrics["pair_source"] == "candidates" and metrics["pairs"] == 30 and metrics["held_out_pairs"] == 3
    assert metrics["steps"] == 2 * math.ceil(27 / 4)


def test_no_setting_is_the_thesis_where_the_thesis_states_none():
    """Issue 38: the mask rate / scheme, re-labelled gold in the unsupervised and topic students, BM25 MLM pairs
    and the seeds 42/43/44 are not the thesis' settings: no sentence of the docs, the schema or the config names
    one of them within a few words of "the thesis'", "as the thesis" or "the thesis averages"."""
    import re

    objectives = REPO / "src" / "augsbert" / "objectives"  # the objectives' options: the schema's descriptions
    files = [REPO / "README.md", REPO / "src" / "augsbert" / "schemas" / "config.schema.yaml",
             *sorted(objectives.glob("*.py")),
             *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "config").rglob("*.yaml"))]
    settings = re.compile(r"mask rate|masking|\[MASK\]|mask_probability|relabel_gold|re-label|bm25|42/43/44|0\.2\b",
                          re.IGNORECASE)
    phrase = re.compile(r"the thesis'|as the thesis|the thesis averages", re.IGNORECASE)
    found = []
    for path in files:
        for paragraph in re.split(r"\n\s*\n|\n(?=\s*[#|-])", path.read_text()):
            for sentence in re.split(r"(?<=[.;|])\s", re.sub(r"\s+", " ", paragraph)):
                for match in phrase.finditer(sentence):
                    near = sentence[max(0, match.start() - 50):match.end() + 60]
                    if settings.search(near):
                        found.append(f"{path.relative_to(REPO)}: ...{near}...")
    assert not found, "\n".join(found)


def test_grids_of_tables_6_1_to_6_3_plan_as_5_2_1_states(plan):
    """Tables 6.1 / 6.3: Bi-Encoder (lower bound), CE and CBE on STS-B, BERT and RoBERTa, three epochs; Table 6.2:
    the BERT CE scored with sigmoid, tanh and no activation. Their demo variants plan on Lee."""
    basics = grid_spec(plan, "cbe_basics")
    assert [r["label"] for r in basics["rows"]] == [
        "SBERT (lower bound) [BERT]", "SBERT (lower bound) [RoBERTa]", "CE (upper bound) [BERT]",
        "CBE (upper bound) [BERT]", "CE (upper bound) [RoBERTa]", "CBE (upper bound) [RoBERTa]"]
    for name, (base, arch) in {"cbe_basics.bert_ce.stsb": ("google-bert/bert-base-uncased", "ce"),
                               "cbe_basics.roberta_cbe.stsb": (ROBERTA, "cbe")}.items():
        nodes = run_nodes(plan, name)
        assert nodes["teacher"].settings["model"] == nodes["lower_bound"].settings["model"] == base
        assert nodes["teacher"].settings["arch"] == arch and nodes["teacher"].settings["epochs"] == 3
        assert nodes["lower_bound"].settings["epochs"] == 3
        assert nodes["teacher"].settings["lr"] == 2e-5 and nodes["teacher"].settings["batch_size"] == 16  # 5.1
    activations = grid_spec(plan, "ce_activations")
    assert [r["label"] for r in activations["rows"]] == [
        f"CE (upper bound) [{a}]" for a in ("No Activation", "Sigmoid", "Tanh")]
    teacher = run_nodes(plan, "ce_activations.tanh.stsb")["teacher"]
    assert teacher.settings["activation"] == "tanh" and teacher.settings["model"] == "google-bert/bert-base-uncased"
    assert len(grid_spec(plan, "demo_cbe_basics")["rows"]) == 3 and len(grid_spec(plan, "demo_ce_activations")["rows"]) == 3


def test_iterative_kde_accept_enters_the_labels_key_only_when_greater():
    base = plan_shipped(grids=False, plan=("demo_sampling_cbe",)).experiment("demo_sampling_cbe").runs[42]
    strict_plan = plan_shipped({"experiments": {"demo_sampling_cbe": {"candidates": {"iterative_kde_accept": "greater"}}}},
                               grids=False)
    strict = strict_plan.experiment("demo_sampling_cbe").runs[42]
    assert strict["candidates"] == base["candidates"] and strict["labels"] != base["labels"]
    assert strict_plan.nodes[strict["labels"]].settings["iterative_kde_accept"] == "greater"
    no_kde = plan_shipped({"experiments": {"demo_augsbert_cbe": {"candidates": {"iterative_kde_accept": "greater"}}}},
                          grids=False).experiment("demo_augsbert_cbe").runs[42]
    assert no_kde == plan_shipped(grids=False, plan=("demo_augsbert_cbe",)).experiment("demo_augsbert_cbe").runs[42]


def test_a_teacher_only_run_with_shared_pairs_plans_and_names_its_candidates():
    runs = plan_shipped({"experiments": {"demo_domain_cbe": {"models": ["teacher"], "adapt": {
        "pairs": "candidates"}}}}, grids=False).experiment("demo_domain_cbe").runs[42]
    assert {"candidates", "adapt", "teacher"} <= set(runs) and "labels" not in runs
    with pytest.raises(ConfigError, match="candidates.strategies draws none"):
        plan_shipped({"experiments": {"demo_domain_cbe": {"adapt": {"pairs": "candidates"},
                                                          "candidates": {"strategies": ["none"]}}}}, grids=False)
