"""Pre-training throughput per objective; prints figures (run by hand, not by CI).

    .venv/bin/python benchmarks/bench_pretrain.py                      # every objective, 6 timed steps
    .venv/bin/python benchmarks/bench_pretrain.py --only nm simcse --steps 10

Target (issue 12): on CPU with MiniLM, batch 64, max length 64, no objective
more than 1.5x slower per step than the sentence-transformers loss that
computes the same thing (where one exists).

Each objective runs in a fresh subprocess (so its peak RSS is its own) on the
packaged all-MiniLM-L6-v2: the objective's collator (deletion noise included),
its loss and AdamW, `--steps` timed optimiser steps after one warm-up step, on
batches of 64 random Lee background sentences truncated at 64 tokens. Printed:
seconds per step, steps per second, peak resident memory, and for the
objectives we wrote ourselves the ratio to the library loss with the same
passes: Noise Matching vs MultipleNegativesRankingLoss on (sentence, noised
sentence) pairs (NM skips the clean pass's backward, so it should be faster);
the multi-task losses have no library counterpart and are shown against their
main loss alone (MLM: against SimCSE, as the library has no MLM loss term).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OBJECTIVES = ["simcse", "ct", "ct_in_batch", "tsdae", "nm", "nm_reference_mnrl", "mlm+simcse", "mlm+nm", "tsdae+nm"]
# what each objective is compared with: the library loss computing the same passes, or its main loss
REFERENCE = {"nm": "nm_reference_mnrl", "mlm+simcse": "simcse", "mlm+nm": "nm", "tsdae+nm": "tsdae"}


def sentences(n: int, seed: int = 0) -> list[str]:
    import gensim

    path = Path(gensim.__file__).parent / "test" / "test_data" / "lee_background.cor"
    docs = path.read_text(encoding="latin-1").splitlines()
    pool = [s for d in docs for s in re.split(r"(?<=[.!?])\s+", d.strip()) if len(s.split()) >= 3]
    rng = np.random.default_rng(seed)
    return [pool[i] for i in rng.choice(len(pool), n)]


def run_one(objective: str, steps: int, batch: int, length: int) -> dict:
    import torch

    from augsbert.models import resolve_model
    from augsbert.objectives import OBJECTIVES as TABLE, build_loss, resolved
    from augsbert.training.pretrain import build_encoder, collator, loss_inputs, records

    torch.manual_seed(0)
    name = "simcse" if objective == "nm_reference_mnrl" else objective
    params = resolved({"objective": "nm" if objective == "nm_reference_mnrl" else objective, "preset": "thesis",
                       "pooling": None, "batch_size": batch, "max_steps": steps, "lr": 3e-5, "warmup_ratio": 0.0,
                       "weight_decay": 0.0, "scheduler": "constant", "max_length": length, "temperature": 0.05,
                       "deletion_ratio": 0.6, "deletion_unit": "word", "aux_weight": 0.1, "mask_probability": 0.2,
                       "masking": "uniform", "ct_negatives": 7, "group_by_length": False, "megabatch": 50,
                       "seed": 1})
    base = resolve_model("minilm-l6")
    model = build_encoder(base, params["pooling"], length, "cpu")
    if objective == "nm_reference_mnrl":  # the library's SimCSE loss on the very (clean, noised) pairs NM sees
        loss = build_loss(name, model, params, base)
        columns = TABLE["nm"].columns
    else:
        loss = build_loss(objective, model, params, base)
        columns = TABLE[objective].columns
    collate = collator("nm" if objective == "nm_reference_mnrl" else objective, model, params)
    rows = records("nm" if objective == "nm_reference_mnrl" else objective, sentences(batch * (steps + 1)), params)
    optimizer = torch.optim.AdamW([p for p in loss.parameters() if p.requires_grad], lr=3e-5)
    model.train()
    loss.train()
    times = []
    for step in range(steps + 1):
        batch_rows = rows[step * batch : (step + 1) * batch]
        start = time.perf_counter()
        value = loss(*loss_inputs(collate(batch_rows), columns, "cpu"))
        value = torch.stack(list(value.values())).sum() if isinstance(value, dict) else value
        value.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step:  # the first step pays one-off costs
            times.append(time.perf_counter() - start)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"objective": objective, "s_per_step": float(np.mean(times)), "steps_per_s": 1 / float(np.mean(times)),
            "peak_rss_mb": peak_mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=OBJECTIVES, default=OBJECTIVES)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.steps, args.batch, args.length)))
        return
    wanted = list(dict.fromkeys(args.only + [REFERENCE[o] for o in args.only if o in REFERENCE]))
    results = {}
    for objective in wanted:
        out = subprocess.run([sys.executable, __file__, "--child", objective, "--steps", str(args.steps),
                              "--batch", str(args.batch), "--length", str(args.length)],
                             capture_output=True, text=True, check=True)
        results[objective] = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  measured {objective}: {results[objective]['s_per_step']:.2f} s/step", file=sys.stderr)
    print(f"\nCPU, all-MiniLM-L6-v2, batch {args.batch}, max length {args.length}, mean of {args.steps} steps "
          "after one warm-up step\n")
    print("| objective | s/step | steps/s | peak RSS (MB) | compared with | ratio |")
    print("| --- | ---: | ---: | ---: | --- | ---: |")
    for objective, r in results.items():
        ref = REFERENCE.get(objective)
        ratio = f"{r['s_per_step'] / results[ref]['s_per_step']:.2f}x" if ref in results else "–"
        label = {"nm_reference_mnrl": "MNRL on (x, T(x)) (reference for NM)"}.get(objective, objective)
        print(f"| {label} | {r['s_per_step']:.2f} | {r['steps_per_s']:.2f} | {r['peak_rss_mb']:.0f} | "
              f"{REFERENCE.get(objective, 'library loss itself' if objective in ('simcse', 'ct', 'ct_in_batch', 'tsdae') else '')} | {ratio} |")


if __name__ == "__main__":
    main()
