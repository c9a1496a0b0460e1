"""Model references, devices and (in later stages) the pair architectures."""

from ..store.model_refs import ModelResolutionError, resolve_model
from .device import resolve_device

__all__ = ["ModelResolutionError", "resolve_device", "resolve_model"]
