"""Model references, devices, the pair architectures, and the hub download of what an experiment loads (fetch.py)."""

from ..store.model_refs import ModelResolutionError, resolve_model
from .device import resolve_device

__all__ = ["ModelResolutionError", "resolve_device", "resolve_model"]
