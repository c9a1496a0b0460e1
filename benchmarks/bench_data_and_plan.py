"""Print how long data preparation and planning take at realistic and large sizes.

Run by hand: .venv/bin/python benchmarks/bench_data_and_plan.py
"""

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from augsbert.config.load import prepare_config, validate_with_defaults
from augsbert.config.schema import load_schema  # noqa: E402
from augsbert.data import RowReport, get_loader  # noqa: E402
from augsbert.plan import Plan  # noqa: E402
from conftest import write_bws  # noqa: E402


def timed(label, fn):
    start = time.perf_counter()
    out = fn()
    print(f"{label:<55} {time.perf_counter() - start:8.3f} s")
    return out


def options(loader, **extra):
    cfg = {"datasets": {"x": {"loader": loader, **extra}}}
    validate_with_defaults(cfg, load_schema())
    return cfg["datasets"]["x"]


def load(loader, root, **extra):
    report = RowReport("x", "error")
    return get_loader(loader).load("x", options(loader, **extra), root, report)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_bws(root / "bws" / "BWS_Argument_Similarity_Corpus.csv")
        timed("BWS cross-topic, 3,400 pairs", lambda: load("bws_cross_topic", root))
        timed("BWS in-topic, 3,400 pairs", lambda: load("bws_in_topic", root))
        timed("Lee, 1,225 pairs + 300 documents", lambda: load("lee", root))
        n = 1_000_000
        rng = np.random.default_rng(0)
        words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"])
        texts = [" ".join(rng.choice(words, 12)) for _ in range(1000)]
        frame = pd.DataFrame({"sentence1": rng.choice(texts, n), "sentence2": rng.choice(texts, n),
                              "score": rng.uniform(0, 5, n).round(3)})
        frame.to_csv(root / "big.tsv", sep="\t", index=False)
        frame.to_parquet(root / "big.parquet")
        for name in ("big.tsv", "big.parquet"):
            prepared = timed(f"pairs_file {name}, {n:,} pairs", lambda: load(
                "pairs_file", root, train=name, test=name, score_range=[0, 5]))
            assert len(prepared.splits["test"]) == n
    raw = {"datasets": {"lee": {"loader": "lee"}},
           "experiments": {f"e{i}": {"dataset": "lee", "suite": {"batch_size": 1 + i}} for i in range(500)}}
    config = timed("validate a config with 500 experiments", lambda: prepare_config(raw))
    plan = timed("plan 500 experiments", lambda: Plan(config))
    print(f"{'nodes planned':<55} {len(plan.nodes):8d}")


if __name__ == "__main__":
    main()
