"""GPL: a pretrained Cross-Encoder's margins over mined negatives (stage `margins`) and the student (`gpl`)."""

import numpy as np
import pandas as pd
import pytest

from augsbert.errors import ConfigError
from conftest import plan_shipped

MINED = pd.DataFrame({"query": ["what do cats drink", "what do dogs chew", "where do fish live"],
                      "positive": ["cats drink milk", "dogs chew bones", "fish live in water"],
                      "negative_1": ["dogs chew bones", "cats drink milk", "birds sing at dawn"],
                      "negative_2": ["birds sing at dawn", "fish live in water", "cats drink milk"]})


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory, tiny_model):
    from sentence_transformers import CrossEncoder

    path = tmp_path_factory.mktemp("ce") / "tiny-ce"
    CrossEncoder(tiny_model, num_labels=1, device="cpu").save(str(path))  # a random one-logit head, saved once
    return str(path)


def margins(tmp_path, ce, scale="logits"):
    from augsbert.jobs import margins as margins_job

    (tmp_path / "mined").mkdir(exist_ok=True)
    MINED.to_parquet(tmp_path / "mined" / "negatives.parquet", index=False)
    spec = {"params": {"model": ce, "score_scale": scale, "max_length": 32, "batch_size": 4},
            "inputs": {"negatives": str(tmp_path / "mined")}}
    margins_job.run(spec, tmp_path / f"margins-{scale}", device="cpu")
    return pd.read_parquet(tmp_path / f"margins-{scale}" / "margins.parquet")


def test_margin_targets_equal_teacher_positive_minus_teacher_negative(tmp_path, tiny_cross_encoder):
    import torch
    from sentence_transformers import CrossEncoder

    ce = CrossEncoder(tiny_cross_encoder, device="cpu", max_length=32)
    for scale, activation in (("logits", torch.nn.Identity()), ("sigmoid", torch.nn.Sigmoid())):
        table = margins(tmp_path, tiny_cross_encoder, scale)
        for q, row in enumerate(MINED.itertuples()):
            # the teacher on each pair alone: margins are teacher(q, p) - teacher(q, n_i), in the stated scale
            pos, n1, n2 = (float(ce.predict([(row.query, text)], activation_fn=activation)[0])
                           for text in (row.positive, row.negative_1, row.negative_2))
            assert table["score_positive"][q] == pytest.approx(pos, abs=1e-6)
            assert table["margin_1"][q] == pytest.approx(pos - n1, abs=1e-6)
            assert table["margin_2"][q] == pytest.approx(pos - n2, abs=1e-6)
            assert table["margin_1"][q] == table["score_positive"][q] - table["score_negative_1"][q]  # exactly
        if scale == "sigmoid":
            assert table[["score_positive", "score_negative_1"]].to_numpy().max() < 1


@pytest.mark.parametrize("loss,similarity", [("margin_mse", "dot"), ("kl_div", "cos")])
def test_student_learns_the_margins_for_its_step_budget(tmp_path, tiny_model, tiny_cross_encoder, loss, similarity):
    from sentence_transformers import SentenceTransformer, util

    from augsbert.models.student_losses import student_loss
    from augsbert.stages.gpl import GplParams
    from augsbert.jobs import gpl
    from augsbert.training import gpl_data

    margins(tmp_path, tiny_cross_encoder)
    params = {"model": tiny_model, "loss": loss, "similarity": similarity, "batch_size": 2, "lr": 1e-4,
              "warmup_ratio": 0.0, "max_length": 32, "seed": 1, "max_steps": 3}
    rows = gpl_data.training_rows(pd.read_parquet(tmp_path / "margins-logits" / "margins.parquet"), loss)
    assert np.asarray(rows["label"]).shape == ((3, 2) if loss == "margin_mse" else (3, 3))
    built = student_loss(SentenceTransformer(tiny_model, device="cpu"), GplParams.from_json(params, "t"))
    assert type(built).__name__ == {"margin_mse": "MarginMSELoss", "kl_div": "DistillKLDivLoss"}[loss]
    assert built.similarity_fct is {"dot": util.pairwise_dot_score, "cos": util.pairwise_cos_sim}[similarity]
    metrics = gpl.run({"params": params, "inputs": {"margins": str(tmp_path / "margins-logits")}},
                              tmp_path / "student", device="cpu")
    assert metrics["steps"] == 3 and metrics["test"]["spearman"] is None
    assert (tmp_path / "student" / "model").is_dir() and not (tmp_path / "student" / "work").exists()


def gpl_config(tmp_path, **experiment):
    from test_beir import write_beir

    write_beir(tmp_path / "beir")
    exp = {"dataset": "toy_beir", "models": ["zero_shot", "gpl"], "suite": {"suites": ["retrieval"]},
           "teacher": {"pretrained": "cross-encoder/ms-marco-MiniLM-L-6-v2"},
           "negatives": {"retrievers": ["bm25"], "range_max": 50},
           "student": {"loss": "margin_mse", "similarity": "dot", "max_steps": 10}, **experiment}
    return {"data_dir": str(tmp_path), "datasets": {"toy_beir": {"loader": "beir", "path": "beir"}},
            "experiments": {"g": exp}}


def test_gpl_plans_negatives_margins_student_and_its_retrieval_suite(tmp_path):
    plan = plan_shipped(gpl_config(tmp_path), grids=False, plan=("g",))
    runs = plan.experiment("g").runs[42]
    assert {"negatives", "margins", "gpl", "gpl_suite", "zero_shot"} <= set(runs) and "student" not in runs
    margins_node, student = plan.node(runs["margins"]), plan.node(runs["gpl"])
    assert margins_node.params["score_scale"] == "logits"
    assert dict(margins_node.inputs) == {"negatives": runs["negatives"]}
    assert student.params["max_steps"] == 10 and "epochs" not in student.params
    assert student.params["loss"] == "margin_mse" and student.params["similarity"] == "dot"
    assert plan.node(runs["gpl_suite"]).settings["retrieval"]["split"] == "test"
    with pytest.raises(ConfigError, match="teacher.pretrained"):
        plan_shipped(gpl_config(tmp_path, teacher={"pretrained": None}), grids=False, plan=("g",))
    with pytest.raises(ConfigError, match="margin_mse` or `kl_div"):
        plan_shipped(gpl_config(tmp_path, student={"loss": "cosine"}), grids=False, plan=("g",))
    with pytest.raises(ConfigError, match="kl_div learns"):
        plan_shipped({"defaults": {"student": {"loss": "kl_div"}}}, grids=False, plan=("demo_zeroshot", "demo_ce"))


def test_demo_gpl_plans_the_offline_chain_on_lee():
    plan = plan_shipped({}, grids=False, plan=("demo_gpl",))
    runs = plan.experiment("demo_gpl").runs[42]
    queries, mined = plan.node(runs["queries"]), plan.node(runs["negatives"])
    assert queries.params["generator"] == "inverse_cloze" and dict(queries.inputs) == {"data": runs["data"]}
    assert dict(mined.inputs) == {"pairs": runs["queries"]} and mined.params["qrels_split"] == "train"
    assert dict(plan.node(runs["margins"]).inputs)["teacher"] == runs["teacher"]
    assert dict(plan.node(runs["gpl"]).inputs) == {"margins": runs["margins"], "data": runs["data"]}
    # the demo's cuts (docs/methods/gpl.md "demo_gpl"): one pass of the student over the queries, so the margins
    # score one drawn negative per query; no suite job (Lee has no suite data)
    student = plan.node(runs["gpl"]).params
    assert student["max_steps"] * student["batch_size"] <= 293 and plan.node(runs["margins"]).params["draws"] == {
        "seed": 42, "batch_size": 16, "max_steps": 18}
    assert "gpl_suite" not in runs and "zero_shot_suite" not in runs


def test_results_and_tables_show_the_gpl_row_with_its_retrieval_figures(tmp_path, tiny_model, tiny_cross_encoder):
    """The results document (validated against its schema) and the table read the `gpl` role and its suite."""
    from augsbert.reporting.tables import collect, markdown
    from augsbert.jobs import gpl, suite
    from augsbert.jobs import data as data_job
    from augsbert.reporting import results
    from test_beir import write_beir
    from test_loaders import options

    write_beir(tmp_path / "raw" / "beir")
    data = tmp_path / "data"
    data_job.run({"params": {**options("beir", path="beir"), "dataset": "toy", "data_dir": str(tmp_path / "raw")}},
                     data)
    margins(tmp_path, tiny_cross_encoder)
    student = {"model": tiny_model, "loss": "margin_mse", "similarity": "dot", "batch_size": 2, "lr": 1e-4,
               "warmup_ratio": 0.0, "max_length": 32, "seed": 1, "max_steps": 1}
    gpl.run({"params": student, "inputs": {"margins": str(tmp_path / "margins-logits"), "data": str(data)}},
                    tmp_path / "student", device="cpu")
    suite.run({"params": {"sts": {}, "useb": {}, "skipped": {}, "batch_size": 8, "max_length": 32,
                          "retrieval": {"split": "test", "score_function": "dot", "without_relevant": "zero"}},
               "inputs": {"data": str(data), "model": str(tmp_path / "student")}}, tmp_path / "suite", device="cpu")
    node = lambda stage, path: {"key": path.name, "stage": stage, "path": str(path)}  # noqa: E731
    spec = {"experiment": "g", "config": {"dataset": "toy"}, "dataset": {"loader": "beir"}, "config_hash": "0123456789",
            "seeds": [42], "runs": {"42": {"data": node("data", data), "gpl": node("gpl", tmp_path / "student"),
                                           "gpl_suite": node("suite", tmp_path / "suite")}}}
    result = results.run(spec, tmp_path / "results" / "g.json")
    summary = result["models"]["gpl"]["summary"]
    assert summary["spearman"]["mean"] is None and 0 <= summary["ndcg@10"]["mean"] <= 100
    grid = {"grid": "t", "experiments": ["g"], "columns": ["toy"], "metrics": ["ndcg@10"],
            "rows": [{"role": "gpl", "label": "GPL", "cells": {"toy": "g"}}]}
    long, docs = collect(grid, tmp_path / "results")
    assert long["mean"].tolist() == [summary["ndcg@10"]["mean"]]
    assert "nDCG@10" in markdown(grid, long, docs)


def test_the_gpl_grid_plans_with_the_hub_models_and_fetch_lists_them():
    from augsbert.models.fetch import hub_items

    plan = plan_shipped({}, plan=("gpl.gpl.scifact", "gpl.gpl_tasb.scifact"))
    models = {item.repo_id for item in hub_items(plan, "gpl.gpl.scifact")}
    assert models == {"GPL/msmarco-distilbert-margin-mse", "BeIR/query-gen-msmarco-t5-base-v1",
                      "sentence-transformers/msmarco-distilbert-base-v3", "sentence-transformers/msmarco-MiniLM-L-6-v3",
                      "cross-encoder/ms-marco-MiniLM-L-6-v2"}
    # each starting point with the miners GPL used for it: TAS-B mines with itself
    assert {item.repo_id for item in hub_items(plan, "gpl.gpl_tasb.scifact")} == {
        "sentence-transformers/msmarco-distilbert-base-tas-b", "BeIR/query-gen-msmarco-t5-base-v1",
        "cross-encoder/ms-marco-MiniLM-L-6-v2"}


def test_the_planned_gpl_spec_has_gpls_settings():
    """Evaluation at 350 tokens, GPL's automatic sizing (the resized corpus is the one mined), per-step negatives
    from both retrievers' top 50 with the draws of a 140K x 32 student."""
    plan = plan_shipped({}, plan=("gpl.gpl.scifact",))
    runs = plan.experiment("gpl.gpl.scifact").runs[42]
    suite, queries, mined = (plan.node(runs[r]) for r in ("gpl_suite", "queries", "negatives"))
    assert suite.params["max_length"] == 350 and suite.settings["retrieval"]["score_function"] == "dot"
    assert queries.params["queries_per_passage"] is None and queries.params["total"] == 250_000
    assert dict(mined.inputs) == {"pairs": runs["queries"]}  # mined on the queries artifact's (resized) corpus
    assert mined.params["mode"] == "per_step" and mined.params["range_max"] == 50 and "num_negatives" not in mined.params
    assert plan.node(runs["margins"]).params["draws"] == {"seed": 42, "batch_size": 32, "max_steps": 140_000}
    assert plan.node(runs["gpl"]).params["max_length"] == 350


FARM = [f"passage {i}: {w} eat {v} on the farm" for i, (w, v) in enumerate(
    [("cats", "fish"), ("dogs", "bones"), ("cows", "grass"), ("horses", "hay"), ("hens", "corn"), ("pigs", "apples"),
     ("goats", "weeds"), ("sheep", "clover"), ("ducks", "bread"), ("geese", "grain"), ("mice", "cheese"),
     ("rabbits", "carrots")])]


def per_step_chain(tmp_path, tiny_model, ce, max_steps=40, batch_size=2):
    """negatives (BM25 + the tiny Bi-Encoder, per_step, top 3 each) -> margins (the draws of a 40-step student)."""
    from augsbert.jobs import margins as margins_job, negatives
    from augsbert.jobs import data as data_job
    from test_beir import write_beir
    from test_loaders import options

    corpus = [{"_id": f"d{i}", "title": "", "text": text} for i, text in enumerate(FARM)]
    queries = [{"_id": "q1", "text": "what do cats eat"}, {"_id": "q2", "text": "what do cows eat on the farm"},
               {"_id": "q3", "text": "rabbits carrots"}]
    write_beir(tmp_path / "raw" / "beir", corpus=corpus, queries=queries, qrels="q1\td0\t1\n")
    (tmp_path / "raw" / "beir" / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td0\t1\nq2\td2\t1\nq3\td11\t1\n")
    data = tmp_path / "data"
    data_job.run({"params": {**options("beir", path="beir"), "dataset": "toy", "data_dir": str(tmp_path / "raw")}},
                     data)
    mining = {"retrievers": ["bm25", tiny_model], "qrels_split": "train", "mode": "per_step", "range_max": 3,
              "max_length": 32, "batch_size": 8}
    mined = negatives.run({"params": mining, "inputs": {"pairs": str(data)}}, tmp_path / "mined", device="cpu")
    draws = {"seed": 7, "batch_size": batch_size, "max_steps": max_steps}
    scored = margins_job.run({"params": {"model": ce, "score_scale": "logits", "max_length": 32, "batch_size": 4,
                                         "draws": draws}, "inputs": {"negatives": str(tmp_path / "mined")}},
                             tmp_path / "margins", device="cpu")
    return data, mined, scored


def test_per_step_negatives_are_both_retrievers_lists_and_each_visit_draws_a_scored_one(tmp_path, tiny_model,
                                                                                        tiny_cross_encoder):
    """GPL's negatives: a candidate list per pair (the union of both retrievers' top 3, positive removed), one
    negative drawn per training tuple, a fresh one at each visit of the pair, with margin CE(q, pos) - CE(q, neg)."""
    from sentence_transformers import CrossEncoder

    from augsbert.jobs import gpl
    from augsbert.training import gpl_data
    from augsbert.sampling.hard_negatives import bi_encoder_scores, bm25_scores
    from augsbert.models.architectures import load_bi_encoder

    data, mined, scored = per_step_chain(tmp_path, tiny_model, tiny_cross_encoder)
    candidates = pd.read_parquet(tmp_path / "mined" / "candidates.parquet")
    passages = pd.read_parquet(tmp_path / "mined" / "passages.parquet")["passage"].tolist()
    assert mined["mode"] == "per_step" and mined["rows"] == 3 and set(candidates.columns) == {
        "query", "positive", "candidates"}
    # the reference lists: each retriever's top 3 of the 12 passages, positive removed
    encoder = load_bi_encoder(tiny_model, "cpu", 32)
    emb = lambda texts: encoder.encode(texts, normalize_embeddings=True, convert_to_numpy=True)  # noqa: E731
    queries = candidates["query"].tolist()
    dense = bi_encoder_scores(emb(queries), emb(FARM))(0, 3)
    sparse = bm25_scores(queries, FARM)(0, 3)
    both_only = 0
    for r, row in enumerate(candidates.itertuples()):
        lists = [[FARM[i] for i in np.argsort(-s[r], kind="stable") if FARM[i] != row.positive][:3]
                 for s in (sparse, dense)]
        got = [passages[i] for i in row.candidates]
        assert set(got) == set(lists[0]) | set(lists[1]) and row.positive not in got
        both_only += len(set(lists[1]) - set(lists[0]))
    assert both_only > 0  # the dense retriever adds candidates BM25 does not have
    # the draws: 40 steps x 2 tuples over 3 pairs -> 27 visits each; each visit's negative from the pair's list
    table = pd.read_parquet(tmp_path / "margins" / "margins.parquet")
    assert scored["draws_per_row"] == 27 and scored["rows"] == 3
    ce = CrossEncoder(tiny_cross_encoder, device="cpu", max_length=32)
    for r, row in enumerate(table.itertuples()):
        drawn = [passages[i] for i in row.negatives]
        assert set(drawn) == {passages[i] for i in candidates["candidates"][r]}  # 27 draws reach all of <= 6
        assert len(set(drawn[:3])) > 1  # consecutive visits see different negatives
        reference = ce.predict([(row.query, row.positive), *((row.query, text) for text in drawn)],
                               activation_fn=__import__("torch").nn.Identity())
        np.testing.assert_allclose(row.score_positive, reference[0], atol=1e-5)
        np.testing.assert_allclose(row.margins, reference[0] - reference[1:], atol=1e-5)
        np.testing.assert_array_equal(row.margins, row.score_positive - row.negative_scores)
    # the student's steps: record what each batch held; one (query, positive) meets several negatives
    params = {"model": tiny_model, "loss": "margin_mse", "similarity": "dot", "batch_size": 2, "lr": 1e-4,
              "warmup_ratio": 0.0, "max_length": 32, "seed": 1, "max_steps": 40}
    rows = gpl_data.drawn_rows(table, passages, "margin_mse")
    seen: dict[tuple, list] = {}
    for i in range(len(rows)):
        entry = rows[i]
        seen.setdefault((entry["query"][0] if isinstance(entry["query"], list) else entry["query"],
                         entry["positive"]), []).append((entry["negative"], entry["label"]))
    assert len(rows) == 81 and len(seen) == 3
    for (query, positive), draws in seen.items():
        r = queries.index(query)
        assert len({n for n, _ in draws}) > 1
        for negative, label in draws:
            k = [passages[i] for i in table["negatives"][r]].index(negative)
            assert label == pytest.approx([table["margins"][r][k]])
    kl = gpl_data.drawn_rows(table, passages, "kl_div")[5]  # KL-divergence reads the teacher's two scores of the visit
    r, k = 5 // 27, 5 % 27
    assert kl["label"] == pytest.approx([table["score_positive"][r], table["negative_scores"][r][k]])
    metrics = gpl.run({"params": params, "inputs": {"margins": str(tmp_path / "margins")}},
                              tmp_path / "student", device="cpu")
    assert metrics["steps"] == 40 and metrics["pairs"] == 3 and metrics["train_rows"] == 81


def test_sharded_queries_plan_one_content_keyed_job_per_shard(tmp_path):
    config = gpl_config(tmp_path, queries={"generator": "inverse_cloze", "queries_per_passage": 2, "shards": 3})
    plan = plan_shipped(config, grids=False, plan=("g",))
    runs = plan.experiment("g").runs[42]
    merged = plan.node(runs["queries"])
    shards = [plan.node(key) for name, key in sorted(merged.inputs) if name.startswith("shard_")]
    assert [s.params["shard"] for s in shards] == [0, 1, 2] and merged.params["shards"] == 3
    assert all(dict(s.inputs) == {"data": runs["data"]} for s in shards) and len({s.key for s in shards}) == 3
    one = plan_shipped(gpl_config(tmp_path, queries={"generator": "inverse_cloze", "queries_per_passage": 2}),
                       grids=False, plan=("g",))
    single = one.node(one.experiment("g").runs[42]["queries"])
    assert "shards" not in single.params and single.key != merged.key  # one job: the key as before shards existed
