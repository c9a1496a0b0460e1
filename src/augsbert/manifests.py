"""Artifact manifests: what a finished artifact holds, so a damaged one is found before it is used.

Snakemake sees an artifact as one directory: a file deleted or cut short inside it (a disk incident,
a careless `rm`, a copy interrupted) went unnoticed, and the next stage read it, failed with a parser's
error, or silently changed (a missing `dev.parquet` changes epoch selection). So every artifact ends
with `manifest.json`, written last: each file's relative name, size and a digest, sha256 over the
whole file up to `FULL_HASH_BYTES`, and for larger files (model weights, big pair tables) over the
first and last MiB plus the size, which catches truncation and most damage at a fixed cost.

A stage checks the manifests of its input artifacts before it reads them (`augsbert.cli`), and
`augsbert verify [--repair]` checks every artifact and deletes the damaged ones so that Snakemake
rebuilds them and what depends on them (named as extra targets of the next run: a run whose own targets
are up to date never rebuilds a missing intermediate). Artifacts written before manifests existed have
none and are accepted as they are; a later artifact says in its metrics.json that it has one
(`WRITTEN_WITH`), so a deleted manifest.json is found too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

MANIFEST = "manifest.json"
FULL_HASH_BYTES = 64 << 20  # 64 MiB: above, the first and last MiB (plus the size) stand for the file
EDGE_BYTES = 1 << 20
WRITTEN_WITH = "manifest"  # metrics.json's key, true: the artifact was written with a manifest.json


def file_digest(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if size <= FULL_HASH_BYTES:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
            return "sha256:" + digest.hexdigest()
        digest.update(handle.read(EDGE_BYTES))
        handle.seek(size - EDGE_BYTES)
        digest.update(handle.read(EDGE_BYTES))
        return "edges-sha256:" + digest.hexdigest()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(root: str | Path) -> dict:
    """Write `root`/manifest.json over every other file below `root` (call it last) and return it."""
    root = Path(root)
    files = {}
    for path in _files(root):
        size = path.stat().st_size
        files[path.relative_to(root).as_posix()] = {"size": size, "digest": file_digest(path, size)}
    manifest = {"files": files}
    tmp = root / f".{MANIFEST}.partial-{os.getpid()}"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(tmp, root / MANIFEST)
    return manifest


def problems(root: str | Path, limit: int = 5) -> list[str]:
    """What is wrong with artifact `root` by its manifest (empty: intact, or written before manifests)."""
    root = Path(root)
    if not root.is_dir():
        return [f"{root} is missing"]
    path = root / MANIFEST
    if not path.exists():  # written before manifests (accepted), or its manifest.json was deleted
        return [f"{MANIFEST} is missing"] if _written_with_manifest(root) else []
    try:
        files = json.loads(path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return [f"{path} is damaged"]
    found: list[str] = []
    for name, entry in sorted(files.items()):
        file = root / name
        if not file.is_file():
            found.append(f"{name} is missing")
        elif file.stat().st_size != entry["size"]:
            found.append(f"{name} has {file.stat().st_size} bytes, {entry['size']} when written")
        elif file_digest(file, entry["size"]) != entry["digest"]:
            found.append(f"{name} changed since it was written (same size, other content)")
        if len(found) >= limit:
            break
    return found


def _written_with_manifest(root: Path) -> bool:
    try:
        return json.loads((root / "metrics.json").read_text()).get(WRITTEN_WITH) is True
    except (OSError, ValueError, AttributeError):
        return False


def artifact_folders(root: str | Path) -> list[Path]:
    """The finished artifacts under `root` (artifacts/<stage>/<key>/, each with its spec.json or its manifest,
    so that one that lost either is still found)."""
    root = Path(root)
    found = {p.parent for name in ("spec.json", MANIFEST) for p in root.glob(f"*/*/{name}")}
    return sorted(p for p in found if not p.name.startswith(".") and not p.parent.name.startswith("."))
