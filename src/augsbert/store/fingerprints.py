"""What an input *is*, for artifact keys: raw files by content, models by what they resolve to.

Keys built from paths or timestamps rerun hours of training when a file is
merely copied again or `touch`ed, and reuse stale results when a file is
overwritten in place. So raw data files enter keys by their sha256, and model
references by their resolved identity:

- a local model directory: a sha256 over its configuration, tokenizer and
  weight files (names and contents);
- a packaged alias (`minilm-l6`): the package and its version;
- a hub id: the id and the configured revision (`hub_revisions` in the config;
  pin a commit there to make the key exact).

Hashing a large file costs seconds, so digests are cached by (absolute path,
size, mtime_ns, ctime_ns, inode) in `artifacts/.cache/file-digests.json`: a dry
run re-hashes only what changed. A touched-but-identical file is re-hashed once,
gets the same digest, and so the same keys. The change time and inode are in
the stamp because the modification time alone can be set back: a same-size
correction copied with `cp -p`, `rsync -a` or `touch -r` keeps its old mtime,
but the system sets its ctime (and a replaced file has a new inode).

A job re-checks each local model folder its key names against the bytes (augsbert.jobs.job_inputs), not
against that planning cache; the digest of a folder it hashed is kept with every file's stamp in
`<artifacts>/.cache/model-digests.json` (ModelDigests), so the next job stats the files instead of reading a
large model again.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

from .model_refs import ALIAS_PACKAGES, local_path, reference_kind
from ..errors import DataError

CACHE_PATH = Path("artifacts/.cache/file-digests.json")
MODEL_CACHE_NAME = "model-digests.json"  # ModelDigests, in an artifacts folder's .cache/ (beside CACHE_PATH's file)
RACY_SECONDS = 2.0  # a file changed this close to (or after) its folder's hash is hashed again (ModelDigests)
MISSING = "missing"

# Files of a model directory that determine what it computes (weights, config, tokenizer, pooling).
MODEL_FILE_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model", ".pt", ".pth")


class DigestCache:
    """sha256 digests of files, memoised on disk by (path, size, mtime_ns, ctime_ns, inode)."""

    def __init__(self, path: Path = CACHE_PATH, fresh: bool = False):
        """`fresh`: hash every file anew, trusting no stored entry (what a job records; the cache is a shortcut
        for planning only)."""
        self.path = path
        self.dirty = False
        self.entries: dict[str, list] = {} if fresh else _stored(self.path)

    def file(self, path: str | Path) -> str:
        path = Path(path).resolve()
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # /dev/zero or a pipe would be hashed forever, a directory fails later
            raise DataError(f"{path} {'is a directory' if stat.S_ISDIR(st.st_mode) else 'is not a regular file'}; "
                            "a data file is hashed by its content")
        stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
        cached = self.entries.get(str(path))
        if isinstance(cached, list) and cached and cached[:-1] == stamp and isinstance(cached[-1], str):  # entries of the former (size, mtime) format re-hash once
            return cached[-1]
        digest = hashlib.sha256()
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        self.entries[str(path)] = [*stamp, digest.hexdigest()]
        self.dirty = True
        return digest.hexdigest()

    def tree(self, root: str | Path, suffixes: tuple[str, ...] | None = None) -> str:
        """One digest over the relative names and contents of the files below `root`."""
        digest = hashlib.sha256()
        for rel, path in tree_files(root, suffixes):
            digest.update(f"{rel}\0{self.file(path)}\n".encode())
        return digest.hexdigest()

    def save(self) -> None:
        """Write the cache atomically (merged with what another process may have written meanwhile)."""
        if not self.dirty:
            return
        if _write_merged(self.path, self.entries):  # a read-only or full project still plans; it re-hashes next time
            self.dirty = False


def tree_files(root: str | Path, suffixes: tuple[str, ...] | None = None) -> list[tuple[str, Path]]:
    """(relative name, path) of each file below `root` that a tree digest covers, sorted: none below a folder or
    of a name starting with a dot (.git, .cache, editor files: not part of the data or model), only names ending
    in `suffixes` where given."""
    root = Path(root)
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        if suffixes is not None and not rel.endswith(suffixes):
            continue
        found.append((rel, path))
    return found


class ModelDigests:
    """The tree digests of local model folders a job checked, kept once per folder state (MODEL_CACHE_NAME in the
    artifacts folder's .cache/): a job re-checks each model reference of its spec against its key
    (augsbert.jobs.job_inputs), and hashing a large model folder anew costs seconds to minutes per job.

    An entry is a folder's digest with the stat stamp (size, mtime_ns, ctime_ns, inode) of every file it covers,
    taken before the files were read, and the time the hashing began. It is used only while every stamp is the
    same (a written, replaced, added or removed file is hashed anew: the change time cannot be set back, and a
    replaced file has a new inode) and every file's change time lies RACY_SECONDS before that time (a write in the
    same clock tick as the hash would keep its stamp: such an entry is hashed once more, later, as git treats a
    "racily clean" file). Only digests a job computed from the bytes are stored here; the planning cache
    (DigestCache) never fills it. `path` None: nothing is kept, every folder is hashed."""

    def __init__(self, path: Path | None, files: DigestCache | None = None):
        """`files`: the per-file cache a folder is hashed through when it is (a fresh one: every byte read)."""
        self.path = path
        self.files = files if files is not None else DigestCache(fresh=True)
        self.entries: dict[str, dict] = _stored(path) if path is not None else {}
        self.dirty = False

    def tree(self, root: str | Path, suffixes: tuple[str, ...] | None = None) -> str:
        """The digest of DigestCache.tree(root, suffixes), hashed only when the folder changed since it was."""
        name = f"{Path(root).resolve()}\0{','.join(suffixes or ())}"
        began = time.time_ns()
        stamps = _stamps(root, suffixes)
        entry = self.entries.get(name)
        if (isinstance(entry, dict) and entry.get("files") == stamps and isinstance(entry.get("digest"), str)
                and isinstance(entry.get("hashed"), int)
                and all(stamp[2] < entry["hashed"] - int(RACY_SECONDS * 1e9) for stamp in stamps.values())):
            return entry["digest"]
        digest = self.files.tree(root, suffixes)
        if _stamps(root, suffixes) == stamps:  # not written while it was read: the digest is of these stamps
            self.entries[name] = {"files": stamps, "hashed": began, "digest": digest}
            self.dirty = True
        return digest

    def save(self) -> None:
        """Write the entries (merged with another job's, atomically); a folder that cannot be written only costs a
        hash next time."""
        if self.path is None or not self.dirty:
            return
        _write_merged(self.path, self.entries)
        self.dirty = False


def _stamps(root: str | Path, suffixes: tuple[str, ...] | None) -> dict[str, list[int]]:
    found = {}
    for rel, path in tree_files(root, suffixes):
        st = path.stat()
        found[rel] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
    return found


def _write_merged(path: Path, entries: dict) -> bool:
    """Write `entries` over those stored in `path` meanwhile (another process's), atomically; False where the
    folder cannot be written (a read-only or full project: nothing is kept, nothing fails)."""
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({**_stored(path), **entries}, indent=0, sort_keys=True))
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            tmp.unlink(missing_ok=True)  # a write cut short by a full disk leaves no partial file
        except OSError:
            pass
        return False


def _stored(path: Path) -> dict[str, list]:
    """The entries of a digest cache file; none from a missing, damaged or foreign one (valid JSON that is not an
    object, `[]`, broke every plan)."""
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # no cache yet, or a damaged one: recompute
    return entries if isinstance(entries, dict) else {}


def path_digest(cache: DigestCache, path: str | Path) -> str:
    """Digest of a file or directory; `missing` if it does not exist, or is neither (a device such as /dev/zero,
    a pipe: never read; the data stage then says what it is and what to do)."""
    path = Path(path)
    if path.is_file():
        return cache.file(path)
    if path.is_dir():
        return "tree:" + cache.tree(path)
    return MISSING


def model_identity(ref: str, cache: DigestCache | ModelDigests, revisions: dict[str, str] | None = None) -> str:
    """What a model reference resolves to, as a string that enters artifact keys."""
    kind = reference_kind(ref)
    if kind == "alias":
        from importlib.metadata import version

        package = ALIAS_PACKAGES[ref]
        return f"alias:{ref}={package}=={version(package)}"
    if kind == "path":
        return "sha256:" + cache.tree(local_path(ref), MODEL_FILE_SUFFIXES)
    return f"hub:{ref}@{(revisions or {}).get(ref, 'main')}"

