"""A batch's padded width: its longest row, a multiple of it, or one of a few fixed buckets.

The Cross-Bi-Encoder's pair tokenizer (augsbert.models.cross_bi_encoder) and the trainers' pre-tokenised batches
(augsbert.training.tokenized) pad alike; `buckets` is the graph path's (augsbert.training.cuda_graphs, `cuda_graphs`).
"""

from __future__ import annotations


def bucket_width(width: int, max_length: int | None = None) -> int:
    """The fixed width a batch of `width` tokens is padded to on the graph path (augsbert.training.cuda_graphs).

    Steps of 8 up to 64 tokens, 16 up to 128, 32 up to 256, 64 beyond, capped at `max_length`: twenty
    widths up to 512, each a multiple of 8 below the cap (tensor cores). Up to 64 tokens a bucket is the
    multiple of 8 the eager CUDA path pads to anyway; beyond, it adds at most a quarter. On STS-B and Lee
    sentences that is at most 2.7 points of padding over the eager CUDA path (benchmarks/bench_buckets.py;
    docs/guide/training.md). A batch wider than `max_length` (never, for truncated texts) keeps its own
    bucket."""
    step = 8 if width <= 64 else 16 if width <= 128 else 32 if width <= 256 else 64
    bucket = -(-width // step) * step
    if max_length is not None and width <= max_length:
        bucket = min(bucket, max_length)
    return bucket


def batch_width(width: int, multiple: int | None = None, buckets: int | None = None) -> int:
    """A batch's padded width: its longest row, rounded up to `multiple`, or to its bucket when `buckets`
    (the bucket cap, `max_length`) is given."""
    if buckets:
        return bucket_width(width, buckets)
    if multiple:
        return -(-width // multiple) * multiple
    return width
