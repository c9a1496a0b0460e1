"""The cost of T5 query generation on this CPU: seconds per generated token per sequence, the constant the time
estimate prices a `queries` job with (augsbert.scheduling.estimate GENERATE_S_PER_TOKEN); run by hand.

    python benchmarks/bench_generation.py                  # T5-base's shape, 8 passages x 3 queries, 350 tokens in
    python benchmarks/bench_generation.py --passages 32    # the queries stage's default batch

GPL's generator, BeIR/query-gen-msmarco-t5-base-v1, is a T5-base (12 + 12 layers, d_model 768, d_ff 3072); the
hub is not reachable here, so the model is that shape with random weights: the time of a forward pass does not
depend on the weights' values. The generation is the `queries` job's call (models/query_generation.py: sampling
with top-k 25 / top-p 0.95, `num_return_sequences` queries per passage), with every sequence made to run exactly
N decoder steps (min_new_tokens = max_new_tokens = N, so no early end of sequence changes the count). Two runs,
N small and N large: their difference over the extra steps and the sequences is the seconds per generated token
per sequence (cross-attention over the passage included); the small run less its steps is the encoder's pass,
printed beside the estimate's encoder price (SCORE_S_PER_TOKEN x the encoder's size, a forward pass as the
calibrated scoring jobs price it). Best of --repeats runs each.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

T5_BASE = {"vocab_size": 32128, "d_model": 768, "d_kv": 64, "d_ff": 3072, "num_layers": 12, "num_decoder_layers": 12,
           "num_heads": 12, "relative_attention_num_buckets": 32, "decoder_start_token_id": 0, "pad_token_id": 0,
           "eos_token_id": 1}


def timed(model, inputs, per_passage: int, steps: int, repeats: int) -> float:
    import torch

    best = float("inf")
    for _ in range(repeats):
        torch.manual_seed(0)
        start = time.perf_counter()
        with torch.inference_mode():
            model.generate(**inputs, do_sample=True, top_k=25, top_p=0.95, num_return_sequences=per_passage,
                           min_new_tokens=steps, max_new_tokens=steps)
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=8, help="passages per generation batch")
    parser.add_argument("--per-passage", type=int, default=3, help="queries per passage (GPL: 3)")
    parser.add_argument("--input", type=int, default=350, help="passage tokens (GPL: 350)")
    parser.add_argument("--steps", type=int, nargs=2, default=(4, 36), help="decoder steps of the two runs")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    from augsbert.scheduling import estimate

    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(**T5_BASE)).eval()
    params = sum(p.numel() for p in model.parameters())
    ids = torch.randint(2, T5_BASE["vocab_size"], (args.passages, args.input))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    short, long = args.steps
    t_short = timed(model, inputs, args.per_passage, short, args.repeats)
    t_long = timed(model, inputs, args.per_passage, long, args.repeats)
    sequences = args.passages * args.per_passage
    per_token = (t_long - t_short) / (long - short) / sequences
    encoder = t_short - short * sequences * per_token
    encoder_params = estimate.t5_encoder_params(T5_BASE)
    priced = args.passages * estimate.pair_cost(args.input) * encoder_params / estimate.REFERENCE_PARAMS
    print(f"T5-base shape, {params / 1e6:.1f}M parameters ({encoder_params / 1e6:.1f}M in the encoder; the "
          f"estimate counts {estimate.t5_params(T5_BASE) / 1e6:.1f}M), torch threads {torch.get_num_threads()}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{args.passages} passages x {args.input} tokens, {args.per_passage} per passage: {short} steps "
          f"{t_short:.2f} s, {long} steps {t_long:.2f} s")
    print(f"seconds per generated token per sequence: {per_token:.5f} (estimate's GENERATE_S_PER_TOKEN "
          f"{estimate.GENERATE_S_PER_TOKEN})")
    print(f"encoder pass: {encoder:.2f} s measured, {priced:.2f} s priced (SCORE_S_PER_PAIR + SCORE_S_PER_TOKEN x "
          f"tokens, x the encoder's size)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
