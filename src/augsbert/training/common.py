"""What the trainers share: the work directory of a resumable run, resuming, mixed precision.

Every trained stage (pair models, MLM adaptation, pre-training, the topic classifier) keeps its
resume state in a work directory beside its artifact (`claim_workdir`), resumes from the newest
checkpoint there (`train_resuming`) and sets the trainer's precision flags the same way.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import shutil
from pathlib import Path

from ..store.artifacts import read_json, write_json
from .. import __version__

log = logging.getLogger(__name__)


def precision_flags(device: str, precision: str) -> dict:
    """TrainingArguments flags for `precision` (auto = bf16/fp16 on CUDA, fp32 elsewhere)."""
    if precision == "auto":
        if not device.startswith("cuda"):
            return {}
        import torch

        native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)  # emulated bf16 (T4, V100) is slow
        return {"bf16": True} if native_bf16 else {"fp16": True}
    return {"fp16": precision == "fp16", "bf16": precision == "bf16"}


def device_flags(device: str, torch_compile: bool = False) -> dict:
    """TrainingArguments that keep the host from waiting on a CUDA GPU every step; `torch_compile` (option of the
    trained stages, off by default) compiles the model on any device.

    On CUDA: the loss is not read back each step to filter NaN / inf from the logged loss (that check copies it to
    the host and waits for the step to finish; a NaN loss then shows as NaN in the log), batches are copied from
    pinned memory without blocking, and AdamW is the fused one (transformers' default since torch 2.8; named, so
    that an older torch gets it too). Elsewhere nothing changes, so CPU runs compute what they computed before.
    """
    flags = {"torch_compile": True} if torch_compile else {}
    if device.startswith("cuda"):
        flags.update(logging_nan_inf_filter=False, accelerator_config={"non_blocking": True},
                     dataloader_pin_memory=True, optim="adamw_torch_fused")
    return flags


def claim_workdir(workdir: Path, fingerprint: dict) -> None:
    """Reuse resume state only if it was made by the same computation; otherwise start afresh.

    Reused state is first tidied up after a killed job. The caller holds the
    artifact's writer lock, so whatever a write left half-done here is a dead
    job's, never a live one's.
    """
    fingerprint = {**fingerprint, "augsbert": __version__}
    marker = workdir / "fingerprint.json"
    if workdir.exists() and (not marker.exists() or read_json(marker) != fingerprint):
        log.warning("discarding resume state in %s: it belongs to another configuration or version", workdir)
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    _recover_killed_writes(workdir)
    write_json(marker, fingerprint)


@contextlib.contextmanager
def frozen_heap():
    """The objects alive now kept out of the garbage collector's full passes while the block runs.

    A process that imported torch, transformers and sentence-transformers holds about half a million objects,
    all alive until it ends; a full collection walks them all (0.3-0.9 s here), and the trainers run one as
    training starts (accelerate's `free_memory`). `gc.freeze` moves them to a generation the collector does not
    walk; `gc.unfreeze` afterwards lets it collect whatever of them has become garbage since (a seed trial's
    model). Nothing else changes: what is collected is what is unreachable, only later.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def train_resuming(trainer, trainer_dir: Path):
    """`trainer.train()`, resumed from the newest checkpoint in `trainer_dir` if a killed run left one.

    Returns the trainer's output and the checkpoint's name (None for a fresh start), which every
    trained stage reports as `resumed_from`.
    """
    from transformers.trainer_utils import get_last_checkpoint

    if Path(trainer_dir).is_dir():
        drop_unfinished_checkpoints(Path(trainer_dir))
    last = get_last_checkpoint(str(trainer_dir)) if Path(trainer_dir).is_dir() else None
    if last:
        log.info("resuming from %s", last)
    with frozen_heap():
        return trainer.train(resume_from_checkpoint=last), Path(last).name if last else None


def drop_unfinished_checkpoints(trainer_dir: Path) -> list[str]:
    """Remove the checkpoints a kill cut short, so a resume takes the newest whole one (or starts afresh).

    The Trainer writes a checkpoint's `trainer_state.json` last (after the weights, optimizer, scheduler and RNG
    states), so a checkpoint without it was being written when the job was killed: resuming from it fails
    (FileNotFoundError on trainer_state.json, seen when a measurement's job was killed while saving its last
    step). It holds nothing a resume can use; the folder is this job's own resume state. Returns the names removed.
    """
    removed = []
    for checkpoint in sorted(trainer_dir.glob("checkpoint-*")):
        if checkpoint.is_dir() and not (checkpoint / "trainer_state.json").is_file():
            log.warning("removing %s: a kill cut its writing short (no trainer_state.json); resuming without it",
                        checkpoint)
            shutil.rmtree(checkpoint)
            removed.append(checkpoint.name)
    return removed


def _recover_killed_writes(workdir: Path) -> None:
    """Remove temporary files of killed writes; undo a best-model swap that a kill cut in half."""
    for stale in workdir.glob(".*.partial-*"):  # write_json's temp files (best.json, seed_search.json, ...)
        stale.unlink(missing_ok=True)
    best, new, old = workdir / "best", workdir / "best.partial", workdir / "best.old"
    shutil.rmtree(new, ignore_errors=True)
    if old.exists():
        if best.exists():  # killed after the swap: `old` is garbage
            shutil.rmtree(old)
        else:  # killed between the two renames: `old` is still the model best.json describes
            os.replace(old, best)
