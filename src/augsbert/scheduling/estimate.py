"""How long a run will take, said before its first job: per job its steps and an estimated time, and the total.

Printed by `augsbert plan --estimate` and, for the jobs a run will actually start, by the workflow before the
first one (workflow/Snakefile `onstart`). The estimate is made from the model's size × the pairs, not from a
calibration run (nothing is timed on the device while planning):

    pairs      the data's own counts once its data job ran; before, the rows of a `pairs_file` dataset's files
               (augsbert.stages.sizes.split_sizes), the known corpora's sizes, else a guess said as such
    training   steps = max_steps, else ⌈examples / batch_size⌉ × epochs (examples: the pairs, twice with
               teacher.symmetric); time = steps × batch_size × TRAIN_S_PER_EXAMPLE × (1 + SMALL_BATCH /
               batch_size) × size
    scoring    dev pairs after every pass, test pairs once, silver pairs to label, evaluation test pairs:
               pairs × SCORE_S_PER_PAIR × size
    size       the base model's parameters (from its config.json) / REFERENCE_PARAMS (all-MiniLM-L6-v2)
    start-up   START_S per job (importing torch and loading the model; less with warm job starts)

TRAIN_S_PER_EXAMPLE, SCORE_S_PER_PAIR and START_S are CPU figures for 2 idle cores, set from two runs measured
on this project's 2-core machine: `make demo` (grid demo_quick, 10 jobs: 1 min 53 s on idle cores, README;
estimated 3 min 26 s, 1.8x) and the own-data page's settings (batch 4) on a 4.4K / 0.5K / 4.9K-pair STS corpus
("80+ minutes" on shared cores, issue 50; estimated 1 h 15 min). Before the sampling job has run, the silver
pairs are counted as pool sentences × top_k (augsbert.stages.sizes), an upper bound: duplicates and sentences
of dev/test pairs leave later, so an estimate is rather long than short. On a GPU the figures are divided by
GPU_SPEEDUP, an assumption, not a measurement. Texts longer than STS sentences (~12 words) take longer than
estimated: `max_length` caps that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..models.gpu_memory import DEFAULT_DIMS, model_dims, parameter_count
from ..stages import REGISTRY
from ..stages.data import DATA
from ..stages.sizes import split_sizes

REFERENCE_PARAMS = 22_700_000  # all-MiniLM-L6-v2, the packaged default model
# CPU figures of the reference model on 2 idle cores (see the module docstring for where they come from)
TRAIN_S_PER_EXAMPLE = 0.06  # seconds per training example (forward + backward) at a large batch
SMALL_BATCH = 4.0  # per-example cost x (1 + SMALL_BATCH / batch_size): small batches use the cores less well
SCORE_S_PER_PAIR = 0.006  # seconds per scored pair (a Cross-Bi-Encoder's or two Bi-Encoder encodings)
START_S = 6.0  # per job: interpreter, torch, the model (a plain start on idle cores; a warm start is faster)
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


def estimate_text(plan, keys, experiments, configured_device: str) -> str:
    """The estimate of the jobs `keys` (planned nodes; others, e.g. results files, are left out) as printed."""
    from ..stages import planning_order

    device = estimate_device(configured_device)
    cache: dict = {}
    order = [stage.name for stage in planning_order()]
    order += [name for name in REGISTRY if name not in order]  # shards and the like: after the planned stages
    keys = sorted(dict.fromkeys(k for k in keys if k in plan.nodes),
                  key=lambda k: (order.index(plan.node(k).stage), k))
    estimates = [job_estimate(plan, key, device, cache) for key in keys]
    return render_estimate(estimates, device, role_names(plan, set(keys), experiments))


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


def job_estimate(plan, key: str, device: str = "cpu", params_cache: dict | None = None) -> JobEstimate:
    """The steps and estimated seconds of the planned job `key` on `device` (cpu, or a GPU: cuda / auto)."""
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
    if kind == "train" and p.get("batch_size"):
        examples = job_items(plan, key) * (2 if p.get("symmetric") else 1)
        batch = int(p["batch_size"])
        epochs = int(p.get("epochs") or 1)
        steps = int(p["max_steps"]) if p.get("max_steps") else math.ceil(examples / batch) * epochs
        passes = max(1, math.ceil(steps * batch / max(examples, 1))) if p.get("max_steps") else epochs
        scored = (dev * passes if p.get("selection") != "last" else 0) + test
        per_example = TRAIN_S_PER_EXAMPLE * (1 + SMALL_BATCH / batch)
        seconds = START_S + factor * size * (steps * batch * per_example + scored * SCORE_S_PER_PAIR)
        return JobEstimate(key, node.stage, steps, seconds,
                           f"{steps:,} steps of {batch}; scoring {scored:,} dev/test pairs")
    if kind == "score":
        pairs = job_items(plan, key)
        return JobEstimate(key, node.stage, None, START_S + factor * size * pairs * SCORE_S_PER_PAIR,
                           f"scoring {pairs:,} pairs")
    if kind in ("test", "test+suites"):
        return JobEstimate(key, node.stage, None, START_S + factor * size * test * SCORE_S_PER_PAIR,
                           f"scoring {test:,} test pairs" + (" and the evaluation suites" if kind == "test+suites"
                                                             else ""))
    if kind == "read":
        return JobEstimate(key, node.stage, None, 2.0 + sum(splits.values()) * 1e-4, "reading the files")
    # the other stages: their declared GPU figure per item (augsbert.scheduling.resources), times 10 for a model
    # job on a CPU (a job without a model, e.g. BM25 sampling, runs on the CPU anyway)
    from .resources import job_work, needs_gpu

    work = job_work(plan, key)
    slower = 10 if device == "cpu" and needs_gpu(node) else 1
    seconds = START_S + work * REGISTRY[node.stage].seconds_per_item * slower
    return JobEstimate(key, node.stage, None, seconds, f"{work:,} items")


def clock(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours} h {rest // 60:02d} min" if hours else (f"{rest // 60} min {rest % 60:02d} s" if rest >= 60
                                                             else f"{rest} s")


def render_estimate(estimates: list[JobEstimate], device: str, roles: dict[str, str] | None = None) -> str:
    """The lines printed before a run: one per job, then the total."""
    roles = roles or {}
    where = "this CPU" if device == "cpu" else "a GPU (assumed: the CPU figures / 20)"
    lines = [f"augsbert: estimate for {len(estimates)} job(s) on {where} (model size x pairs, not a calibration):"]
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
