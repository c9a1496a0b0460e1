"""Snakemake's incomplete markers of artifacts that a job finished after the run that started it was killed.

Snakemake marks each output of a job when the job starts (a file in `.snakemake/incomplete/` named by the output's
path in URL-safe base64) and removes the mark when the job ends under it. A run killed with -9 (`augsbert run` and its
Snakemake) leaves the marks, while its jobs live on: each finishes its artifact under a temporary name and renames it
when complete (store/artifacts.py), so a folder named like the artifact is a finished one. The profile's
`rerun-incomplete: true` then made the next run delete that finished artifact and train it again ("Forced
execution", issue 64 L3b): hours of a teacher lost for a mark that was no longer true.

So before Snakemake reads the marks (the Snakefile, while it is parsed), `keep_finished` removes the mark of each
artifact that is finished as its key and manifest say (`augsbert.store.artifacts.finished_artifact`), whichever
process finished it, and says so; Snakemake then takes it as built. A mark stays where the artifact is not finished
(its job was cut short: it runs again, as the profile intends), where a live process still holds its writer lock (a
job finishing it), and where a live run of the folder plans it (that run's own job, which removes the mark itself).
Only Snakemake's file-based store of marks is read (its default; `--persistence-backend db` keeps them elsewhere).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from pathlib import Path

from .artifacts import ARTIFACTS_ROOT, finished_artifact
from .live_runs import RUNS_DIR, busy_outputs, live_runs

INCOMPLETE = Path(".snakemake", "incomplete")  # below the folder the workflow runs in


def marked_outputs(root: str | Path = ".") -> dict[str, Path]:
    """The outputs Snakemake holds for incomplete in `root` (as the rules name them, relative to it) -> their marker
    files. A long name is split by Snakemake into folders, each part but the last starting with `@`."""
    folder = Path(root) / INCOMPLETE
    found = {}
    for path, _, names in os.walk(folder):
        for name in names:
            parts = (Path(path) / name).relative_to(folder).parts
            encoded = "".join(part[1:] if part.startswith("@") and i < len(parts) - 1 else part
                              for i, part in enumerate(parts))
            try:
                output = base64.urlsafe_b64decode(encoded.encode()).decode()
            except (binascii.Error, ValueError):
                continue  # not a marker (Snakemake's `migration_underway`)
            found[output] = Path(path) / name
    return found


def keep_finished(holds: Mapping[str, tuple[str, ...]], root: str | Path = ".") -> list[str]:
    """Remove the incomplete marker of every artifact `artifacts/<stage>/<key>` (for a stage of `holds`: the files
    its artifacts hold) that is finished, that no live process writes and no live run of `root` plans; the
    outputs whose marker was removed."""
    root = Path(root)
    marked = {output: marker for output, marker in marked_outputs(root).items()
              if len(parts := Path(output).parts) == 3 and parts[0] == ARTIFACTS_ROOT and parts[1] in holds
              and finished_artifact(root / output, parts[1], parts[2], holds[parts[1]]) is not None}
    if not marked:
        return []
    planned = {os.path.normpath(path) for run in live_runs(root / RUNS_DIR) for path in run.get("outputs") or ()}
    busy = {out for out, *_ in busy_outputs([str(root / output) for output in marked])}
    kept = []
    for output, marker in sorted(marked.items()):
        if os.path.normpath(output) in planned or str(root / output) in busy:
            continue
        marker.unlink(missing_ok=True)
        if marker.parent != root / INCOMPLETE:  # the folders of a long name's parts, when empty
            try:
                os.removedirs(marker.parent)
            except OSError:
                pass
        kept.append(output)
    return kept
