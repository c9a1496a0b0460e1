"""Artifact keys: the canonical JSON of a planned spec and its short hash (the key's suffix), and the shape of a
key, `<readable-name>-<10 hex digits>` (made in `augsbert.planning.graph`).

Apart from the graph so that low modules which only hash or recognise keys (`augsbert.store.manifests`: is this
folder named like an artifact?) import nothing of the planning machinery.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

KEY_PATTERN = r"[A-Za-z0-9_.+]+(?:-[A-Za-z0-9_.+]+)*-[0-9a-f]{10}"


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


def is_key(name: object) -> bool:
    """Whether `name` is shaped like an artifact key (a content key, not a hand-written label)."""
    return isinstance(name, str) and re.fullmatch(KEY_PATTERN, name) is not None
