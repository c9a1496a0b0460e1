"""Pick the torch device: CUDA when present, overridable by config or environment."""

from __future__ import annotations

import os

DEVICE_ENV = "AUGSBERT_DEVICE"
PRECISION_ENV = "AUGSBERT_PRECISION"  # auto | fp32 | fp16 | bf16 (the Snakefile sets it from the config)
CUDA_GRAPHS_ENV = "AUGSBERT_CUDA_GRAPHS"  # auto | off (likewise; augsbert.training.graphs)


def resolve_device(preference: str | None = None) -> str:
    """`auto` (default) -> `cuda` if available, else `mps` if available, else `cpu`.

    The preference comes from the argument, else $AUGSBERT_DEVICE (the
    Snakefile sets it from the config's `device`), else `auto`. Asking for a
    device that is not there is an error rather than a silent CPU fallback.
    """
    import torch

    pref = (preference or os.environ.get(DEVICE_ENV) or "auto").strip()
    if pref == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    from ..errors import ConfigError

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
