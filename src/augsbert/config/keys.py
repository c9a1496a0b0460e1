"""Artifact-key hashing: the canonical JSON of a planned spec and its short hash (the key's suffix)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _normalise_numbers(obj: Any) -> Any:
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)  # 4 and 4.0 mean the same setting and must hash the same
    if isinstance(obj, dict):
        return {k: _normalise_numbers(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_normalise_numbers(v) for v in obj]
    return obj


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys, no whitespace and integral floats as ints: the input of every hash."""
    return json.dumps(_normalise_numbers(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def short_hash(obj: Any, length: int = 10) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()[:length]
