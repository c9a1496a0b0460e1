"""What each job asks a scheduler for: wall time, memory, CPUs and GPUs, sized from the plan.

The rules call `job_resources(PLAN, key)` (through `sized()` in workflow/rules/common.smk), so a
5-epoch student over 100k pairs gets hours while a 300-pair demo student gets the 30-minute floor.
Everything here is an estimate made *before* the job runs, from what the plan knows then:

- the number of items a job processes: gold pairs, silver pairs, sentences. Once a stage's input
  artifact exists its own counts are read (`data` metrics.json sizes, `candidates` metrics.json
  counts, `labels` pairs.parquet rows); before that, `DATASET_SIZES` (the sizes of the corpora this
  workflow knows) or `DEFAULT_SIZE` for a dataset of your own (each stage's `items` hook,
  augsbert.stages.sizes);
- the passes over them: `epochs`, or `max_steps` × `batch_size` for step-based stages.

Formula (our choice; constants below, per stage):

    work      = items × epochs                     (or max_steps × batch_size)
    runtime   = clamp(ceil(SAFETY × (SETUP_S + work × seconds_per_item) / 60),
                      MIN_RUNTIME, MAX_RUNTIME)    minutes
    mem_mb    = base_mem_mb + items × mb_per_item, the second term rounded up to
                whole GB and left out below 100 MB
    cpus      = 4 for GPU jobs (tokenisation and data loading keep the GPU fed),
                4 for CPU jobs over LARGE_ITEMS items or more, else 2; under profiles/slurm at
                most what one job gets in its partition and AUGSBERT_SLURM_CPUS (augsbert.scheduling.slurm)
    gpu       = 0 for every job under `device: cpu` (it would hold a GPU slot, locally the profile's
                `gpu=1`, or ask SLURM for a GPU, for nothing); else
                1 for every stage that runs a neural model; sampling only when a strategy encodes
                (semantic search, iterative KDE): BM25, random and KDE run on CPU; the teacher
                and student training jobs ask for config `gpus` (data-parallel, augsbert.training.distributed),
                and 4 CPUs per GPU
    gpu_mem_mb = gpu × the estimate of one process (augsbert.models.gpu_memory), at most the largest local
                GPU's; 0 without a GPU (job_gpu_mem). A local run packs jobs onto its GPUs by it
                (augsbert.scheduling.gpus); the SLURM profile does not use it

The seconds_per_item figures are GPU figures for a BERT-base-sized model at max length 128 with the default
batch sizes, rounded up; SAFETY = 2 absorbs slower GPUs and evaluation passes. Every number can
be overridden per rule without editing the repository: `--set-resources train_student:runtime=600`
on the command line, or `set-resources:` in a profile (README "Cluster use").

Where a job goes on the cluster is read from the environment, never from files in the repository:
GPU jobs get the partition `AUGSBERT_SLURM_GPU_PARTITION` (else `AUGSBERT_SLURM_PARTITION`) and
the GPU model `AUGSBERT_SLURM_GPU_MODEL` (sbatch `--gpus=<model>:1`); CPU jobs `AUGSBERT_SLURM_PARTITION`.
Unset, the default-resources `slurm_partition` (of your profile or the command line) applies, and
without one SLURM's default partition.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from ..models.gpu_memory import estimate_mb, model_dims
from ..stages import REGISTRY
from ..stages.sizes import default_items, epochs
from .slurm import cpu_limit

SETUP_S = 300  # start-up: Python, torch, model loading
SAFETY = 2.0
MIN_RUNTIME = 30  # minutes: below this a queue slot is not worth cutting finer
MAX_RUNTIME = 2880  # minutes (48 h); longer jobs resume from checkpoints (README "Cluster use")
LARGE_ITEMS = 50000

# Per-stage figures live in the stage registry (augsbert.stages): seconds per item and pass (pair,
# sentence or training example), base memory, data held per item (a pair table row, or a sentence's BM25
# postings plus its float32 embedding). The report jobs are not stages; a rule that is neither is sized
# as a training stage.
REPORT_SIZES = {"results": (0.0, 1000), "tables": (0.0, 2000)}  # seconds per item, base memory
DEFAULT_SECONDS_PER_ITEM, DEFAULT_BASE_MEM_MB = 0.02, 16000

def needs_gpu(node) -> bool:
    declared = REGISTRY[node.stage]
    if declared.uses_gpu is not None:  # e.g. sampling: only strategies that encode
        return declared.uses_gpu(node)
    # stages with fixed sizes (the shards) state their GPU in `fixed_resources`
    return declared.gpu and not declared.fixed_resources


def job_items(plan, key: str) -> int:
    """What a job iterates over, before epochs: pairs (training, labelling, evaluation) or sentences (the
    stage's `items` hook, augsbert.stages.sizes)."""
    node = plan.node(key)
    declared = REGISTRY[node.stage]
    return declared.items(plan, node) if declared.items else default_items(plan, node)


def job_work(plan, key: str) -> int:
    node = plan.node(key)
    params = node.params
    if params.get("max_steps") == 0:  # a teacher of no training step (the untrained one): it only scores
        return 0
    if params.get("max_steps") and params.get("batch_size"):
        return int(params["max_steps"]) * int(params["batch_size"])
    return job_items(plan, key) * epochs(node, REGISTRY[node.stage].params)


def seconds_per_item(stage: str) -> float:
    if stage in REGISTRY:
        return REGISTRY[stage].seconds_per_item
    return REPORT_SIZES.get(stage, (DEFAULT_SECONDS_PER_ITEM,))[0]


def runtime_minutes(stage: str, work: int) -> int:
    seconds = SAFETY * (SETUP_S + work * seconds_per_item(stage))
    return min(MAX_RUNTIME, max(MIN_RUNTIME, math.ceil(seconds / 60)))


def mem_mb(stage: str, items: int) -> int:
    declared = REGISTRY.get(stage)
    extra = items * (declared.mb_per_item if declared else 0.0)
    base = declared.base_mem_mb if declared else REPORT_SIZES.get(stage, (0, DEFAULT_BASE_MEM_MB))[1]
    # under 100 MB of data fits in the base figure; above, whole GB steps
    return base + (1000 * math.ceil(extra / 1000) if extra >= 100 else 0)


def profile_value(raw: str | None) -> str | None:
    """A default-resources value as Snakemake reads it: `$VARS` expanded, a Python literal evaluated, else the text."""
    import ast

    if raw is None:
        return None
    text = os.path.expanduser(os.path.expandvars(str(raw)))
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        value = text
    return str(value).strip() or None


def cluster_placement(gpu: bool, env: Mapping[str, str] | None = None,
                      default_partition: str | None = None) -> dict[str, str | None]:
    """Partition and GPU model of a job; None = not set (the resource is left out).

    A rule that declares `slurm_partition` replaces the default-resources one, so the default
    (`default_partition`: the profile's or --default-resources' value) is the last fallback here.
    """
    env = os.environ if env is None else env

    def get(name: str) -> str | None:
        return (env.get(name) or "").strip() or None

    partition = get("AUGSBERT_SLURM_PARTITION") or default_partition
    if not gpu:
        return {"slurm_partition": partition, "gpu_model": None}
    return {"slurm_partition": get("AUGSBERT_SLURM_GPU_PARTITION") or partition,
            "gpu_model": get("AUGSBERT_SLURM_GPU_MODEL")}


def job_resources(plan, key: str, env: Mapping[str, str] | None = None,
                  default_partition: str | None = None, attempt: int = 1) -> dict[str, int | str | None]:
    """runtime (minutes), mem_mb, cpus_per_task, gpu, slurm_partition, gpu_model of the job of node `key`.

    `attempt` is Snakemake's (1 for the first submission): a resubmitted job gets `attempt` times the runtime,
    so that a job SLURM stopped at its time limit is not resubmitted to fail at the same limit again."""
    node = plan.node(key)
    on_cpu = str(plan.config.get("device", "auto")) == "cpu"  # `device: cpu`: no job asks for a GPU
    fixed = REGISTRY[node.stage].fixed_resources
    if fixed:  # sized for the largest pool a shard is meant for, not from the plan (README "Large pools")
        gpu = 0 if on_cpu else fixed["gpu"]
        return {"runtime": fixed["runtime"] * attempt, "mem_mb": fixed["mem_mb"], "cpus_per_task": None, "gpu": gpu,
                **cluster_placement(bool(gpu), env, default_partition)}
    gpu = needs_gpu(node) and not on_cpu
    items = job_items(plan, key)
    work = job_work(plan, key)
    # `gpus` GPUs (and 4 CPUs each) for the stages that train data-parallel (augsbert.training.distributed); one elsewhere
    gpus = int(plan.config.get("gpus", 1)) if gpu and REGISTRY[node.stage].data_parallel else int(gpu)
    placement = cluster_placement(gpu, env, default_partition)
    cpus = 4 * max(gpus, 1) if gpu or items >= LARGE_ITEMS else 2
    return {
        "runtime": runtime_minutes(node.stage, work) * attempt,
        "mem_mb": mem_mb(node.stage, items),
        "cpus_per_task": cpu_limit(cpus, placement["slurm_partition"], env),  # within the partition (augsbert.scheduling.slurm)
        "gpu": gpus,
        **placement,
    }


def report_resources(stage: str) -> dict[str, int]:
    """results / tables jobs: read a few JSON files and draw a chart; seconds, so the floor."""
    return {"runtime": runtime_minutes(stage, 0), "mem_mb": mem_mb(stage, 0), "cpus_per_task": 1, "gpu": 0}


def job_gpu_mem(plan, key: str, largest_gpu_mb: int | None = None) -> int:
    """gpu_mem_mb of the job of node `key`: its `gpu` count × one process's estimate (augsbert.models.gpu_memory),
    each capped at the largest local GPU's memory when known; 0 for a job without a GPU."""
    gpus = int(job_resources(plan, key)["gpu"] or 0)
    if not gpus:
        return 0
    per_process = job_gpu_mem_mb(plan, key)
    return gpus * (min(per_process, largest_gpu_mb) if largest_gpu_mb else per_process)


def job_gpu_mem_mb(plan, key: str) -> int:
    """Estimated GPU memory of one process of the job of node `key` (a data-parallel job runs one per GPU): the
    estimate (augsbert.models.gpu_memory) of the model it runs: its own `model`, else its stage's `model_input`'s
    (labels score with the teacher's base and max_length), trained or run forward as its stage declares (`trains`)."""
    node = plan.node(key)
    stage = REGISTRY[node.stage]
    settings = node.settings
    model_settings = settings
    if not settings.get("model") and stage.model_input in dict(node.inputs):
        model_settings = plan.nodes[dict(node.inputs)[stage.model_input]].settings
    return estimate_mb(model_dims(model_settings.get("model")), training=stage.trains,
                       batch_size=int(settings.get("batch_size") or 64), sequences=stage.gpu_sequences,
                       max_length=int(model_settings.get("max_length") or 512))
