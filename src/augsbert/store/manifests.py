"""Artifact manifests: what a finished artifact holds, so a damaged one is found before it is used.

Snakemake sees an artifact as one directory: a file deleted or cut short inside it (a disk incident,
a careless `rm`, a copy interrupted) went unnoticed, and the next stage read it, failed with a parser's
error, or silently changed (a missing `dev.parquet` changes epoch selection). So every artifact ends
with `manifest.json`, written last: each file's relative name, size and the sha256 of the whole file.
Every byte is hashed, model weights included: a corrupted tensor inside a 90 MB `model.safetensors`
(size and modification time kept) went unnoticed when large files were hashed on their first and last
MiB only, and the suite then wrote null metrics. sha256 streams at about 1 GB/s on one core (a 90 MiB
file in 0.09-0.10 s on the 2-core development VM), so a model costs a fraction of a second; `augsbert verify` says how long it will take when an
artifacts folder holds a lot. Manifests written by earlier versions (`edges-sha256:` digests) are
still checked the way they were written.

A stage checks the manifests of its input artifacts before it reads them (`augsbert.face.cli`), and
`augsbert verify [--repair]` checks every artifact and moves the damaged ones aside, into
`<artifacts>/.quarantine/<stage>/<key>-<time>/` (`quarantine_place`), naming every file in them that augsbert
did not write (`unlisted_files`), so that Snakemake rebuilds them and what depends on them (named as extra
targets of the next run: a run whose own targets are up to date never rebuilds a missing intermediate). Artifacts written before manifests existed have
none and are accepted as they are; a later artifact says in its metrics.json that it has one
(`WRITTEN_WITH`), so a deleted manifest.json is found too. A folder in an artifact's place holding nothing, or no
metrics.json (every artifact ever written holds one), is incomplete, and `verify --repair` moves it aside too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .keys import is_key

MANIFEST = "manifest.json"
# Files every artifact holds (artifact_dir writes both): a manifest that does not list them was emptied or edited
HOLDS = ("spec.json", "metrics.json")
# Files others put into a finished artifact: Snakemake touches this one in a directory output after the job
NOT_CONTENT = (".snakemake_timestamp",)
EDGE_BYTES = 1 << 20  # the first and last MiB of a file: how manifests before full hashing stood for large files
WRITTEN_WITH = "manifest"  # metrics.json's key, true: the artifact was written with a manifest.json


def file_digest(path: Path, size: int, edges: bool = False) -> str:
    """`sha256:<hex>` of the whole file; `edges` only to check a manifest of an earlier version."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if not edges:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
            return "sha256:" + digest.hexdigest()
        digest.update(handle.read(EDGE_BYTES))
        handle.seek(size - EDGE_BYTES)
        digest.update(handle.read(EDGE_BYTES))
        return "edges-sha256:" + digest.hexdigest()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def _present(root: Path) -> list[str]:
    """The relative names of the files below `root` that a manifest should list (not its own, not Snakemake's,
    not a hidden file or an editor's backup: a file browser's `.DS_Store` or an open editor's `.x.swp` is
    no damage, and `verify --repair` would move the whole artifact aside for it; no reader opens such a name)."""
    return [p.relative_to(root).as_posix() for p in _files(root)
            if p.name not in NOT_CONTENT and not p.name.startswith(".") and not p.name.endswith("~")]


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


def _entries(path: Path) -> dict | None:
    """The `files` of a manifest.json as this module writes it (name -> size, digest), else None."""
    try:
        files = json.loads(path.read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(files, dict):
        return None
    for name, entry in files.items():
        parts = Path(name).parts
        if (not parts or Path(name).is_absolute() or ".." in parts or not isinstance(entry, dict)
                or type(entry.get("size")) is not int or not isinstance(entry.get("digest"), str)):
            return None  # another program's manifest.json (a web app's, a browser extension's), or edited
    return files


def problems(root: str | Path, limit: int = 5, only: set[str] | None = None, holds: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with artifact `root` by its manifest (empty: intact, or written before manifests);
    `only`: check just these of its files (what a reader opens), not every file. A manifest must list the
    files every artifact holds (`HOLDS`, and the stage's own `holds`), and a file the manifest does not list
    (dropped in later: a stray `dev.parquet` would change what a reader does) is named too."""
    root = Path(root)
    if not root.is_dir():
        return [f"{root} is missing"]
    path = root / MANIFEST
    if not path.exists():  # written before manifests (accepted), or its manifest.json was deleted
        if _written_with_manifest(root):
            return [f"{MANIFEST} is missing"]
        return [incomplete] if (incomplete := _incomplete(root)) else []
    files = _entries(path)
    if files is None:
        return [f"{path} is damaged"]
    found = [f"{MANIFEST} does not list {name}, which every artifact of its stage holds (emptied or edited)"
             for name in dict.fromkeys((*HOLDS, *holds)) if name not in files]
    found += [f"{name} is not in its {MANIFEST} (added after the artifact was written)"
              for name in _present(root) if name not in files and (only is None or name in only)]
    for name, entry in sorted(files.items()):
        if only is not None and name not in only:
            continue
        file = root / name
        if not file.is_file():
            found.append(f"{name} is missing")
        elif file.stat().st_size != entry["size"]:
            found.append(f"{name} has {file.stat().st_size} bytes, {entry['size']} when written")
        elif file_digest(file, entry["size"], entry["digest"].startswith("edges-")) != entry["digest"]:
            found.append(f"{name} changed since it was written (same size, other content)")
        if len(found) >= limit:
            break
    return found[:limit]


def _incomplete(root: Path) -> str | None:
    """Why `root`, which has no manifest, is no finished artifact (None: it may be one written before manifests). Every
    artifact augsbert ever wrote holds spec.json and metrics.json (`artifact_dir` writes both, from its first
    version): a folder named like a key holding nothing, or only spec.json, was made by hand or by a copy cut short,
    and Snakemake, which sees only the folder, took it for built (issue 64, V1)."""
    if (root / "metrics.json").exists():
        return None
    held = [p.relative_to(root).as_posix() for p in _files(root) if p.name not in NOT_CONTENT]
    what = "it is empty" if not held else \
        f"it holds only {', '.join(held[:3])}{' ...' if len(held) > 3 else ''}, no metrics.json and no {MANIFEST}"
    return f"incomplete, not a finished artifact: {what} (a finished one holds spec.json, metrics.json and {MANIFEST})"


def is_empty(folder: str | Path) -> bool:
    """`folder` holds no file but Snakemake's own (`NOT_CONTENT`): nothing in it can be lost."""
    return not any(p.is_file() and p.name not in NOT_CONTENT for p in Path(folder).rglob("*"))


def key_problem(root: str | Path, stages: set[str] | None = None) -> str | None:
    """The artifact's spec.json names another key than its folder's name, or (its folder being in a stage's folder
    of `stages`, the registry's) another stage (None: they agree, or it has no key).

    Stages, collect-results and Snakemake find an artifact by its folder's name: a folder whose content was
    made for another key (copied, renamed, or written with `--out` under an old name) must not be read as it, nor
    one of another stage copied under the same key (a zero_shot artifact in artifacts/suite/: issue 56 S7)."""
    root = Path(root)
    try:
        spec = json.loads((root / "spec.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # a missing or damaged spec.json is the manifest's to report
    key = spec.get("key") if isinstance(spec, dict) else None
    # a content key (`<name>-<hash>`, what the workflow plans); a hand-written spec's own label is not one
    if is_key(key) and key != root.name:
        return f"its spec.json says it holds {key}, not {root.name} as its folder's name says"
    stage, place = spec.get("stage") if isinstance(spec, dict) else None, root.parent.name
    if stages and place in stages and isinstance(stage, str) and stage != place:
        return f"its spec.json says it is a {stage} artifact, not a {place} one as its folder {root.parent}/ says"
    return None


def listed_digests(root: str | Path, names: set[str]) -> dict[str, str]:
    """The digests artifact `root`'s manifest lists for those of `names` it lists (none without a manifest)."""
    files = _entries(Path(root) / MANIFEST) or {}
    return {name: files[name]["digest"] for name in sorted(names) if name in files}


def hashed_bytes(root: str | Path) -> int:
    """How many bytes checking artifact `root` reads (the sizes its manifest lists)."""
    files = _entries(Path(root) / MANIFEST) or {}
    return sum(entry["size"] for entry in files.values())


def _written_with_manifest(root: Path) -> bool:
    try:
        return json.loads((root / "metrics.json").read_text()).get(WRITTEN_WITH) is True
    except (OSError, ValueError, AttributeError):
        return False


def artifact_folders(root: str | Path, stages: set[str] | None = None) -> list[Path]:
    """The artifacts under `root`: `<root>/<stage>/<key>/` (for a stage of `stages`, the registry's in
    `augsbert verify`) named like a key, each with its spec.json or a manifest of ours (so that one that lost
    either is still found), or empty (a folder Snakemake takes for the built artifact: `problems` calls it
    incomplete). Anything else holding a manifest.json (a web app's, an editor's) is no artifact: see
    `foreign_folders`."""
    return [p for p in _candidates(root, empty=True) if (stages is None or p.parent.name in stages) and is_key(p.name)
            and ((p / "spec.json").exists() or _entries(p / MANIFEST) is not None or is_empty(p))]


def foreign_folders(root: str | Path, stages: set[str] | None = None) -> list[Path]:
    """Folders two levels below `root` with a spec.json or manifest.json that are not artifacts' places."""
    found = set(artifact_folders(root, stages))
    return [p for p in _candidates(root) if p not in found]


def _candidates(root: str | Path, empty: bool = False) -> list[Path]:
    root = Path(root)
    found = {p.parent for name in ("spec.json", MANIFEST) for p in root.glob(f"*/*/{name}")}
    if empty:  # and the folders holding no file (a stage's empty artifact folder)
        found |= {p for p in root.glob("*/*") if p.is_dir() and not p.is_symlink() and is_empty(p)}
    return sorted(p for p in found if not p.name.startswith(".") and not p.parent.name.startswith("."))


def not_deletable(folder: Path, root: Path, stages: set[str]) -> str | None:
    """Why `augsbert verify --repair` must leave `folder` alone (None: it is an artifact the workflow wrote).

    Only a real artifact is deleted: directly in a stage folder of the artifacts root `root`, named like a
    key, with a spec.json whose stage and key are those of its place; one that lost its spec.json (or holds a
    damaged one) still counts when its own manifest lists spec.json and metrics.json as this module writes it.
    """
    if os.path.realpath(folder.parent.parent) != os.path.realpath(root):
        return f"it is not directly below {root}/<stage>/"
    stage, key = folder.parent.name, folder.name
    if stage not in stages:
        return f"{stage} is not a stage's folder"
    if not is_key(key):
        return f"{key} is not named like an artifact key"
    try:
        spec = json.loads((folder / "spec.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        spec = None
    if isinstance(spec, dict):
        if spec.get("stage") != stage or spec.get("key") != key:
            return (f"its spec.json names stage {spec.get('stage')!r} and key {spec.get('key')!r}, not {stage!r} "
                    f"and {key!r}")
        return None
    if is_empty(folder):  # an empty folder in an artifact's place: nothing of yours in it, and Snakemake skips it
        return None
    files = _entries(folder / MANIFEST)
    if files is None or not {"spec.json", "metrics.json"} <= set(files):
        return "neither its spec.json nor its manifest.json says the workflow wrote it"
    return None


QUARANTINE = ".quarantine"  # below the artifacts root: where `verify --repair` moves damaged artifacts


def quarantine_place(root: str | Path, folder: Path, when: str) -> Path:
    """Where `verify --repair` moves the damaged artifact `folder` (`<root>/<stage>/<key>`): `<root>/.quarantine/
    <stage>/<key>-<when>/` (`when`: a timestamp such as 20261128T101500), with `-2`, `-3` ... added when that
    exists. A dot folder: no reader, `verify` or Snakemake takes anything in it for an artifact."""
    base = Path(root) / QUARANTINE / folder.parent.name / f"{folder.name}-{when}"
    place, n = base, 1
    while place.exists() or place.is_symlink():
        n += 1
        place = base.with_name(f"{base.name}-{n}")
    return place


def unlisted_files(root: str | Path) -> list[str] | None:
    """The files below artifact `root` that its manifest does not list (augsbert did not write them: notes you
    added, an editor's backup, a file copied in), hidden ones included, as relative names; None when it has no
    usable manifest (then what augsbert wrote cannot be told). Its manifest.json and Snakemake's timestamp file are
    not counted."""
    root = Path(root)
    files = _entries(root / MANIFEST)
    if files is None:
        return None
    return [name for name in (p.relative_to(root).as_posix() for p in _files(root))
            if name not in files and Path(name).name not in NOT_CONTENT]
