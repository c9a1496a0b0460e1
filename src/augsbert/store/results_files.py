"""A results file (results/<experiment>.json) is derived, never trusted.

collect-results records the manifest digest of every artifact file it read (`sources`) and a digest of the
document's own content (`digest`, `seal`). Every reader (`render-table`, `export` and its model card, `augsbert
verify`) calls `check_results`: a results file edited since it was written (a same-size change of one number
was rendered as if measured), or collected from artifacts that have changed since, is refused with one line
naming it; collecting it again from the artifacts is the fix.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .artifacts import DamagedArtifactError, check_artifact, nan_to_null, read_json
from .manifests import listed_digests


def content_digest(doc: dict) -> str:
    """`sha256:<hex>` of a results document without its `digest` (canonical JSON, as written and read back)."""
    body = {k: v for k, v in nan_to_null(doc).items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def seal(doc: dict) -> dict:
    """The document with its `digest` (what collect-results writes; tests build results files with it too)."""
    doc = json.loads(json.dumps(nan_to_null(doc), allow_nan=False))  # what reading the written file gives back
    doc["digest"] = content_digest(doc)
    return doc


def _again(path: str | Path) -> str:
    return (f"collect it again from the artifacts (`snakemake {path}` after deleting it, or `augsbert "
            "collect-results`); nothing was published")


def read_results(path: str | Path, gone_ok: bool = False) -> dict:
    """The results document in `path`, checked by `check_results`; a file that is not UTF-8 or not JSON, or a path
    that is no regular file (a folder named `results/x.json`), raises DamagedArtifactError naming it (issue 56
    S9, S10: a UnicodeDecodeError or IsADirectoryError traceback before). A missing file raises FileNotFoundError."""
    doc = read_json(path, "results file", fix=f"not as collect-results wrote it: {_again(path)}")
    check_results(doc, path, gone_ok)
    return doc


def check_results(doc: dict, path: str | Path, gone_ok: bool = False) -> None:
    """Raise DamagedArtifactError (one line naming `path`) unless results document `doc` is as collect-results
    wrote it and the artifacts it was collected from still hold what they held then. `gone_ok`: an artifact
    that is no longer there passes (`verify --repair` deleted it: the next run rebuilds it and collects the
    results file again)."""
    again = _again(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("digest"), str):
        raise DamagedArtifactError(f"{path}: results file without a digest (written by hand or by an earlier "
                                   f"version); {again}")
    if content_digest(doc) != doc["digest"]:
        raise DamagedArtifactError(f"{path}: results file edited after collect-results wrote it (its content does "
                                   f"not match its digest); {again}")
    sources = doc.get("sources") or {}
    if not isinstance(sources, dict):
        raise DamagedArtifactError(f"{path}: its `sources` is not an object; {again}")
    for source, files in sources.items():
        if not Path(source).is_dir():
            if gone_ok:
                continue
            raise DamagedArtifactError(f"{path}: artifact {source}, which it was collected from, is gone; {again}")
        check_artifact(source, f"{path}: artifact", only=set(files))
        if listed_digests(source, set(files)) != files:
            raise DamagedArtifactError(f"{path}: artifact {source} was rewritten after the results were collected "
                                       f"from it; {again}")
