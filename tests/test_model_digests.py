"""A job re-checks its local models against its key without re-reading an unchanged model folder (issue 54):
the folder's digest is kept per state of its files in the artifacts folder's .cache/ (ModelDigests)."""

from __future__ import annotations

import builtins
import io
import json
import os
from pathlib import Path

import pytest

from augsbert.errors import ConfigError
from augsbert.jobs.job_inputs import recheck
from augsbert.store import fingerprints
from augsbert.store.fingerprints import MODEL_FILE_SUFFIXES, DigestCache, ModelDigests, model_identity

KEY = "demo_cbe-0123456789"


def _model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "modules.json").write_text("[]")
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    (folder / "model.safetensors").write_bytes(os.urandom(1 << 16))
    (folder / "notes.md").write_text("not hashed: no model file suffix")
    return folder


@pytest.fixture
def reads(monkeypatch):
    """The files opened for reading, by path (builtins.open and io.open)."""
    opened: list[str] = []
    real = builtins.open

    def counting(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and "r" in mode:
            opened.append(str(Path(file).resolve()))
        return real(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting)
    monkeypatch.setattr(io, "open", counting)
    return opened


def _spec(model: Path) -> dict:
    identity = model_identity(str(model), DigestCache(fresh=True))
    return {"stage": "teacher", "key": KEY, "params": {"model": str(model), "model_identity": {"model": identity}}}


def _read(reads: list[str], model: Path) -> list[str]:
    found = sorted(Path(p).name for p in reads if Path(p).parent == model.resolve())
    reads.clear()
    return found


def test_a_second_job_does_not_re_read_an_unchanged_model_and_a_changed_file_is_hashed_again(
        tmp_path, monkeypatch, reads):
    monkeypatch.setattr(fingerprints, "RACY_SECONDS", 0.0)  # the files were written just now (see the next test)
    model = _model(tmp_path / "models" / "big")
    artifacts = tmp_path / "project" / "artifacts"
    out = artifacts / "teacher" / KEY
    planning = DigestCache(artifacts / ".cache" / "file-digests.json")
    monkeypatch.chdir(tmp_path)
    spec = _spec(model)
    covered = ["config.json", "model.safetensors", "modules.json", "vocab.txt"]
    reads.clear()

    recheck(spec, planning, out)
    assert _read(reads, model) == covered
    cache = artifacts / ".cache" / fingerprints.MODEL_CACHE_NAME
    entry = json.loads(cache.read_text())[f"{model.resolve()}\0{','.join(MODEL_FILE_SUFFIXES)}"]
    assert entry["digest"] == spec["params"]["model_identity"]["model"].removeprefix("sha256:")
    assert sorted(entry["files"]) == covered
    recheck(spec, planning, out)  # the next job: the stamps are those hashed, nothing is read
    recheck(spec, planning, out)
    assert _read(reads, model) == []

    # the weights rewritten in place, same size, modification time set back: the change time shows it
    weights = model / "model.safetensors"
    before = weights.stat()
    weights.write_bytes(os.urandom(1 << 16))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(ConfigError, match=r"model '.*big' is not the model the key demo_cbe-0123456789 was made"):
        recheck(spec, planning, out)
    assert _read(reads, model) == covered
    spec = _spec(model)  # planned again (the test hashes the folder for the new key's identity)
    reads.clear()
    recheck(spec, planning, out)  # the job kept the digest it found while refusing: nothing is read
    assert _read(reads, model) == []
    (model / "tokenizer.json").write_text("{}")  # a file added
    with pytest.raises(ConfigError, match="is not the model the key"):
        recheck(spec, planning, out)
    assert _read(reads, model) == sorted([*covered, "tokenizer.json"])
    (model / "tokenizer.json").unlink()  # and removed again: the first digest, hashed again once
    recheck(spec, planning, out)
    assert _read(reads, model) == covered
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models", "project"]  # nothing kept outside artifacts/


def test_a_folder_changed_close_to_its_hash_is_hashed_again_once(tmp_path, monkeypatch, reads):
    """A write in the clock tick of the hash could keep every stamp: an entry whose files changed within
    RACY_SECONDS of its hash is not trusted; the next hash, later, is."""
    model = _model(tmp_path / "m")
    cache = tmp_path / "artifacts" / ".cache" / fingerprints.MODEL_CACHE_NAME

    def job() -> str:  # each job its own ModelDigests, as recheck makes one
        digests = ModelDigests(cache)
        try:
            return digests.tree(model, MODEL_FILE_SUFFIXES)
        finally:
            digests.save()

    reads.clear()
    first = job()
    assert len(_read(reads, model)) == 4 and job() == first
    assert len(_read(reads, model)) == 4  # written just now: hashed again
    clock = fingerprints.time.time_ns
    monkeypatch.setattr(fingerprints.time, "time_ns", lambda: clock() + 3 * 10**9)  # hashed 3 s after the writes
    assert job() == first and len(_read(reads, model)) == 4
    assert job() == first and _read(reads, model) == []
    assert first == DigestCache(fresh=True).tree(model, MODEL_FILE_SUFFIXES)


def test_a_job_outside_an_artifacts_folder_keeps_no_digest(tmp_path, monkeypatch, reads):
    """`--out` not of the shape <artifacts>/<stage>/<key>: nothing is written beside it, every check hashes."""
    monkeypatch.setattr(fingerprints, "RACY_SECONDS", 0.0)
    model = _model(tmp_path / "m")
    spec = _spec(model)
    monkeypatch.chdir(tmp_path)
    reads.clear()
    for _ in range(2):
        recheck(spec, DigestCache(tmp_path / "planning.json"), tmp_path / "mine" / KEY)
        assert len(_read(reads, model)) == 4
    assert not list(tmp_path.rglob(fingerprints.MODEL_CACHE_NAME))
