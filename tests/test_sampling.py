"""Sampling functions against reference implementations (rank_bm25, brute force, the literal Algorithm 1)."""

import ast
import tomllib

import numpy as np
import pytest
from conftest import REPO
from rank_bm25 import BM25Okapi
from scipy import stats
from threadpoolctl import threadpool_limits

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


def test_rank_bm25_is_a_test_dependency_only():
    """rank_bm25 is the reference scorer of the test above, never imported by the package."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    named = lambda reqs: [r for r in reqs if r.split("=")[0].split(">")[0].strip() == "rank-bm25"]  # noqa: E731
    assert named(project["dependencies"]) == []
    assert named(project["optional-dependencies"]["test"]) == ["rank-bm25==0.2.2"]
    for path in (REPO / "src" / "augsbert").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] == "rank_bm25" for n in names), path


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


def reference_iterative_kde(gold, cand, seed=0, order=None, strict=False):
    """Thesis Algorithm 1 as written: scipy's gaussian_kde refitted after every acceptance.

    The selected set starts with the first two candidates of `order` (default:
    the seeded shuffle). A selected set without spread is the KDE's limit, a
    point mass: infinitely dense at its value, zero elsewhere. `strict`: accept on "greater than" (Algorithm 1's
    words) instead of "at least".
    """
    gold, cand = np.asarray(gold, dtype=float), np.asarray(cand, dtype=float)
    order = np.random.default_rng(seed).permutation(len(cand)) if order is None else np.asarray(order)
    if len(cand) <= 2:
        return order.astype(np.int64)
    with threadpool_limits(1, user_api="blas"):  # scipy's tiny solves only contend for BLAS threads
        return _literal(gold, cand, order, strict)


def _literal(gold, cand, order, strict=False):
    gold_kde = stats.gaussian_kde(gold)
    chosen = [int(i) for i in order[:2]]
    remaining = [int(i) for i in order[2:]]

    def refit():
        values = cand[chosen]
        if np.ptp(values) == 0:
            return lambda x: np.inf if x == values[0] else 0.0
        kde = stats.gaussian_kde(values)
        return lambda x: kde(x)[0]

    selected = refit()
    while True:
        rest, accepted = [], False
        for i in remaining:
            g, f = gold_kde(cand[i])[0], selected(cand[i])
            if g > f if strict else g >= f:
                chosen.append(i)
                selected = refit()
                accepted = True
            else:
                rest.append(i)
        remaining = rest
        if not accepted:
            return np.array(chosen, dtype=np.int64)


def mixture(rng, n, centres, sds, weights):
    part = rng.choice(len(centres), n, p=weights)
    return rng.normal(np.asarray(centres)[part], np.asarray(sds)[part])


def kde_case(kind, seed):
    """Gold and candidate scores of one random test case of the given kind."""
    rng = np.random.default_rng(100 + seed)
    if kind == "unimodal":
        return rng.normal(0.6, 0.1, 200), rng.normal(0.45, 0.2, 500)
    if kind == "bimodal":  # candidates mostly in the lower mode: early decisions there diverge first
        gold = mixture(rng, 200, [0.25, 0.75], [0.07, 0.07], [0.5, 0.5])
        return gold, mixture(rng, 600, [0.3, 0.7], [0.1, 0.08], [0.8, 0.2])
    if kind == "skewed":
        if seed % 2:
            return rng.lognormal(0.0, 0.5, 200), rng.lognormal(-0.3, 0.8, 500)
        return rng.beta(2.2, 2.8, 200), rng.beta(1.3, 3.5, 600)
    if kind == "ties":  # scores on a coarse lattice: many candidates share a value
        decimals = 1 + seed % 2
        return np.round(rng.beta(2, 3, 150), decimals), np.round(rng.beta(1, 3, 500), decimals)
    assert kind == "tiny"
    gold = np.round(rng.uniform(0, 1, int(rng.integers(2, 11))), 1)
    gold[:2] = [0.2, 0.8]  # spread guaranteed; duplicates likely
    cand = np.round(rng.uniform(-0.2, 1.2, int(rng.integers(2, 11))), 1)
    return gold, cand


KDE_CASES = [(kind, seed) for kind in ("unimodal", "bimodal", "skewed", "ties", "tiny") for seed in range(5)]


@pytest.mark.parametrize("kind,seed", KDE_CASES)
def test_iterative_kde_keeps_what_the_literal_algorithm_keeps(kind, seed):
    gold, cand = kde_case(kind, seed)
    np.testing.assert_array_equal(iterative_kde(gold, cand, seed=seed), reference_iterative_kde(gold, cand, seed))


def test_iterative_kde_bounds_contain_scipys_densities():
    # The fast path decides from intervals around scipy's two densities: they must contain
    # scipy's values, and be narrow enough that scipy itself is rarely needed.
    from augsbert.sampling.kde import DEAD, _Selection

    gold, cand = kde_case("bimodal", 3)
    order = np.random.default_rng(3).permutation(len(cand))
    state = _Selection(gold, cand, order[2:])
    state.start(int(order[0]), int(order[1]))
    g = stats.gaussian_kde(gold)(cand)
    pos = 0
    for size in (10, 40, 150):  # kernel by kernel (below 32 scores), then the Fourier series
        while state.n < size:
            state.accept(pos)
            pos += 3
        alive = np.flatnonzero(state.g_hi_seq != DEAD)
        diff = stats.gaussian_kde(state.values[: state.n])(state.x[alive]) - g[state.seq[alive]]
        z, z_hi = state.compare(0, len(state.seq))
        upper = np.array([z_hi(float(z[j]), j) for j in alive])
        lower = z[alive] * state.z_scale
        assert np.all(lower <= diff) and np.all(diff <= upper)
        assert np.max((upper - lower) / (g[state.seq[alive]] + 1e-3)) < 1e-6


def test_iterative_kde_windows_of_columns(monkeypatch):
    # Large candidate sets keep the Fourier columns of a window of positions only.
    import augsbert.sampling.kde_bounds as kde_bounds

    monkeypatch.setattr(kde_bounds, "TABLE_MAX", 2000)  # read where the Fourier columns are windowed
    monkeypatch.setattr(kde_bounds, "MIN_WINDOW", 50)
    gold, cand = kde_case("skewed", 2)
    np.testing.assert_array_equal(iterative_kde(gold, cand, seed=2), reference_iterative_kde(gold, cand, 2))


def test_iterative_kde_order_overrides_the_shuffle():
    gold, cand = kde_case("bimodal", 7)
    order = np.random.default_rng(99).permutation(len(cand))
    kept = iterative_kde(gold, cand, seed=0, order=order)
    np.testing.assert_array_equal(kept, reference_iterative_kde(gold, cand, order=order))
    np.testing.assert_array_equal(kept[:2], order[:2])  # the selected set starts with the first two
    np.testing.assert_array_equal(iterative_kde(gold, cand, seed=123, order=order), kept)
    np.testing.assert_array_equal(iterative_kde(gold, cand, seed=3),
                                  iterative_kde(gold, cand, order=np.random.default_rng(3).permutation(len(cand))))


def test_iterative_kde_point_mass_start():
    # The first two candidates are equal: the selected "KDE" is a point mass at 0.5. The third
    # candidate (0.5) meets infinite density and is rejected; 3.0 meets density 0 and is
    # accepted. Pass 2: the set {0.5, 0.5, 3} has h = 1.159 and density 0.241 at 0.5, below
    # the gold density 0.465 there, so candidate 2 joins.
    np.testing.assert_array_equal(iterative_kde([0.0, 1.0], [0.5, 0.5, 0.5, 3.0], order=[0, 1, 2, 3]), [0, 1, 3, 2])
    np.testing.assert_array_equal(iterative_kde([0.0, 1.0], [0.5, 0.5, 0.5], order=[2, 0, 1]), [2, 0])


def test_iterative_kde_equal_densities_decide_like_scipy():
    # The selected set starts as the gold set in another order: gold and selected densities
    # are mathematically equal, so only scipy's rounding decides the first comparisons.
    gold = np.array([0.2, 0.8, 0.35])
    cand = np.array([0.8, 0.35, 0.2, 0.2, 0.8, 0.35, 0.5, 0.2])
    for order in ([2, 0, 1, 3, 4, 5, 6, 7], [0, 2, 4, 1, 3, 5, 6, 7], list(range(8))):
        np.testing.assert_array_equal(iterative_kde(gold, cand, order=order),
                                      reference_iterative_kde(gold, cand, order=order))


@pytest.mark.parametrize("kind,seed", [(k, s) for k, s in KDE_CASES if k in ("ties", "tiny")] + [("bimodal", 1)])
def test_iterative_kde_greater_than_keeps_what_the_literal_algorithm_keeps(kind, seed):
    """`accept="greater"` (candidates.iterative_kde_accept): Algorithm 1's "greater than", against the literal one."""
    gold, cand = kde_case(kind, seed)
    np.testing.assert_array_equal(iterative_kde(gold, cand, seed=seed, accept="greater"),
                                  reference_iterative_kde(gold, cand, seed, strict=True))


def test_iterative_kde_at_least_and_greater_differ_on_equal_densities():
    # The selected set starts as the gold set itself: both densities are the same computation, equal everywhere,
    # so "at least" takes the third candidate and "greater than" does not
    gold = np.array([0.2, 0.8])
    cand = np.array([0.2, 0.8, 0.5])
    assert iterative_kde(gold, cand, order=[0, 1, 2]).tolist() == [0, 1, 2]
    assert iterative_kde(gold, cand, order=[0, 1, 2], accept="greater").tolist() == [0, 1]
    assert reference_iterative_kde(gold, cand, order=[0, 1, 2], strict=True).tolist() == [0, 1]
    for order in ([2, 0, 1, 3, 4, 5, 6, 7], list(range(8))):  # and where scipy's rounding decides
        gold, cand = np.array([0.2, 0.8, 0.35]), np.array([0.8, 0.35, 0.2, 0.2, 0.8, 0.35, 0.5, 0.2])
        np.testing.assert_array_equal(iterative_kde(gold, cand, order=order, accept="greater"),
                                      reference_iterative_kde(gold, cand, order=order, strict=True))
    # a point-mass start: "greater" takes a candidate away from the point where the gold density is above 0
    np.testing.assert_array_equal(iterative_kde([0.0, 1.0], [0.5, 0.5, 0.5, 3.0], order=[0, 1, 2, 3],
                                                accept="greater"), [0, 1, 3, 2])
    with pytest.raises(ValueError, match="accept must be"):
        iterative_kde(gold, cand, accept="ge")


def test_iterative_kde_small_inputs_and_bad_order():
    gold = [0.1, 0.5, 0.9]
    assert iterative_kde(gold, [], seed=0).tolist() == []
    assert iterative_kde(gold, [0.3], seed=0).tolist() == [0]
    assert iterative_kde(gold, [0.3, 0.4], order=[1, 0]).tolist() == [1, 0]
    with pytest.raises(ValueError, match="permutation"):
        iterative_kde(gold, [0.3, 0.4, 0.5], order=[0, 0, 1])


def test_iterative_kde_gold_without_spread_is_a_data_error():
    from augsbert.data import DataError

    with pytest.raises(DataError, match=r"gold scores have no spread \(all 3 equal 0\.7\)"):
        iterative_kde([0.7, 0.7, 0.7], [0.1, 0.5, 0.9], seed=0)


def test_labels_stage_names_itself_in_kde_errors():
    from augsbert.data import DataError
    from augsbert.sampling.labelled_pairs import _select

    with pytest.raises(DataError, match=r"^labels stage, strategy iterative_kde: .*no spread"):
        _select("iterative_kde", np.full(4, 0.5), np.linspace(0, 1, 10), 0)


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


def test_e3_a_single_gold_score_is_marked_in_the_densities_figure_not_a_failed_labels_job(tmp_path, caplog):
    """Issue 56 E3: a one-row train file's gold has no density; scipy's gaussian_kde raised ValueError inside
    plot_densities and the labels job failed over a figure. Now the figure marks the score with a line, says so
    in the log, and a strategy's single or all-equal scores are marked the same way."""
    import logging

    import pandas as pd

    from augsbert.sampling.labelled_pairs import plot_densities

    pairs = pd.DataFrame({"strategy": ["gold", "bm25", "bm25", "bm25", "random"],
                          "score": [0.4, 0.2, 0.5, 0.9, 0.3]})
    with caplog.at_level(logging.INFO, logger="augsbert.sampling.labelled_pairs"):
        plot_densities(tmp_path / "d.png", np.array([0.4]), pairs, "t")
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    notes = [r.getMessage() for r in caplog.records]
    assert notes == ["d.png: no density of the gold scores drawn (1 score(s), 1 distinct; a density needs at least "
                     "two different ones): a dashed line marks each score instead",
                     "d.png: no density of the random scores drawn (1 score(s), 1 distinct; a density needs at least "
                     "two different ones): a dashed line marks each score instead"]


def test_e3_kde_sample_keeps_candidates_without_a_density_and_names_too_few_gold_scores(caplog):
    """Issue 56 E3: one candidate, or candidates with equal scores, have no KDE (ValueError / LinAlgError from
    scipy before): all are kept, as iterative_kde keeps fewer than three. One gold score is a DataError naming
    the way out."""
    from augsbert.data import DataError
    from augsbert.sampling.labelled_pairs import _select

    gold = np.array([0.1, 0.5, 0.9])
    np.testing.assert_array_equal(kde_sample(gold, np.array([0.3]), 0), [0])
    np.testing.assert_array_equal(kde_sample(gold, np.full(3, 0.3), 0), [0, 1, 2])
    assert "all 3 candidate scores equal 0.3: no density to compare with the gold one, so all are kept" in caplog.text
    with pytest.raises(DataError) as err:
        _select("kde", np.array([0.8]), np.linspace(0, 1, 5), 0)
    assert str(err.value) == ("labels stage, strategy kde: KDE sampling: 1 gold score(s); a Gaussian KDE needs at "
                              "least two; kde keeps silver pairs after the density of the gold train pairs' scores: "
                              "give the dataset more train pairs (with different scores), or leave kde out of "
                              "candidates.strategies")
