"""How long a run will take, said before its first job: per job its steps and an estimated time, and the total.

Printed by `augsbert plan --estimate` and, for the jobs a run will actually start, by the workflow before the
first one (workflow/Snakefile `onstart`). The estimate is made from the model's size × the pairs, not from a
calibration run (nothing is timed on the device while planning):

    pairs      the data's own counts once its data job ran; before, the rows of a `pairs_file` dataset's files
               (augsbert.stages.sizes.split_sizes), the known corpora's sizes, else a guess said as such
    training   steps = max_steps, else ⌈examples / batch_size⌉ × epochs (examples: the pairs, twice with
               teacher.symmetric); time = steps × batch_size × (TRAIN_S_PER_EXAMPLE + TRAIN_S_PER_TOKEN ×
               tokens) × (1 + SMALL_BATCH / batch_size) × size
    scoring    dev pairs after every pass, test pairs once, silver pairs to label, evaluation test pairs:
               pairs × (SCORE_S_PER_PAIR + SCORE_S_PER_TOKEN × tokens) × size
    tokens     of one example: a pair model (the CE / CBE teacher, and the labels it gives) reads both texts as one
               sequence, min(max_length, 2 × text + 3); a Bi-Encoder each text alone, 2 × min(max_length,
               text + 2); text = characters / CHARS_PER_TOKEN, the characters of a `pairs_file` from its train
               file's bytes per row, of a known corpus from TEXT_CHARS (training batches are grouped by length,
               so the texts' own length counts, not max_length)
    size       the base model's parameters (from its config.json) / REFERENCE_PARAMS (all-MiniLM-L6-v2)
    start-up   START_S per job started plainly (importing torch and loading the model), WARM_START_S per job
               forked from the warm server (a local run's default, augsbert.face.warm)

The CPU figures are for 2 idle cores and the reference model. Calibration (2026-11-28, this project's 2-core
machine; `python benchmarks/bench_estimate.py CONFIG NAME` prints estimate against measured per job):
  - the per-token and per-example parts from two runs of different lengths: `make demo` (grid demo_quick: Lee's
    documents, 128 tokens per example; 10 jobs, 2 min 10 s warm on idle cores, README) and the own-data page's
    4K-pair STS-B run (docs/guide/own-data.md: ~35 tokens per CBE example, 2 min 28 s warm on idle cores; its
    teacher's 60 steps of 16 took ~0.5 s per step there). The former model (a constant per example, set on the
    demo's long texts) priced a short STS pair as a 128-token one: the STS run's training and labelling jobs
    were estimated 2-3x too long (6 min 08 s in all).
  - per job, the split between the jobs from their CPU seconds in a run on shared cores (bench_estimate.py).
  - start-up: a plain job start ~6 s of imports and model load; a warm one ~2 s (issue 50: an evaluation job
    11 s -> 2 s with warm starts).
Before the sampling job has run, the silver pairs are counted as pool sentences × top_k (augsbert.stages.sizes),
an upper bound: duplicates and sentences of dev/test pairs leave later, so an estimate is rather long than short.
On a GPU the figures are divided by GPU_SPEEDUP, an assumption, not a measurement.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..models.gpu_memory import DEFAULT_DIMS, model_dims, parameter_count
from ..stages import REGISTRY
from ..stages.data import DATA
from ..stages.sizes import counted_sizes, split_sizes

REFERENCE_PARAMS = 22_700_000  # all-MiniLM-L6-v2, the packaged default model
# CPU figures of the reference model on 2 idle cores (see the module docstring for where they come from). A
# training example costs a fixed part (collation, optimizer and Python per example) and a part per token; the
# token count is that of the texts (batches are grouped by length: little padding), capped at max_length.
TRAIN_S_PER_EXAMPLE = 0.010  # seconds per training example, fixed part (forward + backward) at a large batch
TRAIN_S_PER_TOKEN = 0.00038  # seconds per token of a training example
SMALL_BATCH = 4.0  # per-example cost x (1 + SMALL_BATCH / batch_size): small batches use the cores less well
SCORE_S_PER_PAIR = 0.001  # seconds per scored pair (a Cross-Bi-Encoder's or two Bi-Encoder encodings), fixed part
SCORE_S_PER_TOKEN = 0.00004  # seconds per token scored (forward only, no gradient)
START_S = 6.0  # per job started plainly: interpreter, torch, the model
WARM_START_S = 2.0  # per job forked from the warm server (libraries imported once per run): the model, the data
CHARS_PER_TOKEN = 4.0  # English text through a WordPiece / BPE vocabulary
# characters per text of the corpora config/config.yaml defines: Lee's documents are longer than any max_length
# used; STS-B's sentences ~58 characters (10 words); BWS arguments ~1-2 sentences
TEXT_CHARS = {"lee": 2000, "stsb": 58, "stsb_20ng": 58, "bws_cross_topic": 130, "bws_in_topic": 130,
              "spanish_sts": 120}
DEFAULT_TEXT_CHARS = 120  # a dataset whose texts are not counted (another loader than pairs_file)
SCORE_FIELD_CHARS = 5  # a pairs_file row's score field and separators, left out of its texts' characters
DEFAULT_MAX_LENGTH = 256
GPU_SPEEDUP = 20.0  # assumed, not measured here
UNKNOWN_MODEL_PARAMS = 110_000_000  # a model whose files are not on this machine: BERT-base assumed


@dataclass(frozen=True)
class JobEstimate:
    key: str
    stage: str
    steps: int | None  # optimizer steps of a training job
    seconds: float
    what: str  # e.g. "60 steps of 16; scoring 500 dev + 1,379 test pairs"


def model_params(reference: str | None) -> int | None:
    """Parameters of a model from its config.json (a local folder, the packaged model or a hub model in the local
    cache: augsbert.models.gpu_memory.model_dims, as the GPU memory estimate reads it), None where no config
    is found (UNKNOWN_MODEL_PARAMS then)."""
    if not reference:
        return None
    dims = model_dims(reference)
    return None if dims == DEFAULT_DIMS else parameter_count(dims)


def estimate_device(configured: str) -> str:
    """`cpu` or `gpu`: the config's `device`, `auto` resolved as a local run would (a GPU nvidia-smi lists)."""
    if configured == "cpu":
        return "cpu"
    if configured.startswith("cuda"):
        return "gpu"
    from .gpus import inventory

    return "gpu" if inventory() else "cpu"


def estimate_text(plan, keys, experiments, configured_device: str, warm: bool = False) -> str:
    """The estimate of the jobs `keys` (planned nodes; others, e.g. results files, are left out) as printed;
    `warm`: the jobs start as forks of a warm server (a local run's default, augsbert.face.warm)."""
    from ..stages import planning_order

    device = estimate_device(configured_device)
    cache: dict = {}
    order = [stage.name for stage in planning_order()]
    order += [name for name in REGISTRY if name not in order]  # shards and the like: after the planned stages
    keys = sorted(dict.fromkeys(k for k in keys if k in plan.nodes),
                  key=lambda k: (order.index(plan.node(k).stage), k))
    estimates = [job_estimate(plan, key, device, cache, warm) for key in keys]
    return render_estimate(estimates, device, role_names(plan, set(keys), experiments), warm)


def _device_factor(device: str) -> float:
    return 1.0 if device == "cpu" else 1.0 / GPU_SPEEDUP


def _pairs(plan, node) -> dict[str, int]:
    inputs = dict(node.inputs)
    data = inputs.get(DATA.name) or inputs.get("gold")
    return split_sizes(plan.nodes[data]) if data else {}


def job_model(plan, node) -> str | None:
    """The model reference a job runs: its own (`model`), else that of the model it reads (its stage's
    `model_input`: a teacher it labels with; a model it evaluates; the model it starts from)."""
    if isinstance(node.settings.get("model"), str):
        return node.settings["model"]
    inputs = dict(node.inputs)
    for role in (REGISTRY[node.stage].model_input, "model", "init"):
        if role in inputs:
            return job_model(plan, plan.node(inputs[role]))
    return None


def upstream_data(plan, node):
    """The nearest data node the job reads, directly or through the models it reads (labels: the teacher's
    data), breadth first in input order; None without one."""
    seen, queue = set(), [node]
    while queue:
        current = queue.pop(0)
        for _, key in current.inputs:
            upstream = plan.nodes.get(key)
            if upstream is None or key in seen:
                continue
            if upstream.stage == DATA.name:
                return upstream
            seen.add(key)
            queue.append(upstream)
    return None


def text_tokens(plan, node) -> float:
    """Tokens of one text of the job's data (special tokens left out): a known corpus' TEXT_CHARS, else a
    `pairs_file` train file's bytes per row over its two texts (less the score field), else DEFAULT_TEXT_CHARS;
    characters / CHARS_PER_TOKEN."""
    data = upstream_data(plan, node)
    chars = DEFAULT_TEXT_CHARS
    if data is not None:
        dataset = data.params.get("dataset")
        if dataset in TEXT_CHARS:
            chars = TEXT_CHARS[dataset]
        else:
            settings = data.settings
            rows = (counted_sizes(data) or {}).get("train")
            path = settings.get("train")
            if rows and isinstance(path, str):
                full = Path(os.path.expanduser(path))
                full = full if full.is_absolute() else Path(settings.get("data_dir") or ".") / full
                try:
                    chars = max(1.0, (full.stat().st_size / rows - SCORE_FIELD_CHARS) / 2)
                except OSError:
                    pass
    return chars / CHARS_PER_TOKEN


def example_tokens(plan, node, text: float) -> float:
    """Tokens one example (a pair) costs the job's model: a pair model (CE / CBE teacher, and the labels it
    gives) reads both texts as one sequence, min(max_length, 2 x text + 3); a Bi-Encoder encodes each text,
    2 x min(max_length, text + 2). max_length: the job's own, else that of the teacher it labels with."""
    p = node.params
    inputs = dict(node.inputs)
    model_input = REGISTRY[node.stage].model_input  # labels: the teacher it scores with
    model_node = plan.node(inputs[model_input]) if model_input and model_input in inputs else node
    q = model_node.params
    max_length = int(q.get("max_length") or p.get("max_length") or DEFAULT_MAX_LENGTH)
    pair_model = q.get("arch") in ("ce", "cbe")  # a teacher's architecture (a student's arch is never these)
    return min(max_length, 2 * text + 3) if pair_model else 2 * min(max_length, text + 2)


def pair_cost(tokens: float) -> float:
    """Seconds to score one pair of `tokens` tokens (example_tokens) with the reference model on 2 idle cores."""
    return SCORE_S_PER_PAIR + SCORE_S_PER_TOKEN * tokens


def job_estimate(plan, key: str, device: str = "cpu", params_cache: dict | None = None,
                 warm: bool = False) -> JobEstimate:
    """The steps and estimated seconds of the planned job `key` on `device` (cpu, or a GPU: cuda / auto), its
    start warm (a fork of the warm server, augsbert.face.warm) or plain."""
    from .resources import job_items

    node = plan.node(key)
    p = node.params
    cache = {} if params_cache is None else params_cache
    model = job_model(plan, node)
    if model not in cache:
        cache[model] = model_params(model) if model else None
    size = (cache[model] or (UNKNOWN_MODEL_PARAMS if model else REFERENCE_PARAMS)) / REFERENCE_PARAMS
    factor = _device_factor(device)
    splits = _pairs(plan, node)
    dev, test = splits.get("dev", 0), splits.get("test", 0)
    kind = REGISTRY[node.stage].estimate
    start = WARM_START_S if warm else START_S
    text = text_tokens(plan, node)
    if kind == "train" and p.get("batch_size"):
        examples = job_items(plan, key) * (2 if p.get("symmetric") else 1)
        batch = int(p["batch_size"])
        epochs = int(p.get("epochs") or 1)
        steps = int(p["max_steps"]) if p.get("max_steps") else math.ceil(examples / batch) * epochs
        passes = max(1, math.ceil(steps * batch / max(examples, 1))) if p.get("max_steps") else epochs
        scored = (dev * passes if p.get("selection") != "last" else 0) + test
        tokens = example_tokens(plan, node, text)
        per_example = (TRAIN_S_PER_EXAMPLE + TRAIN_S_PER_TOKEN * tokens) * (1 + SMALL_BATCH / batch)
        seconds = start + factor * size * (steps * batch * per_example + scored * pair_cost(tokens))
        return JobEstimate(key, node.stage, steps, seconds,
                           f"{steps:,} steps of {batch}; scoring {scored:,} dev/test pairs")
    if kind == "score":
        pairs = job_items(plan, key)
        tokens = example_tokens(plan, node, text)
        return JobEstimate(key, node.stage, None, start + factor * size * pairs * pair_cost(tokens),
                           f"scoring {pairs:,} pairs")
    if kind in ("test", "test+suites"):
        tokens = example_tokens(plan, node, text)
        return JobEstimate(key, node.stage, None, start + factor * size * test * pair_cost(tokens),
                           f"scoring {test:,} test pairs" + (" and the evaluation suites" if kind == "test+suites"
                                                             else ""))
    if kind == "read":
        return JobEstimate(key, node.stage, None, (1.0 if warm else 2.0) + sum(splits.values()) * 1e-4,
                           "reading the files")
    # the other stages: their declared GPU figure per item (augsbert.scheduling.resources), times 10 for a model
    # job on a CPU (a job without a model, e.g. BM25 sampling, runs on the CPU anyway)
    from .resources import job_work, needs_gpu

    work = job_work(plan, key)
    slower = 10 if device == "cpu" and needs_gpu(node) else 1
    seconds = start + work * REGISTRY[node.stage].seconds_per_item * slower
    return JobEstimate(key, node.stage, None, seconds, f"{work:,} items")


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else (f"{rest // 60} min {rest % 60:02d} s" if rest >= 60
                                                             else f"{rest} s")


def render_estimate(estimates: list[JobEstimate], device: str, roles: dict[str, str] | None = None,
                    warm: bool = False) -> str:
    """The lines printed before a run: one per job, then the total."""
    roles = roles or {}
    where = "this CPU" if device == "cpu" else "a GPU (assumed: the CPU figures / 20)"
    starts = "warm" if warm else "plain"
    lines = [f"augsbert: estimate for {len(estimates)} job(s) on {where}, {starts} job starts (model size x pairs x "
             "tokens, not a calibration):"]
    width = max([len(roles.get(e.key, e.stage)) for e in estimates] + [4])
    for e in estimates:
        lines.append(f"  {roles.get(e.key, e.stage):<{width}}  {clock(e.seconds):>13}  {e.what}")
    total = sum(e.seconds for e in estimates)
    lines.append(f"  {'total':<{width}}  {clock(total):>13}  (one job at a time; a cap: teacher.max_steps, "
                 "student.max_steps, teacher.symmetric: false)")
    return "\n".join(lines)


def role_names(plan, keys, experiments) -> dict[str, str]:
    """A job's name for people: the role it plays in one of `experiments` (lower_bound, student, ...)."""
    names = {}
    for experiment in experiments:
        spec = plan.experiment_spec(experiment)
        for roles in spec["runs"].values():
            for role, run in roles.items():
                if run["key"] in keys and run["key"] not in names:
                    names[run["key"]] = role
    return names
