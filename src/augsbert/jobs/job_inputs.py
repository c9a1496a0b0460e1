"""What a stage job re-checks when it starts: the raw files and models it reads are those its key names.

A key holds the digests of the raw files (data stage) and the identity of each model reference
(`augsbert.store.fingerprints`), computed when the job was planned. A file edited between planning and the job,
or a spec whose runtime `model` path was pointed at another model, would otherwise be computed and stored
under a key that names other content.

The job hashes every raw file anew (`DigestCache(fresh=True)`): the digest cache is a shortcut for planning
only, and a poisoned or stale entry of it is never what a job records; the fresh digests then replace the
cache's entries, so that the next plan keys the files by what they hold. A file edited while the data job
reads it is found by `read_unchanged` after the read (its stat stamp, change time included, and its digest
again): the artifact is not written.

A local model folder is hashed anew only when its files changed since a job last hashed it
(`augsbert.store.fingerprints.ModelDigests`: every file's stat stamp, change time and inode included, kept with
the digest in `<artifacts>/.cache/model-digests.json`): a large model costs its hash once, not once per job.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError
from ..store.fingerprints import MODEL_CACHE_NAME, DigestCache, ModelDigests, model_identity, path_digest
from ..stages.data import raw_inputs_of


def recheck(spec: dict, cache: DigestCache | None = None, out: str | Path | None = None) -> None:
    """Raise ConfigError, naming the file or model and what to do, unless the raw files (a data job) and
    every model reference of `spec` are still those its key was made from.

    A local model folder is hashed once per state of its files (`ModelDigests`), kept in the artifacts folder
    the job writes into (`out` = <artifacts>/<stage>/<key>: <artifacts>/.cache/); an `out` of another shape
    keeps nothing and hashes every folder."""
    params = spec.get("params") or {}
    planning = cache or DigestCache()
    cache = DigestCache(planning.path, fresh=True)  # what the key says is checked against the bytes, not a cache
    models = ModelDigests(_model_cache(spec, out), files=cache)
    try:
        _recheck(spec, params, cache, models)
    finally:  # the fresh digests correct the planning cache (a poisoned entry would make every plan wrong)
        planning.entries.update(cache.entries)
        planning.dirty = planning.dirty or bool(cache.entries)
        planning.save()
        models.save()


def _model_cache(spec: dict, out: str | Path | None) -> Path | None:
    """Where a job's model digests are kept: the .cache/ folder of the artifacts folder `out` lies in."""
    if out is None or Path(out).parent.name != spec.get("stage") or not spec.get("stage"):
        return None
    return Path(out).parent.parent / ".cache" / MODEL_CACHE_NAME


AGAIN = ("plan again (run snakemake again: it writes the job's spec under the key of what is there now); "
         "nothing was written")


def _recheck(spec: dict, params: dict, cache: DigestCache, models: ModelDigests) -> None:
    if spec.get("stage") == "data" and "files" in params:
        planned = params["files"]
        files = raw_inputs_of(params)  # a missing file: MissingDataError with the loader's instructions
        now = [[Path(f).name, path_digest(cache, f)] for f in files]
        if planned != now:
            changed = list(dict.fromkeys(f for f, p, n in zip(files, planned if isinstance(planned, list) else [], now)
                                         if p != n))
            which = ", ".join(changed[:3]) or ", ".join(files[:3])
            raise ConfigError(f"dataset '{params.get('dataset')}': raw file(s) {which} changed since the job was "
                              f"planned (the key {spec.get('key')} holds the content planned); {AGAIN}")
    identities = params.get("model_identity") or {}
    for field, planned in identities.items():
        ref = params.get(field)
        if not isinstance(ref, str):
            continue
        found = model_identity(ref, models, params.get("hub_revisions"))
        if found != planned:
            raise ConfigError(f"{field} '{ref}' is not the model the key {spec.get('key')} was made from (its "
                              f"files changed, or the spec points at another model); {AGAIN}")


def raw_stamps(spec: dict) -> list[tuple[str, tuple]]:
    """Each raw file a data job's spec names (in the order of its planned `files`) with its stat stamp (size,
    mtime_ns, ctime_ns, inode), taken before the job reads them (`read_unchanged` compares)."""
    params = spec.get("params") or {}
    if spec.get("stage") != "data" or "files" not in params:
        return []
    return [(f, _stamp(f)) for f in raw_inputs_of(params)]


def read_unchanged(spec: dict, before: list[tuple[str, tuple]]) -> None:
    """Raise ConfigError unless each raw file is, after the data job read it, what it was before (its stamp: any
    write sets the change time) and what the key was planned from (its digest, hashed anew): a file rewritten
    during the read would otherwise be stored, parsed half old and half new, under the old content's key."""
    params = spec.get("params") or {}
    planned = [entry[1] if isinstance(entry, list) and len(entry) == 2 else None for entry in params.get("files") or []]
    for (file, stamp), digest in zip(before, planned + [None] * len(before)):
        if _stamp(file) != stamp or path_digest(DigestCache(fresh=True), file) != digest:
            raise ConfigError(f"dataset '{params.get('dataset')}': raw file {file} changed while the data job read "
                              f"it (the key {spec.get('key')} names the content planned); {AGAIN}")


def _stamp(file: str) -> tuple:
    try:
        st = os.stat(file)
    except OSError:
        return ()
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
