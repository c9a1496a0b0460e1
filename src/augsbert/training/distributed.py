"""Data-parallel training over several GPUs (config `gpus`): the launch, the ranks, the batch shards.

With `gpus: N > 1` the `train-teacher` and `train-student` commands re-launch
themselves under `torch.distributed.run` (torchrun) with N processes on this
node, one per GPU (NCCL; on CPU N processes with gloo, which is how the tests
run it). Each process holds a replica of the model; DistributedDataParallel
averages the gradients, so every optimizer step is one step on the *global*
batch.

Our choices:

- `batch_size` in the config is the global (effective) batch: each process
  gets `batch_size / N` examples per step (an error if that does not divide).
  The number of optimizer steps, hence warm-up and the linear decay (both
  counted in steps), the checkpoint interval and the epoch boundaries do not
  depend on N; nor does which examples form a step: the batch order is made
  for the global batch (the same order a single process would use) and each
  global batch is cut into N per-process parts (`ShardedBatchSampler`, and the
  Hugging Face trainer's flat index stream cut the same way). Results of N
  processes equal one process up to float summation order, except where the
  loss couples the examples of a batch (in-batch negatives: `student.loss:
  mnrl`, whose negatives are then the per-process batch), dropout (each
  process draws its own masks) and the last, incomplete batch of an epoch
  (split as evenly as possible, each part averaged on its own; the Hugging
  Face trainer of the Cross-Bi-Encoder tops the parts up to full size with
  the epoch's first examples, accelerate's `even_batches`).
- One writer: rank 0 alone takes the artifact's writer lock, tidies and claims
  the resume state, evaluates dev Spearman, keeps the best model, writes the
  artifact and logs at INFO; the other ranks train and wait at barriers. If
  any process dies, torchrun stops the others (and every worker asks the
  kernel to kill it when its torchrun dies, so a SIGKILLed job leaves no
  orphan training on without a lock).
- Only the two pair trainers run distributed. Every other model stage (MLM
  adaptation, pre-training, RCL entropy models, classifier, and the
  inference stages) runs in one process on one GPU whatever `gpus` says, and
  its rule asks for one GPU; started under torchrun by hand it stops with an
  error instead of running N copies that write the same artifact.
"""

from __future__ import annotations

import datetime
import logging
import os
import signal
import sys
from collections.abc import Callable
from functools import partial

from ..errors import ConfigError
from ..models.device import DEVICE_ENV
from ..stages import REGISTRY
from ..store.artifacts import writer_lock, writing

log = logging.getLogger(__name__)

GPUS_ENV = "AUGSBERT_GPUS"
# CLI commands (and their former names) whose stage trains data-parallel (the registry's `data_parallel`);
# every other command runs in one process.
DISTRIBUTED_COMMANDS = frozenset(name for stage in REGISTRY.values() if stage.data_parallel
                                 for name in (stage.command, *stage.aliases))


def requested_gpus() -> int:
    """Processes a distributed-capable stage should use: $AUGSBERT_GPUS (the Snakefile sets it from `gpus`)."""
    text = os.environ.get(GPUS_ENV, "1").strip() or "1"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"${GPUS_ENV} must be a positive integer (got {text!r})")
    return n


def world_size() -> int:
    """Processes of this run (torchrun sets WORLD_SIZE); 1 outside torchrun."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def is_main() -> bool:
    """Rank 0, or the only process: the one that writes and logs."""
    return rank() == 0


def in_worker() -> bool:
    """True inside a process that torchrun started (it has a rank)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def _command(argv: list[str]) -> str | None:
    """The subcommand of an `augsbert` command line (its first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def parallel_job(argv: list[str]) -> bool:
    """True for a torchrun worker and for a command that will re-launch itself under torchrun.

    Neither may be pinned to one GPU: the workers share the GPUs of the job.
    """
    if in_worker():
        return True
    try:
        return _command(argv) in DISTRIBUTED_COMMANDS and requested_gpus() > 1
    except ConfigError:
        return False  # the command reports the bad value itself


def launch_argv(argv: list[str], nproc: int) -> list[str]:
    """The torchrun command that runs `augsbert <argv>` in `nproc` processes on this node.

    `--standalone` makes a private rendezvous on a free port, so two jobs on
    one node never join each other.
    """
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
            "--nproc-per-node", str(nproc), "-m", "augsbert", *argv]


def backend(device: str) -> str:
    return "nccl" if device.startswith("cuda") else "gloo"


def check_devices(device: str, nproc: int) -> None:
    """Refuse a device choice that cannot give `nproc` processes one device each."""
    if device.startswith("cuda:"):
        raise ConfigError(f"device {device!r} names one GPU, but gpus is {nproc}: use device auto or cuda")
    if device == "mps":
        raise ConfigError("gpus > 1 needs CUDA GPUs (or device cpu); mps is a single device")
    if device in ("auto", "cuda"):
        import torch

        have = torch.cuda.device_count()
        if device == "cuda" and have < nproc:
            raise ConfigError(f"gpus is {nproc}, but torch sees {have} CUDA GPU(s) (CUDA_VISIBLE_DEVICES="
                             f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})")
        if device == "auto" and 0 < have < nproc:
            raise ConfigError(f"gpus is {nproc}, but torch sees only {have} CUDA GPU(s)")


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when its torchrun dies (a SIGKILL cannot be forwarded by torchrun)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    PR_SET_PDEATHSIG = 1
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent or parent == 1:  # torchrun died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


def init_worker(device: str) -> str:
    """Set up one torchrun worker: die with torchrun, pick its GPU, join the process group; return its device."""
    import torch
    import torch.distributed as dist

    _die_with_parent()
    if device.startswith("cuda") or (device == "auto" and torch.cuda.is_available()):  # one GPU per rank
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    elif device == "auto":
        device = "cpu"
    if not dist.is_initialized():
        # rank 0 evaluates dev Spearman while the others wait in the next step's all-reduce: a long timeout
        dist.init_process_group(backend=backend(device), timeout=datetime.timedelta(hours=2))
    return device


def _initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if _initialized():
        import torch.distributed as dist

        dist.barrier()


def broadcast(obj):
    """Rank 0's `obj` on every rank (a picklable object; unchanged in a single process)."""
    if not _initialized():
        return obj
    import torch.distributed as dist

    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def per_device_batch(batch_size: int, processes: int, option: str = "batch_size") -> int:
    """Examples per process and step: the global `batch_size` split evenly (our choice: the config is global)."""
    if batch_size % processes:
        raise ConfigError(f"{option} {batch_size} is the global batch and must be divisible by gpus "
                          f"({processes}): use a multiple of {processes}")
    return batch_size // processes


class ShardedBatchSampler:
    """Each global batch of `inner` cut into `parts` consecutive per-process batches, in order.

    accelerate's `BatchSamplerShard` (which the trainers wrap around the batch
    sampler) hands batch i to process i % parts, so process r gets part r of
    every global batch: one optimizer step covers exactly the examples of one
    global batch, as with a single process. The last, incomplete global batch
    is split as evenly as possible (the sentence-transformers trainers turn
    accelerate's `even_batches` off, so every process must get a non-empty
    part of it, or one would take a step the others never take); if it has
    fewer examples than processes, it is topped up from the epoch's first
    batch.
    """

    def __init__(self, inner, parts: int):
        self.inner, self.parts = inner, parts
        self.batch_size = inner.batch_size // parts  # accelerate tells full batches from the last one by this
        self.drop_last = getattr(inner, "drop_last", False)

    @property
    def sampler(self):
        """The inner batch sampler's index sampler.

        accelerate swaps a `RandomSampler` found here for its per-epoch seeded
        `SeedableRandomSampler`, as it does with a single process: the random
        order of every epoch is then the single-process order.
        """
        return getattr(self.inner, "sampler", None)

    @sampler.setter
    def sampler(self, sampler) -> None:
        self.inner.sampler = sampler

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.inner, "set_epoch"):
            self.inner.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.inner) * self.parts

    def __iter__(self):
        first: list[int] | None = None
        for batch in self.inner:
            batch = [int(i) for i in batch]
            if first is None:
                first = batch
            while len(batch) < self.parts:
                batch += first[: self.parts - len(batch)]
            size, extra = divmod(len(batch), self.parts)  # as numpy.array_split: the first `extra` parts one longer
            start = 0
            for i in range(self.parts):
                end = start + size + (i < extra)
                yield batch[start:end]
                start = end


def _sharded(dataset, batch_size: int, drop_last: bool, valid_label_columns=None, generator=None, seed: int = 0, *,
             inner_factory, parts: int) -> ShardedBatchSampler:
    inner = inner_factory(dataset, batch_size=batch_size * parts, drop_last=drop_last,
                          valid_label_columns=valid_label_columns, generator=generator, seed=seed)
    return ShardedBatchSampler(inner, parts)


def sharded_batch_sampler(inner_factory, parts: int):
    """A `batch_sampler` callable for the sentence-transformers trainers: `inner_factory` at the global batch, sharded.

    The trainer calls it with the per-process batch size; the inner sampler is
    built with `parts` times that, i.e. the global batch. (A partial, not a
    closure: the trainer pickles its arguments into every checkpoint.)
    """
    return partial(_sharded, inner_factory=inner_factory, parts=parts)


def default_batch_sampler(dataset, batch_size: int, drop_last: bool, valid_label_columns=None, generator=None,
                          seed: int = 0):
    """The sentence-transformers trainers' own random batches (their `BatchSamplers.BATCH_SAMPLER`)."""
    from sentence_transformers.base.sampler import DefaultBatchSampler
    from torch.utils.data import RandomSampler

    return DefaultBatchSampler(RandomSampler(dataset, generator=generator), batch_size=batch_size,
                               drop_last=drop_last, valid_label_columns=valid_label_columns, generator=generator,
                               seed=seed)


def run_data_parallel(name: str, spec: dict, out: str, runner: Callable, kwargs: dict, *, device: str | None,
                      force: bool, wait_lock: bool, argv: list[str]) -> bool:
    """Run `name` data-parallel when `gpus` > 1 (this module); True if this process has done its part.

    - launcher (`gpus` > 1, a training command, not yet under torchrun): checks
      the devices and that no live process writes `out` (so a locked artifact
      stops here, with the holder's name and exit code 75), then replaces itself
      with torchrun running this same command line in `gpus` processes;
    - torchrun worker: joins the process group on its own device; rank 0
      returns False and goes on as a single process would (writer lock,
      artifact, log); any other rank runs the stage's training part without
      the lock and returns True.
    """
    wanted = device or os.environ.get(DEVICE_ENV, "auto")
    if in_worker() and world_size() > 1:
        if name not in DISTRIBUTED_COMMANDS:
            raise ConfigError(f"`augsbert {name}` runs in one process; start it without torchrun (only "
                              f"{', '.join(sorted(DISTRIBUTED_COMMANDS))} train data-parallel)")
        kwargs["device"] = init_worker(wanted)
        if is_main():
            log.info("rank 0 of %d processes (device %s, backend %s)", world_size(), kwargs["device"],
                     backend(kwargs["device"]))
            return False
        runner(spec, out, force=force, **kwargs)
        return True
    nproc = requested_gpus()
    if nproc == 1 or "device" not in kwargs:
        return False
    if name not in DISTRIBUTED_COMMANDS:
        log.info("gpus is %d, but %s runs in one process on one device", nproc, name)
        return False
    check_devices(wanted, nproc)
    with writing(out), writer_lock(out, wait=wait_lock):
        pass  # only a probe: rank 0 takes the lock for the job
    command = launch_argv(argv, nproc)
    log.info("data-parallel over %d processes: %s", nproc, " ".join(command))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command)
    return True  # not reached: execv replaces this process
