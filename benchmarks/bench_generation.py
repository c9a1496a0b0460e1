"""The cost of T5 query generation on this CPU: the constants the time estimate prices a `queries` job with
(augsbert.scheduling.estimate GENERATE_S_PER_TOKEN, GENERATE_S_PER_INPUT_TOKEN); run by hand.

    python benchmarks/bench_generation.py                  # T5-base's shape, 8 passages x 3 queries, 350 tokens in
    python benchmarks/bench_generation.py --passages 32    # the queries stage's default batch

GPL's generator, BeIR/query-gen-msmarco-t5-base-v1, is a T5-base (12 + 12 layers, d_model 768, d_ff 3072); the
hub is not reachable here, so the model is that shape with random weights: the time of a forward pass does not
depend on the weights' values. The generation is the `queries` job's call (models/query_generation.py: sampling
with top-k 25 / top-p 0.95, `num_return_sequences` queries per passage), with every sequence made to run exactly
N decoder steps (min_new_tokens = max_new_tokens = N, so no early end of sequence changes the count). Two runs,
N small and N large: their difference over the extra steps and the sequences is the seconds per generated token
per sequence (cross-attention over the passage included); the small run less its steps is the encoder's pass,
per passage token. Printed twice: from wall time, and "alone" from the process' CPU seconds over its torch
threads (what the run takes on idle cores; on a shared machine the wall time counts the other users' load, as
benchmarks/bench_estimate.py says). Then the packaged all-MiniLM-L6-v2's forward pass over as many tokens,
beside SCORE_S_PER_TOKEN, the scoring figure the other stages' estimates use. Best of --repeats runs each.
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


def timed(model, inputs, per_passage: int, steps: int, repeats: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of the best of `repeats` generations."""
    import torch

    best = (float("inf"), float("inf"))
    for _ in range(repeats):
        torch.manual_seed(0)
        start, cpu = time.perf_counter(), time.process_time()
        with torch.inference_mode():
            model.generate(**inputs, do_sample=True, top_k=25, top_p=0.95, num_return_sequences=per_passage,
                           min_new_tokens=steps, max_new_tokens=steps)
        best = min(best, (time.perf_counter() - start, time.process_time() - cpu))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=8, help="passages per generation batch")
    parser.add_argument("--per-passage", type=int, default=3, help="queries per passage (GPL: 3)")
    parser.add_argument("--input", type=int, default=350, help="passage tokens (GPL: 350)")
    parser.add_argument("--steps", type=int, nargs=2, default=(4, 36), help="decoder steps of the two runs")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, the cores); "
                        "1 on a shared machine: its CPU seconds are then no thread's spin-wait for the other")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from transformers import T5Config, T5ForConditionalGeneration

    from augsbert.scheduling import estimate

    torch.manual_seed(0)
    model = T5ForConditionalGeneration(T5Config(**T5_BASE)).eval()
    params = sum(p.numel() for p in model.parameters())
    ids = torch.randint(2, T5_BASE["vocab_size"], (args.passages, args.input))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    short, long = args.steps
    (t_short, c_short), (t_long, c_long) = (timed(model, inputs, args.per_passage, n, args.repeats)
                                            for n in (short, long))
    sequences = args.passages * args.per_passage
    threads = torch.get_num_threads()
    encoder_params = estimate.t5_encoder_params(T5_BASE)
    priced = args.passages * estimate.encode_cost(args.input + 1) * encoder_params / estimate.REFERENCE_PARAMS  # SCORE
    print(f"T5-base shape, {params / 1e6:.1f}M parameters ({encoder_params / 1e6:.1f}M in the encoder's layers; the "
          f"estimate counts {estimate.t5_params(T5_BASE) / 1e6:.1f}M), torch threads {threads}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{args.passages} passages x {args.input} tokens, {args.per_passage} per passage: {short} steps "
          f"{t_short:.2f} s ({c_short:.2f} CPU-s), {long} steps {t_long:.2f} s ({c_long:.2f} CPU-s)")
    # wall, and alone: CPU seconds over the threads (what the job would take on idle cores, as bench_estimate.py)
    for what, a, b in (("wall", t_short, t_long), ("alone (CPU / threads)", c_short / threads, c_long / threads)):
        per_token = (b - a) / (long - short) / sequences
        encoder = a - short * sequences * per_token
        print(f"{what}: seconds per generated token per sequence {per_token:.5f} (estimate's GENERATE_S_PER_TOKEN "
              f"{estimate.GENERATE_S_PER_TOKEN}); encoder pass {encoder:.2f} s, per passage token "
              f"{encoder / args.passages / args.input:.6f} (estimate's GENERATE_S_PER_INPUT_TOKEN "
              f"{estimate.GENERATE_S_PER_INPUT_TOKEN}; SCORE_S_PER_TOKEN x the encoder's size would price it "
              f"{priced:.2f} s)")
    # the reference model (all-MiniLM-L6-v2, packaged) on the same passages: what SCORE_S_PER_TOKEN prices
    from transformers import AutoModel

    from augsbert.store.model_refs import ALIASES

    minilm = AutoModel.from_pretrained(ALIASES["minilm-l6"]()).eval()
    ids = torch.randint(1000, 30000, (args.passages, min(args.input, 512)))
    best = (float("inf"), float("inf"))
    for _ in range(args.repeats + 1):
        start, cpu = time.perf_counter(), time.process_time()
        with torch.inference_mode():
            minilm(input_ids=ids, attention_mask=torch.ones_like(ids))
        best = min(best, (time.perf_counter() - start, time.process_time() - cpu))
    tokens = ids.numel()
    print(f"all-MiniLM-L6-v2 forward, {args.passages} x {ids.shape[1]} tokens: {best[0]:.2f} s ({best[1]:.2f} CPU-s): "
          f"per token {best[0] / tokens:.6f} wall, {best[1] / threads / tokens:.6f} alone (estimate's "
          f"SCORE_S_PER_TOKEN {estimate.SCORE_S_PER_TOKEN})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
