"""Pick the torch device: CUDA when present, overridable by config or environment."""

from __future__ import annotations

import os

from ..errors import ConfigError

DEVICE_ENV = "AUGSBERT_DEVICE"
# What was asked for before `pin_one_gpu` (below) turned `cuda:N` into CUDA_VISIBLE_DEVICES=N and `cuda`:
# messages name the device the user wrote, not `cuda`
REQUESTED_ENV = "AUGSBERT_DEVICE_REQUESTED"
DEVICE_FORMS = "auto, cpu, cuda, cuda:N (N = 0, 1, ...) or mps"


def check_device_name(pref: str, where: str = "device") -> None:
    """Raise ConfigError unless `pref` names a kind of device this package runs on (no torch import)."""
    import re

    if not re.fullmatch(r"auto|cpu|cuda|cuda:\d+|mps", pref):
        raise ConfigError(f"{where} {pref!r}: not a device; use {DEVICE_FORMS}")
PRECISION_ENV = "AUGSBERT_PRECISION"  # auto | fp32 | fp16 | bf16 (the Snakefile sets it from the config)
CUDA_GRAPHS_ENV = "AUGSBERT_CUDA_GRAPHS"  # auto | off (likewise; augsbert.training.cuda_graphs)


def resolve_device(preference: str | None = None) -> str:
    """`auto` (default) -> `cuda` if available, else `mps` if available, else `cpu`.

    The preference comes from the argument, else $AUGSBERT_DEVICE (the
    Snakefile sets it from the config's `device`), else `auto`. Asking for a
    device that is not there is an error rather than a silent CPU fallback.
    """
    import torch

    pref = (preference or os.environ.get(DEVICE_ENV) or "auto").strip()
    check_device_name(pref)
    if pref == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"

    requested = os.environ.get(REQUESTED_ENV)
    if pref == "cuda" and requested and requested.startswith("cuda:") and not torch.cuda.is_available():
        index = requested.removeprefix("cuda:")
        raise ConfigError(f"device '{requested}' requested, but there is no GPU with index {index} "
                          f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}; `nvidia-smi -L` lists "
                          "the GPUs, numbered from 0); name one of them, or set device: auto or cpu")
    if pref.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device '{pref}' requested, but torch sees no CUDA GPU (set device: auto or cpu)")
    if pref.startswith("cuda:"):
        index, count = pref.removeprefix("cuda:"), torch.cuda.device_count()
        if not index.isdigit() or int(index) >= count:
            raise ConfigError(f"device '{pref}' requested, but torch sees {count} CUDA GPU(s): cuda:0 to "
                              f"cuda:{count - 1} (CUDA_VISIBLE_DEVICES renumbers them from 0)")
    if pref == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device 'mps' requested, but it is not available (set device: auto or cpu)")
    return pref


def precision() -> str:
    """auto | fp32 | fp16 | bf16, from $AUGSBERT_PRECISION (the Snakefile sets it from the config)."""
    return os.environ.get(PRECISION_ENV, "auto")


def pin_one_gpu(argv: list[str]) -> None:
    """Give this process exactly one GPU, before torch starts.

    Hugging Face trainers spread over every visible GPU (DataParallel), which
    would silently multiply the batch size and ignore `cuda:N`. Snakemake does
    not set CUDA_VISIBLE_DEVICES (SLURM does for --gpus), so a local job with
    `cuda:N` or several visible GPUs is pinned here.
    """
    device = os.environ.get(DEVICE_ENV, "auto")
    if "--device" in argv[:-1]:
        device = argv[argv.index("--device") + 1]
    if device.startswith("cuda:"):
        os.environ[REQUESTED_ENV] = device  # named in messages: the job sees `cuda` below
        os.environ["CUDA_VISIBLE_DEVICES"] = device.split(":", 1)[1]
        os.environ[DEVICE_ENV] = "cuda"
        if "--device" in argv[:-1]:
            argv[argv.index("--device") + 1] = "cuda"
    elif device in ("auto", "cuda") and "CUDA_VISIBLE_DEVICES" not in os.environ:
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
