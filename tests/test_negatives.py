"""Hard-negative mining (sampling/hard_negatives.py, stage `negatives`): the rule, BM25, the library's miner."""

import numpy as np
import pytest

from augsbert.sampling.hard_negatives import bi_encoder_scores, bm25_scores, cached_embeddings, interleave, mine, select
from augsbert.stages.negatives import NegativesOptions as Rule  # the miner's rule is the section's options

CORPUS = [f"passage {i} about {w} and {v}" for i, (w, v) in enumerate(
    [("cats", "milk"), ("dogs", "bones"), ("cats", "mice"), ("birds", "seeds"), ("fish", "water"),
     ("cats", "dogs"), ("horses", "hay"), ("cows", "grass"), ("dogs", "cats"), ("mice", "cheese"),
     ("owls", "mice"), ("bees", "honey")])]
PAIRS = [("what do cats drink", CORPUS[0]), ("what do dogs chew", CORPUS[1]), ("what do mice eat", CORPUS[9]),
         ("what do cats drink", CORPUS[2]), ("where do fish live", CORPUS[4])]


def test_select_removes_positives_and_respects_rank_range_and_margins():
    idx = np.array([[5, 0, 3, 1, 4, 2, 6, -1]])
    sc = np.array([[0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.0]])
    rule = Rule(num_negatives=2, range_min=1, range_max=5)
    assert select(idx, sc, [{0}], np.array([0.9]), rule, 1) == [[3, 1]]  # 0 removed; 5 is rank 0, skipped
    # absolute margin 0.1: a negative must score <= 0.9 - 0.1 (5, 3 dropped); relative 0.2: <= 0.72
    def chosen(**rule):
        return select(idx, sc, [{0}], np.array([0.9]), Rule(range_max=7, **rule), 1)

    assert chosen(num_negatives=2, absolute_margin=0.1) == [[1, 4]]
    assert chosen(num_negatives=2, relative_margin=0.2) == [[4, 2]]
    assert chosen(num_negatives=3, max_score=0.65, min_score=0.55) == [[2]]
    assert interleave([[1, 2, 3], [2, 4], [9]], 4) == [1, 2, 9, 4]


def test_bm25_scores_equal_rank_bm25():
    from rank_bm25 import BM25Okapi

    from augsbert.sampling.bm25 import default_tokenize

    queries = ["cats and mice", "dogs dogs bones", "unknown words"]
    block = bm25_scores(queries, CORPUS)
    reference = BM25Okapi([default_tokenize(t) for t in CORPUS])
    expected = np.array([reference.get_scores(default_tokenize(q)) for q in queries])
    np.testing.assert_allclose(block(0, 3), expected, rtol=1e-12)


def test_mined_negatives_never_hold_a_positive_and_respect_the_rule():
    out = mine(PAIRS, CORPUS, {"bm25": bm25_scores}, Rule(num_negatives=3, range_min=1, range_max=8))
    assert out["short"] == 0 and len(out["rows"]) == len(PAIRS)
    positives = {}
    for q, p in PAIRS:
        positives.setdefault(q, set()).add(p)
    block = bm25_scores(out["queries"], out["corpus"])(0, len(out["queries"]))
    for query, positive, negatives in out["rows"]:
        assert len(negatives) == 3 and not set(negatives) & positives[query]
        row = block[out["queries"].index(query)]
        ranked = [out["corpus"][i] for i in np.argsort(-row, kind="stable") if out["corpus"][i] not in positives[query]]
        assert negatives == ranked[1:4]  # ranks 1..3 of the non-positive passages (rank 0 skipped)


def test_equal_to_sentence_transformers_miner_on_the_same_input(tiny_model):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives

    model = SentenceTransformer(tiny_model, device="cpu")
    # margins that drop candidates here (cosines of the random tiny BERT lie in 0.87-0.95): 0.05 leaves some
    # pairs without 2 negatives, which the library's n-tuple output drops as `mine` does
    for options in ({"range_min": 1, "range_max": 6}, {"absolute_margin": 0.03, "range_max": 10},
                    {"absolute_margin": 0.05, "range_max": 10}, {"relative_margin": 0.05}):
        expected = mine_hard_negatives(Dataset.from_dict({"query": [q for q, _ in PAIRS],
                                                          "positive": [p for _, p in PAIRS]}),
                                       model, corpus=CORPUS, num_negatives=2, output_format="n-tuple",
                                       sampling_strategy="top", verbose=False, **options)

        def dense(queries, corpus):
            return bi_encoder_scores(cached_embeddings(model, queries, "tiny", None),
                                     cached_embeddings(model, corpus, "tiny", None))

        out = mine(PAIRS, CORPUS, {"tiny": dense}, Rule(num_negatives=2, **options))
        got = sorted((q, p, *n) for q, p, n in out["rows"])
        want = sorted(tuple(r.values()) for r in expected)
        assert got == want and len(got) + out["short"] == len(PAIRS), options


def test_embeddings_are_cached_by_model_identity_and_texts(tiny_model, tmp_path):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(tiny_model, device="cpu")
    first = cached_embeddings(model, ["a b", "c"], "id-1", tmp_path)
    assert len(list(tmp_path.glob("*.npy"))) == 1

    class Refuses:
        max_seq_length = model.max_seq_length

        def encode(self, *a, **k):
            raise AssertionError("encoded again")

    np.testing.assert_array_equal(cached_embeddings(Refuses(), ["a b", "c"], "id-1", tmp_path), first)
    cached_embeddings(model, ["a b", "c"], "id-2", tmp_path)  # another model: another file
    assert len(list(tmp_path.glob("*.npy"))) == 2


def test_a_cross_encoder_filter_drops_candidates_it_scores_near_the_positive():
    # the filter: a candidate the "Cross-Encoder" scores within the margin of the positive is a false negative
    def rescore(pairs):
        return np.array([1.0 if "cats" in passage else 0.0 for _, passage in pairs])

    pairs = [("what do cats drink", CORPUS[0])]
    out = mine(pairs, CORPUS, {"bm25": bm25_scores},
               Rule(num_negatives=2, absolute_margin=0.5, cross_encoder="stand-in"), rescore=rescore)
    assert out["rows"] and not any("cats" in n for n in out["rows"][0][2])


def test_union_takes_each_retrievers_whole_window_and_the_rescorer_goes_with_its_reference():
    # GPL's candidate lists (`mode: per_step`): every survivor of ranks range_min..range_max, num_negatives unused
    out = mine(PAIRS, CORPUS, {"bm25": bm25_scores}, Rule(num_negatives=1, range_min=1, range_max=4), union=True)
    fixed = mine(PAIRS, CORPUS, {"bm25": bm25_scores}, Rule(num_negatives=3, range_min=1, range_max=4))
    assert out["ids"] == fixed["ids"] and [len(i) for i in out["ids"]] == [3] * len(PAIRS)
    with pytest.raises(ValueError, match="range_min must be >= 0 and below range_max, got 4 and 4"):
        mine(PAIRS, CORPUS, {"bm25": bm25_scores}, Rule(range_min=4, range_max=4), union=True)
    with pytest.raises(ValueError, match="exactly when the rule names one"):  # a reference without its scores
        mine(PAIRS, CORPUS, {"bm25": bm25_scores}, Rule(num_negatives=2, cross_encoder="stand-in"))


# ------------------------------------------------------------------ stage
def test_negatives_stage_plans_on_beir_data_and_writes_the_table(tmp_path, tiny_model):
    import pandas as pd

    from augsbert.errors import ConfigError
    from augsbert.jobs import negatives
    from augsbert.jobs import data as data_job
    from conftest import plan_shipped
    from test_beir import CORPUS as BEIR_CORPUS, QUERIES, write_beir
    from test_loaders import options

    corpus = [*BEIR_CORPUS, *({"_id": f"x{i}", "text": f"{w} live on farms"} for i, w in enumerate(CORPUS))]
    write_beir(tmp_path / "raw" / "beir", corpus=corpus)
    qrels = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td3\t1\n"
    (tmp_path / "raw" / "beir" / "qrels" / "train.tsv").write_text(qrels)
    mining = {"retrievers": ["bm25", tiny_model], "mode": "fixed", "num_negatives": 3, "range_min": 1}
    config = {"data_dir": str(tmp_path / "raw"), "datasets": {"toy_beir": {"loader": "beir", "path": "beir"}},
              "experiments": {"mined": {"dataset": "toy_beir", "models": ["zero_shot"], "negatives": mining}}}
    plan = plan_shipped(config, grids=False, plan=("mined",))
    key = plan.experiment("mined").runs[42]["negatives"]
    spec = plan.spec(key)
    assert spec["params"]["retrievers"] == ["bm25", tiny_model] and "cross_encoder_scale" not in spec["params"]
    assert set(spec["params"]["model_identity"]) == {tiny_model}
    with pytest.raises(ConfigError, match="not BEIR-format"):
        plan_shipped({"defaults": {"negatives": mining}}, grids=False, plan=("demo_zeroshot",))

    data = tmp_path / "data"
    data_job.run({"params": {**options("beir", path="beir"), "dataset": "toy", "data_dir": str(tmp_path / "raw")}},
                     data)
    spec["inputs"] = {"pairs": str(data)}
    spec["params"]["embedding_cache"] = str(tmp_path / "cache")
    metrics = negatives.run(spec, tmp_path / "out", device="cpu")
    table = pd.read_parquet(tmp_path / "out" / "negatives.parquet")
    assert list(table.columns) == ["query", "positive", "negative_1", "negative_2", "negative_3"]
    assert metrics["rows"] == len(table) == 3 and metrics["short_pairs"] == 0
    for row in table.itertuples():
        assert row.positive not in (row.negative_1, row.negative_2, row.negative_3)
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2  # queries and corpus of the Bi-Encoder
    # the Cross-Encoder's sigmoid scores replace the retrievers': every one is above 0, so max_score 0 drops every
    # candidate (BM25 scores 0 for passages sharing no word with the query: those would survive without it)
    from sentence_transformers import CrossEncoder

    tiny_cross_encoder = str(tmp_path / "tiny-ce")
    CrossEncoder(tiny_model, num_labels=1, device="cpu").save(tiny_cross_encoder)  # a random one-logit head
    spec["params"] |= {"cross_encoder": tiny_cross_encoder, "cross_encoder_scale": "sigmoid", "max_score": 0.0,
                       "model_identity": {tiny_model: tiny_model, tiny_cross_encoder: tiny_cross_encoder}}
    metrics = negatives.run(spec, tmp_path / "rescored", device="cpu")
    assert metrics["rows"] == 0 and metrics["short_pairs"] == 3
