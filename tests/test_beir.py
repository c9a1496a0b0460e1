"""BEIR-format data (loader `beir`) and retrieval evaluation (nDCG@10, MRR@10, Recall@100)."""

import math

import numpy as np
import pandas as pd
import pytest

from augsbert.data import DataError, RowReport, get_loader
from augsbert.evaluation.beir_retrieval import evaluate_retrieval, top_k
from augsbert.evaluation.retrieval import beir_metrics, ndcg_at_k, reciprocal_rank_at_k
from conftest import write_jsonl
from test_loaders import options

CORPUS = [{"_id": "d1", "title": "Cats", "text": "cats purr softly"},
          {"_id": "d2", "title": "", "text": "dogs bark loudly"},
          {"_id": "d3", "text": "birds  sing\tat dawn"},
          {"_id": "q2", "title": "Quora", "text": "a passage with a query's id"}]
QUERIES = [{"_id": "q1", "text": "which animal purrs"}, {"_id": "q2", "text": "which animal barks"},
           {"_id": "q3", "text": "nothing relevant"}]


def write_beir(root, corpus=CORPUS, queries=QUERIES, qrels="q1\td1\t2\nq2\td2\t1\nq2\tq2\t1\nq3\td3\t0\n"):
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    write_jsonl(root / "corpus.jsonl", corpus)
    write_jsonl(root / "queries.jsonl", queries)
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
    return root


def load(data_dir, policy="error"):
    report = RowReport("x", policy)
    prepared = get_loader("beir").load("x", options("beir", path="beir"), data_dir, report)
    report.settle()
    return prepared, report


# ------------------------------------------------------------------ metrics against literal references
def test_ndcg_mrr_recall_equal_hand_computed_values_on_a_hand_made_qrels():
    # query 1: relevant b (grade 2), d and e (grade 1, e never retrieved); ranked a, b, c, d
    # query 2: relevant y; ranked x, y.  query 3: only a grade-0 judgement: skipped, counted
    rankings = [["a", "b", "c", "d"], ["x", "y"], ["z"]]
    qrels = [{"b": 2, "d": 1, "e": 1, "a": 0}, {"y": 1}, {"z": 0}]
    q1_ndcg = (2 / math.log2(3) + 1 / math.log2(5)) / (2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4))
    q2_ndcg = (1 / math.log2(3)) / 1
    assert ndcg_at_k(rankings[0], qrels[0], 10) == pytest.approx(0.5405858, abs=1e-7)
    assert ndcg_at_k(rankings[0], qrels[0], 10) == pytest.approx(q1_ndcg, rel=1e-12)
    assert ndcg_at_k(rankings[0], qrels[0], 1) == 0.0  # a (grade 0) first
    assert ndcg_at_k(rankings[0], qrels[0], 2) == pytest.approx((2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert reciprocal_rank_at_k(rankings[0], qrels[0], 10) == 0.5
    assert reciprocal_rank_at_k(rankings[0], qrels[0], 1) == 0.0
    metrics = beir_metrics(rankings, qrels, recall_k=100, without_relevant="skip")
    assert metrics["queries"] == 2 and metrics["skipped_queries"] == 1 and metrics["without_relevant"] == 1
    assert metrics["ndcg@10"] == pytest.approx(100 * (q1_ndcg + q2_ndcg) / 2, rel=1e-12)
    assert metrics["mrr@10"] == pytest.approx(100 * (0.5 + 0.5) / 2)
    assert metrics["recall@100"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    # the default, as pytrec_eval: query 3 scores 0 and counts in the mean
    metrics = beir_metrics(rankings, qrels, recall_k=100)
    assert metrics["queries"] == 3 and metrics["skipped_queries"] == 0 and metrics["without_relevant"] == 1
    assert metrics["ndcg@10"] == pytest.approx(100 * (q1_ndcg + q2_ndcg) / 3, rel=1e-12)
    assert metrics["recall@100"] == pytest.approx(100 * (2 / 3 + 1) / 3)


def test_exact_top_k_in_numpy_equals_faiss_flat_index():
    rng = np.random.default_rng(0)
    queries, corpus = rng.normal(size=(7, 8)), rng.normal(size=(50, 8))
    dense = top_k(queries, corpus, 10, faiss_from=10**9)
    flat = top_k(queries, corpus, 10, faiss_from=0)
    np.testing.assert_array_equal(dense[0], flat[0])
    np.testing.assert_allclose(dense[1], flat[1], rtol=1e-5)
    np.testing.assert_array_equal(dense[0], np.argsort(-(queries @ corpus.T), axis=1)[:, :10])


# ------------------------------------------------------------------ loader
def test_beir_loader_reads_corpus_queries_and_qrels(data_dir):
    write_beir(data_dir / "beir")
    prepared, _ = load(data_dir)
    assert prepared.splits == {}
    assert prepared.beir.corpus["passage"].tolist() == ["Cats cats purr softly", "dogs bark loudly",
                                                        "birds sing at dawn", "Quora a passage with a query's id"]
    assert prepared.unlabeled["text"].tolist() == prepared.beir.corpus["passage"].tolist()
    assert prepared.beir.qrels["test"].values.tolist() == [["q1", "d1", 2], ["q2", "d2", 1], ["q2", "q2", 1],
                                                           ["q3", "d3", 0]]
    assert prepared.info["beir"] == {"corpus": 4, "queries": 3, "qrels_test": 4}


def test_beir_bad_input_names_file_line_and_key(data_dir):
    root = write_beir(data_dir / "beir", corpus=[*CORPUS, {"_id": "d9", "title": " ", "text": "  "}],
                      qrels="q1\td1\t2\nq2\tmissing\t1\nq7\td1\t1\n")
    with pytest.raises(DataError) as err:
        load(data_dir)
    text = str(err.value)
    assert f"{root / 'corpus.jsonl'}:5: key 'text' is empty (and no title): an empty passage (_id 'd9')" in text
    assert f"{root / 'qrels' / 'test.tsv'}:3: key 'corpus-id': 'missing' is not in {root / 'corpus.jsonl'}" in text
    assert f"{root / 'qrels' / 'test.tsv'}:4: key 'query-id': 'q7' is not in {root / 'queries.jsonl'}" in text
    prepared, report = load(data_dir, policy="skip")  # on_bad_rows: skip drops them, counted
    assert len(report.issues) == 3 and prepared.beir.qrels["test"].values.tolist() == [["q1", "d1", 2]]


def test_beir_missing_test_qrels_is_a_missing_file(data_dir):
    root = write_beir(data_dir / "beir")
    (root / "qrels" / "test.tsv").unlink()
    with pytest.raises(DataError, match=r"missing file .*qrels/test.tsv"):
        get_loader("beir").inputs("x", options("beir", path="beir"), data_dir)


# ------------------------------------------------------------------ evaluation
class WordModel:
    """Bag-of-words vectors over a fixed vocabulary: a model whose rankings are known."""

    vocab = ["cats", "purr", "purrs", "dogs", "bark", "barks", "birds", "query's"]

    def encode(self, texts, normalize_embeddings=True, **_):
        x = np.array([[t.lower().count(w[:4]) for w in self.vocab] for t in texts], dtype=np.float32) + 1e-3
        return x / np.linalg.norm(x, axis=1, keepdims=True) if normalize_embeddings else x


def test_evaluate_retrieval_ranks_and_never_returns_the_query_itself(data_dir):
    write_beir(data_dir / "beir")
    data = load(data_dir)[0].beir
    metrics = evaluate_retrieval(WordModel(), data.corpus, data.queries, data.qrels["test"], k=100)
    # q1 finds d1 first (nDCG 1); q2 finds d2 first, and its other relevant passage "q2" has its own id:
    # dropped (BEIR's ignore_identical_ids), so recall 1/2 and nDCG = 1 / (1 + 1/log2(3)); q3 (grade 0 only)
    # scores 0 and counts, as pytrec_eval counts it
    q2_ndcg = 1 / (1 + 1 / math.log2(3))
    assert metrics["queries"] == 3 and metrics["skipped_queries"] == 0 and metrics["without_relevant"] == 1
    assert metrics["ndcg@10"] == pytest.approx(100 * (1 + q2_ndcg) / 3, rel=1e-6)
    assert metrics["mrr@10"] == pytest.approx(100 * 2 / 3)
    assert metrics["recall@100"] == pytest.approx(100 * (1 + 0.5) / 3)
    # seeds 000 / 002's binary figures over the same rankings: q3 (no relevant passage) left out and counted;
    # q1 AP 1, q2 AP (1/1) / 2 relevant = 0.5; at 1: both hit, q2 finds 1 of its 2; at 10: one hit in ten each
    binary = metrics["binary"]
    assert binary["queries"] == 2 and binary["skipped_queries"] == 1
    assert binary["map"] == pytest.approx(75.0) and binary["map@1"] == pytest.approx(100.0)
    assert (binary["p@1"], binary["r@1"], binary["capped_r@1"], binary["acc@1"]) == pytest.approx((100, 75, 100, 100))
    assert (binary["p@10"], binary["r@10"], binary["capped_r@10"]) == pytest.approx((10, 75, 75))


# ------------------------------------------------------------------ plan and suite job
def beir_plan(tmp_path):
    from conftest import plan_shipped

    write_beir(tmp_path / "beir")
    return plan_shipped({"data_dir": str(tmp_path), "datasets": {"toy_beir": {"loader": "beir", "path": "beir"}},
                         "experiments": {"beir_zeroshot": {"dataset": "toy_beir", "models": ["zero_shot"],
                                                           "suite": {"suites": ["retrieval", "diagnostics"]}}}},
                        grids=False, plan=("beir_zeroshot", "demo_zeroshot"))


def test_retrieval_suite_plans_on_a_beir_dataset_only(tmp_path):
    plan = beir_plan(tmp_path)
    params = plan.node(plan.experiment("beir_zeroshot").runs[42]["zero_shot_suite"]).settings
    assert params["retrieval"] == {"split": "test", "score_function": "cos", "without_relevant": "zero"}
    assert params["skipped"] == {"diagnostics": "a BEIR-format dataset has no test pairs"}
    assert "retrieval" not in plan.node(plan.experiment("demo_zeroshot").runs[42]["zero_shot_suite"]).settings


def test_suite_job_writes_retrieval_figures_beside_the_others(tmp_path, tiny_model):
    from augsbert.store.artifacts import read_json
    from augsbert.jobs import suite, zero_shot
    from augsbert.jobs import data as data_job

    write_beir(tmp_path / "raw" / "beir")
    data = tmp_path / "data"
    data_job.run({"params": {**options("beir", path="beir"), "dataset": "toy", "data_dir": str(tmp_path / "raw")}},
                     data)
    assert read_json(data / "metrics.json")["sizes"] == {"unlabeled": 4}
    params = {"sts": {}, "useb": {}, "skipped": {}, "batch_size": 8, "max_length": 32, "model": tiny_model,
              "retrieval": {"split": "test", "score_function": "dot", "without_relevant": "zero"}}
    metrics = suite.run({"params": params, "inputs": {"data": str(data)}}, tmp_path / "out", device="cpu")
    assert set(metrics["summary"]) == {"ndcg@10", "mrr@10", "recall@100"}
    assert metrics["retrieval"]["queries"] == 3 and metrics["retrieval"]["score_function"] == "dot"
    assert 0 <= metrics["summary"]["ndcg@10"] <= 100
    shot = zero_shot.run({"params": {"model": tiny_model, "batch_size": 8, "max_length": 32},
                          "inputs": {"data": str(data)}}, tmp_path / "zs", device="cpu")
    assert shot["test"] == {"spearman": None, "pearson": None, "n_pairs": 0}


def stsb_beir_set(path):
    """A BEIR-format set built from real text (STS-B test): queries = the distinct sentence1, corpus = every
    distinct sentence2, judgements = every pair, grade 1 for a score of 4 or more (2 for 5), else 0, so
    queries whose judgements are all 0 are in it."""
    table = pd.read_csv(path, sep="\t", header=None, quoting=3, usecols=[4, 5, 6], names=["score", "s1", "s2"],
                        dtype={"s1": str, "s2": str}).dropna()
    qid = {t: f"q{i}" for i, t in enumerate(dict.fromkeys(table["s1"]))}
    did = {t: f"d{i}" for i, t in enumerate(dict.fromkeys(table["s2"]))}
    qrels: dict[str, dict[str, int]] = {}
    for score, s1, s2 in table.itertuples(index=False):
        grade = 2 if score >= 5 else 1 if score >= 4 else 0
        qrels.setdefault(qid[s1], {})[did[s2]] = max(grade, qrels.get(qid[s1], {}).get(did[s2], 0))
    return list(qid.values()), list(did.values()), qrels


def test_retrieval_metrics_equal_pytrec_eval_on_a_real_text_set_with_all_zero_queries():
    """nDCG@10, MRR@10, Recall@100 of BM25 rankings over STS-B test equal pytrec_eval's (trec_eval) to 1e-6,
    queries with only grade-0 judgements included and scored 0 as it scores them. Reads ../shared/data/stsb
    (CI has shared/ beside the clone; STS-B's parts keep their sources' licences, so no copy is committed)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from conftest import REPO
    from augsbert.sampling.hard_negatives import bm25_scores

    path = REPO.parent / "shared" / "data" / "stsb" / "sts-test.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found (the shared data beside the repository)")
    queries, docs, qrels = stsb_beir_set(path)
    texts = pd.read_csv(path, sep="\t", header=None, quoting=3, usecols=[5, 6], names=["s1", "s2"],
                        dtype=str).dropna()
    query_text, doc_text = list(dict.fromkeys(texts["s1"])), list(dict.fromkeys(texts["s2"]))
    scores = bm25_scores(query_text, doc_text)(0, len(query_text))
    order = np.argsort(-scores, axis=1, kind="stable")[:, :100]
    rankings = [[docs[i] for i in row] for row in order]
    zero = sum(not any(g >= 1 for g in qrels[q].values()) for q in queries)
    assert zero > 100 and len(queries) > 1000  # many all-zero queries are part of the check
    ours = beir_metrics(rankings, [qrels[q] for q in queries], recall_k=100)
    # trec_eval sorts by score (ties by document id): distinct scores keep our order
    run = {q: {d: float(100 - r) for r, d in enumerate(ranking)} for q, ranking in zip(queries, rankings)}
    top10 = {q: {d: s for d, s in docs_.items() if s > 90} for q, docs_ in run.items()}
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"}).evaluate(run)
    rr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    assert len(full) == len(queries) == ours["queries"] and ours["without_relevant"] == zero
    reference = {"ndcg@10": np.mean([m["ndcg_cut_10"] for m in full.values()]),
                 "recall@100": np.mean([m["recall_100"] for m in full.values()]),
                 "mrr@10": np.mean([m["recip_rank"] for m in rr.values()])}
    for name, value in reference.items():
        assert ours[name] / 100 == pytest.approx(value, abs=1e-6), name
    assert 0 < reference["ndcg@10"] < 1
