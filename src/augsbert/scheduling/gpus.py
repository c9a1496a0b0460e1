"""Several model jobs per GPU in a local run: the GPU inventory, and which GPU each job gets.

A MiniLM step keeps a modern GPU busy for a few milliseconds, so one job at a time leaves most of
the card idle. A local run therefore packs jobs by memory:

1. When the workflow starts (workflow/rules/common.smk), `local_gpu_resources` reads the visible
   GPUs (`inventory`: `nvidia-smi`, or `AUGSBERT_GPU_INVENTORY` to state or fake them) and gives Snakemake the
   global resource `gpu_mem_mb` = the GPUs' memory (less `HEADROOM`) summed. Every model job asks
   for its own estimate (augsbert.models.gpu_memory), so Snakemake starts as many as fit in total.
2. Each such job, before torch starts (`claim_for_job`, called by the `augsbert` command), takes
   the GPU with the most memory left unclaimed that fits its estimate, in a ledger file that all
   jobs of the run share (`AUGSBERT_GPU_LEDGER`, under .snakemake/), and sets CUDA_VISIBLE_DEVICES
   to it. The most-room-left choice spreads jobs over several GPUs before stacking them. A
   data-parallel job claims `gpus` different GPUs. Entries of processes that ended (also killed
   ones) are dropped when the ledger is next read. Summed memory can fit while no single GPU has
   room (fragmentation): the job then waits for one.

In a run that submits to a cluster or inside a SLURM job (SLURM hands out GPUs there: the cluster
profile keeps one GPU per job), or when the user sets `--resources gpu_mem_mb=...` or `gpu=...`
themselves, nothing is packed: the run keeps the former limit of one model job at a time (`gpu=1`).
Without GPUs the same limit is named `model_jobs=1` (it keeps CPU-bound model jobs from competing for
the same cores), and the jobs carry no `gpu` or `gpu_mem_mb`: nothing on the console names a GPU that
is not there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..store.processes import alive, start_time
from ..models.gpu_memory import JOB_CLAIM_ENV, JOB_GPU_MEM_ENV, JOB_GPUS_ENV, job_claim  # noqa: F401  (the rules' names)

GPUS_INVENTORY_ENV = "AUGSBERT_GPU_INVENTORY"  # "<index>:<MB>,..." (or "<MB>,..."), or "none": the GPUs a local run packs onto
LEDGER_ENV = "AUGSBERT_GPU_LEDGER"  # set by the Snakefile for a packed local run
MODEL_JOBS = "model_jobs"  # the resource that holds model jobs to one at a time where no GPU is visible
HEADROOM = 0.05  # of each GPU's memory left unclaimed: the driver's own use, other programs' contexts
POLL_S = 1.0


class GpuInventoryError(ValueError):
    """AUGSBERT_GPU_INVENTORY cannot be read."""


@dataclass(frozen=True)
class Gpu:
    index: str  # as CUDA_VISIBLE_DEVICES names it
    memory_mb: int

    @property
    def usable_mb(self) -> int:
        return int(self.memory_mb * (1 - HEADROOM))


def parse_inventory(text: str) -> list[Gpu]:
    """`AUGSBERT_GPU_INVENTORY`: "0:81559,1:81559", or memory only ("24576,24576": indices 0, 1, ...), or "none"."""
    text = text.strip()
    if text.lower() in ("", "none", "0"):
        return []
    gpus = []
    for position, item in enumerate(text.split(",")):
        index, _, memory = item.strip().rpartition(":")
        if not memory.strip().isdigit() or int(memory) <= 0 or (index and not index.strip()):
            raise GpuInventoryError(f"{GPUS_INVENTORY_ENV}={text!r}: item {item.strip()!r} is not '<index>:<MB>' or "
                                    "'<MB>' (e.g. 0:81559,1:81559)")
        gpus.append(Gpu(index.strip() or str(position), int(memory)))
    if len({g.index for g in gpus}) != len(gpus):
        raise GpuInventoryError(f"{GPUS_INVENTORY_ENV}={text!r} names a GPU twice")
    return gpus


def inventory(env: Mapping[str, str] | None = None) -> list[Gpu]:
    """The GPUs a local run may use: AUGSBERT_GPU_INVENTORY if set, else nvidia-smi's, limited to CUDA_VISIBLE_DEVICES."""
    env = os.environ if env is None else env
    if GPUS_INVENTORY_ENV in env:
        return parse_inventory(env[GPUS_INVENTORY_ENV])
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=index,uuid,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [[cell.strip() for cell in line.split(",")] for line in out.splitlines() if line.count(",") == 2]
    gpus = [(index, uuid, Gpu(index, int(memory))) for index, uuid, memory in rows if memory.isdigit()]
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [gpu for _, _, gpu in gpus]
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    # CUDA_VISIBLE_DEVICES names GPUs by index or UUID; the claimed GPU keeps the name the user gave
    return [Gpu(name, gpu.memory_mb) for name in wanted for index, uuid, gpu in gpus if name in (index, uuid)]


def local_gpu_resources(given: Mapping[str, object], env: Mapping[str, str] | None = None,
                        submits: bool = False) -> dict[str, int]:
    """Global resources a run adds to those given (--resources, profile): see the module docstring.

    `submits`: the run submits its jobs to a cluster (Snakemake's `nodes` is set, as it is for every
    remote executor). Then, as inside a cluster job, `gpu=1`: scoped per job (workflow/rules/common.smk),
    it holds a group job's model jobs to one after the other on the group's one GPU.
    """
    env = os.environ if env is None else env
    if "gpu" in given or "gpu_mem_mb" in given or MODEL_JOBS in given:  # the user's own limits stand
        return {}
    if submits or env.get("SLURM_JOB_ID"):
        return {"gpu": 1}
    gpus = inventory(env)
    if not gpus:  # the same limit under its own name: no job shows a `gpu` it does not get
        return {MODEL_JOBS: 1}
    return {"gpu_mem_mb": sum(gpu.usable_mb for gpu in gpus)}


def largest_gpu_mb(env: Mapping[str, str] | None = None) -> int | None:
    gpus = inventory(env)
    return max(gpu.usable_mb for gpu in gpus) if gpus else None


def inventory_text(gpus: list[Gpu]) -> str:
    return ",".join(f"{gpu.index}:{gpu.memory_mb}" for gpu in gpus) or "none"


# --- the ledger: which process holds how much of which GPU --------------------------------------------


def _alive(entry: dict) -> bool:
    """Whether a claim's process lives (a zombie has ended; a new start time is another process on its pid)."""
    return alive(int(entry["pid"]), started=entry.get("started"))


def _choose(gpus: list[Gpu], claims: list[dict], mem_mb: int, count: int) -> list[str] | None:
    """The `count` GPUs with the most unclaimed memory, each with `mem_mb` free; None if fewer fit now."""
    free = {gpu.index: gpu.usable_mb for gpu in gpus}
    for claim in claims:
        for index in claim["gpus"]:
            if index in free:
                free[index] -= int(claim["mem_mb"])
    order = sorted(gpus, key=lambda gpu: (-free[gpu.index], gpus.index(gpu)))
    fitting = [gpu.index for gpu in order if free[gpu.index] >= mem_mb]
    return fitting[:count] if len(fitting) >= count else None


def claim(ledger: Path, gpus: list[Gpu], mem_mb: int, count: int = 1, pid: int | None = None,
          poll_s: float = POLL_S, log=sys.stderr) -> list[str]:
    """Claim `count` GPUs with `mem_mb` MB each for process `pid` (default: this one); wait until they fit.

    A job larger than any GPU gets a whole GPU (the estimate is an upper bound; if it truly does not
    fit, CUDA says so). Returns the GPU indices, as CUDA_VISIBLE_DEVICES names them.
    """
    import fcntl

    if count > len(gpus):
        raise GpuInventoryError(f"the job needs {count} GPUs, but {len(gpus)} are visible ({inventory_text(gpus)})")
    mem_mb = min(mem_mb, min(sorted(gpu.usable_mb for gpu in gpus)[-count:]))
    pid = os.getpid() if pid is None else pid
    ledger.parent.mkdir(parents=True, exist_ok=True)
    waited = False
    while True:
        with open(ledger.with_suffix(".lock"), "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                claims = [c for c in json.loads(ledger.read_text() or "[]") if _alive(c)] if ledger.exists() else []
            except ValueError:  # a ledger cut short by a crash mid-write: its processes' claims are lost, not ours
                claims = []
            chosen = _choose(gpus, claims, mem_mb, count)
            if chosen is not None:
                claims.append({"pid": pid, "started": start_time(pid), "gpus": chosen, "mem_mb": mem_mb})
                tmp = ledger.with_suffix(".tmp")
                tmp.write_text(json.dumps(claims))
                os.replace(tmp, ledger)
                return chosen
        if not waited:
            print(f"augsbert: waiting for {count} GPU(s) with {mem_mb} MB unclaimed (ledger {ledger})", file=log)
            waited = True
        time.sleep(poll_s)


def release(ledger: Path, pid: int | None = None) -> None:
    import fcntl

    pid = os.getpid() if pid is None else pid
    if not ledger.exists():
        return
    with open(ledger.with_suffix(".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            claims = json.loads(ledger.read_text() or "[]")
        except ValueError:
            claims = []
        tmp = ledger.with_suffix(".tmp")
        tmp.write_text(json.dumps([c for c in claims if int(c["pid"]) != pid]))
        os.replace(tmp, ledger)


def claim_for_job(env: Mapping[str, str] | None = None) -> list[str] | None:
    """In a packed local run, give this job its GPU(s) before torch starts: CUDA_VISIBLE_DEVICES; else None.

    A torchrun worker (LOCAL_RANK set) inherits its launcher's claim; a SLURM job has its GPUs from SLURM.
    """
    import atexit

    env = os.environ if env is None else env
    ledger = env.get(LEDGER_ENV)
    count, mem_mb = job_claim(env)
    if not ledger or mem_mb <= 0 or count <= 0 or env.get("SLURM_JOB_ID") or env.get("LOCAL_RANK"):
        return None
    gpus = inventory(env)
    if not gpus:
        return None
    # the rule asks for the job's total (data-parallel: one process per GPU, each the estimate)
    chosen = claim(Path(ledger), gpus, -(-mem_mb // count), count)
    atexit.register(release, Path(ledger))
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)
    return chosen


class JobClaim:
    """What a stage rule writes before its command: `AUGSBERT_JOB_GPU_CLAIM=<gpus>:<MB>` in a packed local run
    (one shell word, an assignment, so quoting leaves it one), nothing elsewhere: no GPU named where none is.

    Not a str on purpose: Snakemake leaves a param of a type of its own out of its `params` rerun trigger, so
    whether a run packs GPUs (and how much memory it estimates) never reruns a finished job."""

    def __init__(self, gpus: int = 0, mem_mb: int = 0):
        self.text = f"{JOB_CLAIM_ENV}={int(gpus)}:{int(mem_mb)}" if gpus else ""

    def __format__(self, spec: str) -> str:
        return format(self.text, spec)

    def __str__(self) -> str:
        return self.text
