"""GPL at BEIR scale: hard-negative mining and retrieval evaluation over random 384-d embeddings; prints
seconds and peak RSS (run by hand, not by CI). Each part runs in its own process, so each peak is its own.

    .venv/bin/python benchmarks/bench_gpl_search.py                        # both parts, the issue's sizes
    .venv/bin/python benchmarks/bench_gpl_search.py --queries 5000         # fewer queries (a shared machine)
    .venv/bin/python benchmarks/bench_gpl_search.py --only mining

Targets (issue 47): mining 100K queries against 1M passages (both retrievers' top 50 per query, positive
removed, GPL's candidate lists: sampling.hard_negatives.mine with `union`) and BEIR evaluation
(evaluation.beir_retrieval.evaluate_retrieval: top 100 per query, nDCG@10 / MRR@10 / Recall@100) at 1M
passages, each with a peak RSS of at most 4 GB. The embeddings are random (the search's cost does not depend
on their values); the models' encoding is not part of either figure. The search is exact (faiss.knn from
200,000 passages on), so its time grows with queries x passages, while the memory beyond the embeddings is
the (queries, k) results: fewer queries give the same peak less (queries x k x 12 bytes).
"""

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))
DIM = 384


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def embeddings(n: int, seed: int) -> np.ndarray:
    """n unit vectors, float32, made a block at a time (no float64 copy of the whole)."""
    out = np.empty((n, DIM), dtype=np.float32)
    rng = np.random.default_rng(seed)
    for start in range(0, n, 100_000):
        block = rng.standard_normal((min(n, start + 100_000) - start, DIM), dtype=np.float32)
        out[start:start + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def mining(queries: int, passages: int) -> None:
    from augsbert.sampling.hard_negatives import bi_encoder_scores, mine
    from augsbert.stages.negatives import NegativesOptions

    query_emb, corpus_emb = embeddings(queries, 1), embeddings(passages, 2)
    corpus = [f"p{i}" for i in range(passages)]
    rng = np.random.default_rng(3)
    pairs = [(f"q{i}", corpus[j]) for i, j in enumerate(rng.integers(passages, size=queries))]
    # two retrievers (GPL mines with two Bi-Encoders): the second sees the same passages with other embeddings
    other = embeddings(queries, 4)
    retrievers = {"a": lambda q, c: bi_encoder_scores(query_emb, corpus_emb),
                  "b": lambda q, c: bi_encoder_scores(other, corpus_emb)}
    start = time.perf_counter()
    out = mine(pairs, corpus, retrievers, NegativesOptions(range_max=50), union=True)
    seconds = time.perf_counter() - start
    lengths = [len(i) for i in out["ids"]]
    print(f"mining: {queries:,} queries x {passages:,} passages ({DIM}-d), 2 retrievers x top 50: "
          f"{seconds:.1f} s, {np.mean(lengths):.1f} candidates per query, peak RSS {peak_rss_mb():,.0f} MB")


def evaluation(queries: int, passages: int) -> None:
    import pandas as pd

    from augsbert.evaluation.beir_retrieval import evaluate_retrieval

    corpus_emb, query_emb = embeddings(passages, 2), embeddings(queries, 1)

    class Stored:  # a model whose encode returns the stored embeddings (the search alone is measured)
        def encode(self, texts, **_):
            return corpus_emb if len(texts) == passages else query_emb

    corpus = pd.DataFrame({"id": [f"d{i}" for i in range(passages)], "passage": ""})
    query_table = pd.DataFrame({"id": [f"q{i}" for i in range(queries)], "text": ""})
    rng = np.random.default_rng(5)
    qrels = pd.DataFrame({"query_id": query_table["id"], "score": 1,
                          "corpus_id": [f"d{i}" for i in rng.integers(passages, size=queries)]})
    start = time.perf_counter()
    metrics = evaluate_retrieval(Stored(), corpus, query_table, qrels)
    seconds = time.perf_counter() - start
    print(f"evaluation: {queries:,} queries x {passages:,} passages ({DIM}-d), top 100 ({metrics['search']}): "
          f"{seconds:.1f} s, nDCG@10 {metrics['ndcg@10']:.3f}, peak RSS {peak_rss_mb():,.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--only", choices=["mining", "evaluation"])
    parser.add_argument("--part", choices=["mining", "evaluation"], help=argparse.SUPPRESS)  # the child's
    args = parser.parse_args()
    if args.part:
        {"mining": mining, "evaluation": evaluation}[args.part](args.queries, args.passages)
        return
    for part in [args.only] if args.only else ["mining", "evaluation"]:
        subprocess.run([sys.executable, __file__, "--part", part, "--queries", str(args.queries),
                        "--passages", str(args.passages)], check=True)


if __name__ == "__main__":
    main()
