"""Sampling functions against reference implementations (rank_bm25, brute force, the literal Algorithm 1)."""

import numpy as np
import pytest
from rank_bm25 import BM25Okapi
from scipy import stats

from augsbert.sampling import bm25_neighbors, default_tokenize, iterative_kde, kde_sample, semantic_neighbors


def zipf_texts(n, seed, vocab=400):
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, vocab + 1)
    words = np.array([f"w{i}" for i in range(vocab)])
    return [" ".join(rng.choice(words, rng.integers(2, 20), p=p / p.sum())) + "." for _ in range(n)]


def test_bm25_scores_and_ranking_equal_rank_bm25():
    texts = zipf_texts(300, 0) + ["The THE the cat", "cat, cat; dog!"]
    idx, scores = bm25_neighbors(texts, 4)
    assert idx.shape == scores.shape == (302, 4)
    ref = BM25Okapi([default_tokenize(t) for t in texts])
    for i, text in enumerate(texts):
        s = ref.get_scores(default_tokenize(text))
        s[i] = -np.inf
        assert i not in idx[i]
        np.testing.assert_allclose(scores[i], np.sort(s)[::-1][:4], rtol=1e-9)
        np.testing.assert_allclose(s[idx[i]], scores[i], rtol=1e-9)  # the indices hold those scores
        assert np.all(np.diff(scores[i]) <= 0)


def test_bm25_least_similar_and_bad_k():
    texts = zipf_texts(50, 1)
    idx, scores = bm25_neighbors(texts, 3, least_similar=True)
    ref = BM25Okapi([default_tokenize(t) for t in texts])
    s = ref.get_scores(default_tokenize(texts[7]))
    s[7] = np.inf
    np.testing.assert_allclose(scores[7], np.sort(s)[:3], rtol=1e-9)
    with pytest.raises(ValueError, match="k must be between"):
        bm25_neighbors(texts, 50)


def test_bm25_blocks_do_not_change_results():
    texts = zipf_texts(120, 2)
    a = bm25_neighbors(texts, 5)
    b = bm25_neighbors(texts, 5, block_bytes=8 * 120 * 7)  # 7 queries per block
    np.testing.assert_array_equal(a[0], b[0])


def brute_force(x, k):
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    sims = x @ x.T
    np.fill_diagonal(sims, -np.inf)
    idx = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return idx, np.take_along_axis(sims, idx, axis=1)


def test_semantic_exact_equals_brute_force():
    x = np.random.default_rng(0).normal(size=(500, 24)).astype(np.float32)
    idx, scores = semantic_neighbors(x, 5, query_block=64)
    ref_idx, ref_scores = brute_force(x.astype(np.float64), 5)
    np.testing.assert_allclose(scores, ref_scores, atol=1e-5)
    assert (idx == ref_idx).mean() > 0.999  # float32 ties aside
    assert not np.any(idx == np.arange(500)[:, None])


def test_semantic_excludes_self_even_among_duplicates_and_least_similar():
    x = np.random.default_rng(1).normal(size=(100, 8)).astype(np.float32)
    x[10] = x[11]  # identical rows: each must get the other, never itself
    idx, scores = semantic_neighbors(x, 3)
    assert idx[10, 0] == 11 and idx[11, 0] == 10 and scores[10, 0] == pytest.approx(1.0, abs=1e-5)
    low_idx, low = semantic_neighbors(x, 3, least_similar=True)
    ref = (x / np.linalg.norm(x, axis=1, keepdims=True)) @ (x[5] / np.linalg.norm(x[5]))
    ref[5] = np.inf
    np.testing.assert_allclose(low[5], np.sort(ref)[:3], atol=1e-5)


def test_semantic_approximate_recall():
    x = np.random.default_rng(2).normal(size=(3000, 32)).astype(np.float32)
    exact, _ = semantic_neighbors(x, 10)
    approx, _ = semantic_neighbors(x, 10, exact=False)
    recall = np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approx, exact)])
    assert recall >= 0.95


def reference_iterative_kde(gold, cand, seed):
    """Thesis Algorithm 1 as written: refit scipy's gaussian_kde after every acceptance."""
    gold_kde = stats.gaussian_kde(gold)
    order = np.random.default_rng(seed).permutation(len(cand))
    chosen = [int(order[0]), int(order[1])]
    remaining = [int(i) for i in order[2:]]
    selected = stats.gaussian_kde(cand[chosen])
    while True:
        rest, accepted = [], False
        for i in remaining:
            if gold_kde(cand[i])[0] >= selected(cand[i])[0]:
                chosen.append(i)
                selected = stats.gaussian_kde(cand[chosen])
                accepted = True
            else:
                rest.append(i)
        remaining = rest
        if not accepted:
            return np.array(chosen)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_iterative_kde_matches_the_literal_algorithm(seed):
    rng = np.random.default_rng(10 + seed)
    gold = np.clip(rng.beta(2, 3, 300), 0, 1)
    cand = np.clip(rng.beta(1, 5, 1500), 0, 1)
    ref = reference_iterative_kde(gold, cand, seed)
    fast = iterative_kde(gold, cand, seed)
    assert len(set(fast)) == len(fast)
    assert abs(len(fast) - len(ref)) <= 0.05 * len(ref)
    ks = lambda sel: stats.ks_2samp(cand[sel], gold).statistic
    assert ks(fast) <= ks(ref) + 0.02
    assert len(set(fast) & set(ref)) >= 0.9 * len(ref)
    np.testing.assert_array_equal(iterative_kde(gold, cand, seed), fast)  # deterministic


def test_iterative_kde_follows_gold_better_than_the_candidates():
    rng = np.random.default_rng(3)
    gold = rng.normal(0.6, 0.1, 1000)
    cand = rng.uniform(0, 1, 20000)
    sel = iterative_kde(gold, cand, 0)
    assert stats.ks_2samp(cand[sel], gold).statistic < 0.5 * stats.ks_2samp(cand, gold).statistic


def test_kde_sample_keeps_by_density_ratio():
    rng = np.random.default_rng(4)
    gold = rng.normal(0.5, 0.1, 2000)
    same = rng.normal(0.5, 0.1, 5000)
    assert len(kde_sample(gold, same, 0)) > 0.85 * len(same)  # F_gold ~ F_silver: nearly all kept
    far = np.concatenate([rng.normal(0.5, 0.1, 1000), rng.normal(3.0, 0.1, 1000)])
    kept = kde_sample(gold, far, 0)
    assert np.mean(far[kept] > 2) < 0.01  # where gold has no mass, nothing survives
    np.testing.assert_array_equal(kde_sample(gold, far, 0), kept)
