"""Candidate pairs: exclusion rules, determinism (seed, input order, PYTHONHASHSEED)."""

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from augsbert.sampling.pool import PairCollector, random_partners, sentence_pool
from augsbert.jobs import candidates


def test_random_partners_are_distinct_and_never_self():
    out = random_partners(50, 7, seed=3)
    assert out.shape == (50, 7)
    assert all(i not in row and len(set(row)) == 7 for i, row in enumerate(out))
    np.testing.assert_array_equal(out, random_partners(50, 7, seed=3))
    with pytest.raises(ValueError):
        random_partners(5, 5, seed=0)


def test_collector_applies_every_exclusion_rule():
    pool = ["a", "b", "c", "d"]
    c = PairCollector(pool, gold_pairs=[("b ", "a")], eval_sentences={"d"})
    for a, b in [("a", "a"), ("a", "b"), ("a", "c"), ("c", "a"), ("c", "d"), ("b", "c")]:
        c.add("bm25", a, b)
    assert c.frame().values.tolist() == [["a", "c", "bm25"], ["b", "c", "bm25"]]
    assert dict(c.excluded) == {"self_pair": 1, "gold_pair": 1, "duplicate": 1, "eval_sentence": 1}
    c2 = PairCollector(pool, [], {"d"}, exclude_eval=False)
    c2.add("random", "c", "d")
    assert len(c2.frame()) == 1


def test_pool_is_unique_normalised_and_sorted():
    t = pd.DataFrame({"sentence1": ["b  x", "a"], "sentence2": [" a", "b x"], "score": [0.1, 0.2]})
    assert sentence_pool([t]) == ["a", "b x"]


def make_data(tmp_path, shuffle_seed=None):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    sents = [" ".join(rng.choice(words, 6)) for _ in range(60)]
    train = pd.DataFrame({"sentence1": sents[:30], "sentence2": sents[30:], "score": rng.uniform(0, 1, 30)})
    test = pd.DataFrame({"sentence1": [sents[0], "unseen one"], "sentence2": ["unseen two", "unseen three"],
                         "score": [0.1, 0.9]})
    if shuffle_seed is not None:
        train = train.sample(frac=1, random_state=shuffle_seed).reset_index(drop=True)
        train[["sentence1", "sentence2"]] = train[["sentence2", "sentence1"]].values
    data = tmp_path / "data"
    data.mkdir()
    train.to_parquet(data / "train.parquet")
    test.to_parquet(data / "test.parquet")
    (data / "metrics.json").write_text("{}")  # as every data artifact holds (a folder without it is incomplete)
    return data


def spec_for(data, strategies=("random", "bm25")):
    return {"stage": "candidates", "key": "t", "inputs": {"data": str(data)},
            "params": {"strategies": list(strategies), "top_k": 3, "pool": "train", "exclude_eval_sentences": True,
                       "candidate_pool": {"random": 3, "semantic_search": 3}, "model": "minilm-l6", "seed": 42}}


def test_candidates_respect_the_rules(tmp_path):
    data = make_data(tmp_path)
    metrics = candidates.run(spec_for(data), tmp_path / "out")
    pairs = pd.read_parquet(tmp_path / "out" / "candidates.parquet")
    train = pd.read_parquet(data / "train.parquet")
    gold = {frozenset(p) for p in zip(train["sentence1"], train["sentence2"])}
    assert metrics["eval_sentences_removed_from_pool"] == 1 and metrics["pool_sentences"] == 59
    for strategy, group in pairs.groupby("strategy"):
        keys = [frozenset(p) for p in zip(group["sentence1"], group["sentence2"])]
        assert len(keys) == len(set(keys))  # no pair twice, in either order
        assert not set(keys) & gold
        assert all(len(k) == 2 for k in keys)  # no self pair
    assert not (set(pairs["sentence1"]) | set(pairs["sentence2"])) & set(pd.read_parquet(data / "test.parquet")
                                                                          ["sentence1"])
    assert metrics["candidates"]["random"] + sum(metrics["excluded"]["random"].values()) == 59 * 3


def test_candidates_do_not_depend_on_input_order(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir(), b.mkdir()
    candidates.run(spec_for(make_data(a)), a / "out")
    candidates.run(spec_for(make_data(b, shuffle_seed=5)), b / "out")
    pa = pd.read_parquet(a / "out" / "candidates.parquet")
    pb = pd.read_parquet(b / "out" / "candidates.parquet")
    key = lambda f: sorted(zip(f["strategy"], map(frozenset, zip(f["sentence1"], f["sentence2"]))), key=str)
    assert key(pa) == key(pb)


def test_candidates_do_not_depend_on_pythonhashseed(tmp_path):
    data = make_data(tmp_path)
    outs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"out{hash_seed}"
        proc = subprocess.run([sys.executable, "-m", "augsbert", "-q", "sample-pairs", "--spec",
                               json.dumps(spec_for(data)), "--out", str(out)],
                              env={**os.environ, "PYTHONHASHSEED": hash_seed}, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append(pd.read_parquet(out / "candidates.parquet"))
    pd.testing.assert_frame_equal(outs[0], outs[1])
