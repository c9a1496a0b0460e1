"""load_spec: read the `--spec` a workflow rule passes to a command (JSON, or @file holding it).

Every command that takes `--spec` reads it the same way: the stage commands
and the aggregate ones in `augsbert.cli`, and `augsbert export`, which cli
imports (so the reader lives below both of them).
"""

from __future__ import annotations

import json
from pathlib import Path


def load_spec(text: str) -> dict:
    if text.startswith("@"):
        text = Path(text[1:]).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise SystemExit(f"--spec is not valid JSON ({err})") from None
