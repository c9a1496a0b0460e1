"""What a stage job re-checks when it starts: the raw files and models it reads are those its key names.

A key holds the digests of the raw files (data stage) and the identity of each model reference
(`augsbert.store.fingerprints`), computed when the job was planned. A file edited between planning and the job,
or a spec whose runtime `model` path was pointed at another model, would otherwise be computed and stored
under a key that names other content.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from ..store.fingerprints import DigestCache, model_identity, path_digest
from ..stages.data import raw_inputs_of


def recheck(spec: dict, cache: DigestCache | None = None) -> None:
    """Raise ConfigError, naming the file or model and what to do, unless the raw files (a data job) and
    every model reference of `spec` are still those its key was made from."""
    params = spec.get("params") or {}
    cache = cache or DigestCache()
    again = ("plan again (run snakemake again: it writes the job's spec under the key of what is there now); "
             "nothing was written")
    if spec.get("stage") == "data" and "files" in params:
        planned = params["files"]
        files = raw_inputs_of(params)  # a missing file: MissingDataError with the loader's instructions
        now = [[Path(f).name, path_digest(cache, f)] for f in files]
        if planned != now:
            changed = list(dict.fromkeys(f for f, p, n in zip(files, planned if isinstance(planned, list) else [], now)
                                         if p != n))
            which = ", ".join(changed[:3]) or ", ".join(files[:3])
            raise ConfigError(f"dataset '{params.get('dataset')}': raw file(s) {which} changed since the job was "
                              f"planned (the key {spec.get('key')} holds the content planned); {again}")
    identities = params.get("model_identity") or {}
    for field, planned in identities.items():
        ref = params.get(field)
        if not isinstance(ref, str):
            continue
        found = model_identity(ref, cache, params.get("hub_revisions"))
        if found != planned:
            raise ConfigError(f"{field} '{ref}' is not the model the key {spec.get('key')} was made from (its "
                              f"files changed, or the spec points at another model); {again}")
