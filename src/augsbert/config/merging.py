"""deep_merge: how config sections are layered (experiments over `defaults`, grid cells over their options).

Kept out of `augsbert.config.load` (which re-exports it) so `augsbert.config.grids`, which
config calls to expand grids, can use it without importing config back.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping


def deep_merge(base: Mapping, override: Mapping) -> dict:
    """Recursively merge `override` over `base` (new dict; mappings merge, all else replaces)."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
