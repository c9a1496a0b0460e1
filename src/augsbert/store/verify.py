"""`augsbert verify`: every artifact checked against its manifest and its key, a damaged one moved aside with
`--repair` (into artifacts/.quarantine/, never deleted: it may hold files of the user's), and the results files
their readers would refuse named."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..errors import ConfigError
from .artifacts import DamagedArtifactError
from .live_runs import in_use
from .manifests import (QUARANTINE, artifact_folders, foreign_folders, hashed_bytes, key_problem, not_deletable, problems,
                        quarantine_place, unlisted_files)
from .results_files import read_results

# verify reports its time when it hashes more than this. HASH_RATE: what its estimate reckons with; sha256 of
# a 90 MiB file took 0.09-0.10 s (about 1 GB/s) on one core of the 2-core development VM from the page cache,
# half that allows for a disk
LARGE_VERIFY = 1 << 30
HASH_RATE = 0.5e9


def verify(artifacts: str | Path, results: str | Path, repair: bool, holds: dict[str, tuple]) -> int:
    """`augsbert verify`: check every artifact under `artifacts` against its manifest and key (`holds`: each
    stage's declared files, the registry's), name each damaged one and, with `repair`, move it aside (never delete
    it); then name the results files under `results` their readers would refuse. The exit code: 1 where something
    is damaged and not repaired."""
    stages = set(holds)
    root = Path(artifacts)
    if not root.is_dir():
        raise ConfigError(f"--artifacts {root}: {'not a folder' if root.exists() else 'no such folder'}; name the "
                          "project's artifacts folder (default: artifacts, run from the project folder)")
    folders = artifact_folders(root, stages)
    if not folders:
        raise ConfigError(f"--artifacts {root}: no artifact in it (artifacts are <stage>/<key>/ folders with a "
                          "spec.json or manifest.json); is it the project's artifacts folder?")
    total = sum(hashed_bytes(folder) for folder in folders)
    if total > LARGE_VERIFY:  # sha256 reads every byte: say what that costs before it starts
        print(f"hashing {total / 1e9:.1f} GB in {len(folders)} artifact(s) in full: about "
              f"{max(1, round(total / HASH_RATE))} s at {HASH_RATE / 1e9:.1f} GB/s", file=sys.stderr, flush=True)
    start = time.monotonic()
    damaged = {folder: found for folder in folders
               if (found := [p for p in (key_problem(folder, stages),) if p]
                   + problems(folder, holds=holds[folder.parent.name]))}
    deleted, kept, moved = [], [], []
    when = time.strftime("%Y%m%dT%H%M%S")
    used = in_use(damaged, root.parent) if repair else {}  # a live run reads or writes them: left in place
    for folder, found in damaged.items():
        print(f"{folder}: {'; '.join(found)}")
        if not repair:
            continue
        why = not_deletable(folder, root, stages)  # never anything the workflow did not write
        if why or folder in used:
            print(f"  not moved: {why}; check it and move it away yourself if it is an artifact" if why else
                  f"  not moved: {used[folder]}; run `augsbert verify --repair` again once it has ended")
            kept.append(folder)
            continue
        # moved aside, never deleted: a damaged artifact may hold files of yours (notes.txt) or be worth a look
        place = None if folder.is_symlink() else quarantine_place(root, folder, when)
        foreign = None if place is None else unlisted_files(folder)
        try:
            if place is None:  # an artifact linked from Snakemake's output cache: the link, the cache keeps its files
                folder.unlink()
            else:
                place.parent.mkdir(parents=True, exist_ok=True)
                os.rename(folder, place)
        except OSError as err:
            raise ConfigError(f"cannot move {folder} aside (to {place or 'nowhere: it is a link'}): "
                              f"{err.strerror or err} ({err.filename or folder}); make {root} writable (a read-only "
                              f"mount?) and run `augsbert verify --repair` again, or move it away yourself") from None
        deleted.append(folder)
        if place is None:
            print("  removed the link (Snakemake's cache keeps the files it points to)")
            continue
        moved.append(place)
        print(f"  moved to {place}" + (
            "" if foreign == [] else
            "; which of its files augsbert wrote cannot be told (no usable manifest.json)" if foreign is None else
            f"; {len(foreign)} file(s) in it augsbert did not write: {', '.join(foreign)}"))
    foreign = foreign_folders(root, stages)
    if foreign:
        print(f"{len(foreign)} folder(s) under {root} with a manifest.json or spec.json are not artifacts (no stage's "
              f"<stage>/<key> place) and were left alone: {', '.join(map(str, foreign[:3]))}"
              + (" ..." if len(foreign) > 3 else ""))
    took = time.monotonic() - start
    refused = verify_results(Path(results))
    print(f"{len(folders)} artifact(s) checked under {root}, {len(damaged)} damaged"
          + (f", {len(moved)} moved to {root / QUARANTINE}/" if moved else "")
          + (f", {len(deleted) - len(moved)} link(s) removed" if len(deleted) > len(moved) else "")
          + (f" ({total / 1e9:.1f} GB hashed in {took:.1f} s)" if total > LARGE_VERIFY else ""))
    if moved:
        print(f"{root / QUARANTINE}/ keeps what was moved (nothing reads it); take out what you need, then empty it: "
              f"rm -r {root / QUARANTINE}")
    if deleted:
        # Snakemake rebuilds a missing intermediate only for a job that runs anyway: a run whose targets
        # (results/..., tables) are up to date plans nothing, so the deleted folders are named as targets
        print("rebuild them and what depends on them: add them to the targets of your next run, "
              f"snakemake <options> <targets> {' '.join(str(folder) for folder in deleted)}")
    return 1 if kept or (damaged and not repair) or refused else 0


def verify_results(folder: Path) -> int:
    """Name each results file under `folder` that its readers would refuse (edited, or collected from artifacts
    that have changed since: augsbert.store.results_files); how many. They are never deleted (collect again)."""
    refused = 0
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            read_results(path, gone_ok=True)  # a deleted artifact: rebuilt, then re-collected
        except DamagedArtifactError as err:
            print(str(err))
            refused += 1
    if refused:
        print(f"{refused} results file(s) under {folder} not as collected (not deleted: collect them again)")
    return refused
