"""The shape of an artifact key, `<readable-name>-<10 hex digits>` (made in `augsbert.planning.graph`).

Apart from the graph so that low modules which only recognise keys (`augsbert.store.manifests`: is this folder
named like an artifact?) import nothing of the planning machinery.
"""

from __future__ import annotations

import re

KEY_PATTERN = r"[A-Za-z0-9_.+]+(?:-[A-Za-z0-9_.+]+)*-[0-9a-f]{10}"


def is_key(name: object) -> bool:
    """Whether `name` is shaped like an artifact key (a content key, not a hand-written label)."""
    return isinstance(name, str) and re.fullmatch(KEY_PATTERN, name) is not None
