import json

import pytest

from augsbert.store.artifacts import ArtifactExistsError, artifact_dir, read_json, write_json

MINIMAL_SPEC = json.dumps({"stage": "data", "params": {"dataset": "x", "loader": "lee"}, "inputs": {}})  # what a lock test needs of a spec


def test_artifact_appears_only_when_complete(tmp_path):
    out = tmp_path / "artifacts" / "stage" / "k-0123456789"
    with artifact_dir(out, {"key": "k"}) as tmp:
        assert not out.exists() and tmp.name.startswith(".k-0123456789.partial-")
        write_json(tmp / "metrics.json", {"x": 1})
    assert read_json(out / "spec.json") == {"key": "k"}
    metrics = read_json(out / "metrics.json")
    assert metrics["x"] == 1 and metrics["wall_time_s"] >= 0
    assert [p.name for p in out.parent.iterdir()] == [out.name]


def test_failure_leaves_nothing_and_existing_artifact_is_kept(tmp_path):
    out = tmp_path / "a"
    with pytest.raises(RuntimeError):
        with artifact_dir(out, {}) as tmp:
            (tmp / "half.parquet").write_text("partial")
            raise RuntimeError("killed")
    assert [p.name for p in tmp_path.iterdir()] == [".locks"]  # its writer lock (empty), nothing else
    with artifact_dir(out, {"v": 1}):
        pass
    with pytest.raises(ArtifactExistsError, match="refusing to overwrite"):
        with artifact_dir(out, {"v": 2}):
            pass
    assert read_json(out / "spec.json") == {"v": 1}


def test_force_replaces_only_an_artifact_of_the_same_stage(tmp_path, monkeypatch):
    """Issue 26 case 1: `--force` emptied any folder (a user's files, `..`); now only a finished artifact of the
    same stage is replaced, and everything else is refused whatever the flags, its files left as they were."""
    from augsbert.face.cli import main

    mine = tmp_path / "my_files"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    other = tmp_path / "other"
    with artifact_dir(other, {"stage": "teacher", "key": "k"}):
        pass
    (tmp_path / "notes.txt").write_text("a file")
    for out, what in [(mine, "is not an artifact"), (other, "is an artifact of stage teacher"),
                      (tmp_path / "notes.txt", "is not an artifact"), (tmp_path, "is not an artifact")]:
        with pytest.raises(ArtifactExistsError, match=what + ".*even with --force"):
            with artifact_dir(out, {"stage": "data", "key": "k"}, force=True):
                pass
    assert (mine / "thesis.tex").read_text() == "years of work" and (tmp_path / "notes.txt").is_file()
    assert read_json(other / "spec.json")["stage"] == "teacher"
    # through the command line, as in the report: `--out .. --force` and `--out DIR --force`, exit 2, nothing lost
    work = tmp_path / "work" / "sub"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    spec = json.dumps({"stage": "data", "key": "k", "params": {}, "inputs": {}})
    for out in ("..", str(mine)):
        assert main(["-q", "data", "--spec", spec, "--out", out, "--force"]) == 2
    assert (mine / "thesis.tex").is_file() and work.is_dir()
    # the same stage's finished artifact: refused without --force, replaced with it
    with artifact_dir(other, {"stage": "teacher", "key": "k2"}, force=True):
        pass
    assert read_json(other / "spec.json")["key"] == "k2"


def test_write_json_is_strict(tmp_path):
    write_json(tmp_path / "m.json", {"spearman": float("nan"), "x": [float("inf"), 1.5]})
    assert json.loads((tmp_path / "m.json").read_text()) == {"spearman": None, "x": [None, 1.5]}


def test_partial_directories_of_killed_jobs_are_swept(tmp_path):
    out = tmp_path / "k-0123456789"
    stale = tmp_path / ".k-0123456789.partial-99999"
    stale.mkdir()
    (stale / "half.bin").write_text("x")
    with artifact_dir(out, {}):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == [".locks", "k-0123456789"]


# --- one writer per artifact -------------------------------------------------------------------------------------

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import augsbert
from augsbert.store.artifacts import ArtifactLockedError, lock_path, stage_sidecar, writer_lock
from augsbert.face.cli import EXIT_LOCKED, main

# A first writer in its own process: starts an artifact (partial directory, resume state), says where, and works
# on until killed, or until it reads a line on stdin, then completes the artifact.
FIRST_WRITER = """
import sys
from augsbert.store.artifacts import artifact_dir, stage_sidecar
out = sys.argv[1]
with artifact_dir(out, {"writer": "first"}) as tmp:
    (tmp / "half.bin").write_text("first writer's work")
    state = stage_sidecar(out, "checkpoints")
    state.mkdir(parents=True)
    (state / "checkpoint-8").write_text("resume state")
    print(tmp, flush=True)
    sys.stdin.readline()
"""


def start_first_writer(out: Path) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "PYTHONPATH": str(Path(augsbert.__file__).parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", FIRST_WRITER, str(out)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline().strip()
    assert line, "the first writer died before it started its artifact"
    return proc, Path(line)


def test_second_writer_stops_naming_the_live_one_and_leaves_its_files(tmp_path, capsys):
    out = tmp_path / "artifacts" / "teacher" / "k-0123456789"
    first, partial = start_first_writer(out)
    try:
        # the CLI, as a rerun of the job would start it: it stops before reading its (here empty) spec
        assert main(["-q", "prepare-data", "--spec", MINIMAL_SPEC, "--out", str(out)]) == EXIT_LOCKED
        err = capsys.readouterr().err
        assert f"{out} is being written by pid {first.pid} on host {socket.gethostname()}, since " in err
        assert f"(`kill {first.pid}`)" in err and str(lock_path(out)) in err
        with pytest.raises(ArtifactLockedError, match=f"pid {first.pid} "):  # the library entry point too
            with artifact_dir(out, {}):
                pass
        assert (partial / "half.bin").read_text() == "first writer's work"
        assert (stage_sidecar(out, "checkpoints") / "checkpoint-8").read_text() == "resume state"
        assert not out.exists()
    finally:
        first.kill()  # SIGKILL: the kernel drops its lock; its partial directory stays behind
        first.wait()
    assert partial.is_dir()
    with artifact_dir(out, {"writer": "second"}):
        pass
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # the dead writer's partial directory was swept
    assert read_json(out / "spec.json") == {"writer": "second"}


def test_waiting_writer_proceeds_once_the_first_finishes(tmp_path, caplog):
    out = tmp_path / "teacher" / "k-0123456789"
    first, _ = start_first_writer(out)
    try:
        start = time.monotonic()
        with pytest.raises(ArtifactLockedError, match=f"pid {first.pid} "):
            with writer_lock(out, wait=0.5):
                pass
        assert time.monotonic() - start >= 0.5
        threading.Timer(0.5, lambda: (first.stdin.write("finish\n"), first.stdin.flush())).start()
        with caplog.at_level("INFO", logger="augsbert.store.artifacts"), writer_lock(out, wait=60):
            assert first.wait(timeout=10) == 0 and read_json(out / "spec.json") == {"writer": "first"}
        assert f"is being written by pid {first.pid} " in caplog.text and "waiting up to 60 s" in caplog.text
    finally:
        first.kill()
        first.wait()
    with pytest.raises(ArtifactExistsError):  # what the waiting job was to write is there now
        with artifact_dir(out, {}):
            pass


def test_writer_lock_is_reentrant_and_released_on_exit(tmp_path):
    out = tmp_path / "results" / "x.json"
    with writer_lock(out):
        with writer_lock(out):  # artifact_dir inside the CLI's lock
            pass
        probe = subprocess.run([sys.executable, "-c", "import sys; from augsbert.store.artifacts import writer_lock\n"
                                "with writer_lock(sys.argv[1]): pass", str(out)], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(augsbert.__file__).parents[1])})
        assert probe.returncode != 0 and f"pid {os.getpid()} on host" in probe.stderr  # still held after the inner exit
    with writer_lock(out):  # released: taken again at once
        pass


def test_partial_files_of_killed_json_writes_are_swept_by_the_next_writer(tmp_path):
    out = tmp_path / "results" / "x.json"
    out.parent.mkdir()
    (out.parent / ".x.json.partial-99999").write_text('{"half": ')  # write_json killed before its rename
    (out.parent / ".y.json.partial-99999").write_text("another file's")  # not x.json's: kept
    with writer_lock(out):
        write_json(out, {"x": 1})
    assert sorted(p.name for p in out.parent.iterdir()) == [".locks", ".y.json.partial-99999", "x.json"]


def test_resume_state_is_kept_after_a_failure_and_removed_with_success(tmp_path):
    out = tmp_path / "artifacts" / "teacher" / "k-0123456789"
    work = stage_sidecar(out, "checkpoints")
    (work / "trainer").mkdir(parents=True)
    with pytest.raises(RuntimeError):
        with artifact_dir(out, {}, checkpoints=work):
            raise RuntimeError("preempted")
    assert (work / "trainer").is_dir()  # the rerun resumes from it
    with artifact_dir(out, {}, checkpoints=work):
        pass
    assert not (tmp_path / "artifacts" / ".checkpoints").exists()  # with its emptied <stage>/ folder

def test_read_only_full_or_forbidden_output_names_the_path(tmp_path, monkeypatch):
    import errno
    import os

    from augsbert.store.artifacts import OutputWriteError

    real_mkdir = os.mkdir

    (tmp_path / "ro").mkdir()  # a directory on a read-only mount: nothing can be created below it

    def read_only_mkdir(path, *args, **kwargs):
        if str(path).startswith(str(tmp_path / "ro") + "/"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", read_only_mkdir)
    out = tmp_path / "ro" / "artifacts" / "data" / "k-0123456789"
    with pytest.raises(OutputWriteError) as err:
        with artifact_dir(out, {}):
            raise AssertionError("the stage must not start")
    # (the first thing created is the writer lock's folder, beside the stage folder)
    assert str(err.value) == f"cannot write {out}: Read-only file system ({out.parent.parent / '.locks' / 'data'})"
    monkeypatch.setattr(os, "mkdir", real_mkdir)

    def full(self, *args, **kwargs):  # a failing write() carries no file name
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "full" / "k-0123456789"
    with pytest.raises(OutputWriteError) as err:
        with artifact_dir(out, {}) as tmp:
            monkeypatch.setattr(type(tmp), "write_text", full)
            write_json(tmp / "metrics.json", {})
    assert str(err.value) == f"cannot write {out}: No space left on device ({out / 'metrics.json'})"
    monkeypatch.undo()
    assert [p.name for p in (tmp_path / "full").iterdir()] == [".locks"]  # the partial directory is gone

    # a permission error elsewhere (an input, a model) is not an output problem: it keeps its traceback
    with pytest.raises(PermissionError):
        with artifact_dir(tmp_path / "ok" / "k-0123456789", {}):
            raise PermissionError(errno.EACCES, "Permission denied", "/somewhere/else/model.bin")


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
                    reason="root writes into read-only directories (the test above simulates it)")
def test_read_only_directory_for_real(tmp_path):
    from augsbert.store.artifacts import OutputWriteError

    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(OutputWriteError, match=f"cannot write {ro / 'k-0123456789'}: Permission denied"):
            with artifact_dir(ro / "k-0123456789", {}):
                pass
    finally:
        ro.chmod(0o755)


def test_a_damaged_json_file_is_named(tmp_path, capsys):
    """Issue 26 case 5: a truncated metrics.json raised a bare JSONDecodeError without the file's name."""
    from augsbert.store.artifacts import DamagedArtifactError
    from augsbert.face.cli import main

    path = tmp_path / "metrics.json"
    path.write_text('{"test": {"spear')
    with pytest.raises(DamagedArtifactError, match=f"{path}: not valid JSON .* the file is damaged"):
        read_json(path)
    # where a command reads it: one message and exit code 2
    spec = {"experiment": "x", "config": {}, "dataset": {}, "config_hash": "0", "seeds": [42],
            "runs": {"42": {"zero_shot": {"key": "k", "stage": "zero_shot", "path": str(tmp_path)}}}}
    code = main(["collect-results", "--spec", json.dumps(spec), "--out", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and f"{path}: not valid JSON" in err and "Traceback" not in err


def test_every_artifact_ends_with_a_manifest_that_finds_damage(tmp_path, monkeypatch):
    """Issue 26 case 4: a file deleted from an artifact, or cut short, went unnoticed until a stage read it."""
    import augsbert.store.manifests as manifests
    from augsbert.store.manifests import MANIFEST, problems

    out = tmp_path / "teacher" / "k-0123456789"
    with artifact_dir(out, {"stage": "teacher"}) as tmp:
        (tmp / "model").mkdir()
        (tmp / "model" / "weights.bin").write_bytes(bytes(range(256)) * 40)
        (tmp / "predictions.parquet").write_bytes(b"PAR1" + b"x" * 100)
        write_json(tmp / "metrics.json", {"x": 1})
    manifest = read_json(out / MANIFEST)
    assert set(manifest["files"]) == {"spec.json", "metrics.json", "model/weights.bin", "predictions.parquet"}
    assert manifest["files"]["model/weights.bin"]["size"] == 10240
    assert manifest["files"]["model/weights.bin"]["digest"].startswith("sha256:")
    assert problems(out) == []
    weights = out / "model" / "weights.bin"
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + b"\x00")  # same size, one byte changed
    assert problems(out) == ["model/weights.bin changed since it was written (same size, other content)"]
    weights.write_bytes(original[:100])
    assert problems(out) == ["model/weights.bin has 100 bytes, 10240 when written"]
    weights.write_bytes(original)
    (out / "predictions.parquet").unlink()
    assert problems(out) == ["predictions.parquet is missing"]
    # an artifact written by an earlier version, whose manifest stood for large files by their edges, is still
    # checked the way it was written
    big = tmp_path / "big"
    with artifact_dir(big, {"stage": "labels"}) as tmp:
        (tmp / "pairs.parquet").write_bytes(bytes(range(256)) * 20)
    manifest = read_json(big / MANIFEST)
    entry = manifest["files"]["pairs.parquet"]
    monkeypatch.setattr(manifests, "EDGE_BYTES", 100)  # (1 MiB then, over files of more than 64 MiB)
    entry["digest"] = manifests.file_digest(big / "pairs.parquet", entry["size"], edges=True)
    assert entry["digest"].startswith("edges-sha256:")
    write_json(big / MANIFEST, manifest)
    assert problems(big) == []
    # an artifact written before manifests existed is accepted as it is (it holds spec.json and metrics.json, as
    # every artifact ever written; one holding spec.json alone is incomplete: issue 64 V1)
    old = tmp_path / "old"
    old.mkdir()
    write_json(old / "spec.json", {"stage": "data"})
    write_json(old / "metrics.json", {"wall_time_s": 1.0})
    assert problems(old) == []
    # a deleted manifest.json is told from one never written: metrics.json says the artifact had one
    (out / MANIFEST).unlink()
    assert read_json(out / "metrics.json")["manifest"] is True
    assert problems(out) == ["manifest.json is missing"]


LARGE = 90 << 20  # the size of the probe's model.safetensors (over the former 64 MiB edge-hashing limit)


def test_byte_flips_inside_a_large_file_are_found_with_size_and_mtime_kept(tmp_path, capsys, monkeypatch):
    """Issue 41: a weight tensor corrupted inside a 90 MB model.safetensors (size and mtime kept) passed `verify`:
    files over 64 MiB were hashed on their first and last MiB. Every byte is hashed now: each flip, at the start,
    just past the first MiB, in the middle, just before the last MiB and at the end, is found."""
    import os
    import re

    import augsbert.face.cli as cli
    from augsbert.face.cli import main

    root = tmp_path / "artifacts"
    out = root / "student" / "s-0123456789"
    with artifact_dir(out, {"stage": "student", "key": out.name}) as tmp:
        (tmp / "model").mkdir()
        with open(tmp / "model" / "model.safetensors", "wb") as handle:
            handle.truncate(LARGE)  # zeros, written sparse: cheap to make, read in full by the hash
    weights = out / "model" / "model.safetensors"
    stamp = weights.stat()
    for offset in (0, (1 << 20) + 1, LARGE // 2, LARGE - (1 << 20) - 2, LARGE - 1):
        with open(weights, "r+b") as handle:
            handle.seek(offset)
            handle.write(b"\x01")
        os.utime(weights, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        assert weights.stat().st_size == stamp.st_size and weights.stat().st_mtime_ns == stamp.st_mtime_ns
        capsys.readouterr()
        assert main(["verify", "--artifacts", str(root)]) == 1, offset
        assert (f"{out}: model/model.safetensors changed since it was written (same size, other content)"
                in capsys.readouterr().out), offset
        with open(weights, "r+b") as handle:
            handle.seek(offset)
            handle.write(b"\x00")
        os.utime(weights, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    capsys.readouterr()
    assert main(["verify", "--artifacts", str(root)]) == 0
    assert "hashing" not in capsys.readouterr().err  # under 1 GB: nothing to announce
    monkeypatch.setattr("augsbert.store.verify.LARGE_VERIFY", 1 << 20)  # over it, verify says what it will cost and what it took
    assert main(["verify", "--artifacts", str(root)]) == 0
    out, err = capsys.readouterr()
    assert err == "hashing 0.1 GB in 1 artifact(s) in full: about 1 s at 0.5 GB/s\n"
    assert re.fullmatch(rf"1 artifact\(s\) checked under {root}, 0 damaged \(0\.1 GB hashed in \d+\.\d s\)\n", out), out


def test_verify_repair_deletes_only_real_artifacts(tmp_path, capsys):
    """Issue 41: `verify --artifacts <any folder> --repair` deleted every folder two levels down holding a
    manifest.json (a web app's, a browser extension's). Only a real artifact is deleted now: in a stage folder of
    the artifacts root, named like a key, with a spec.json whose stage and key are those of its place (or, having
    lost it, a manifest of ours listing it); a missing root or a folder without artifacts is an error."""
    import shutil

    from augsbert.face.cli import main

    home = tmp_path / "home"
    webapp = home / "site" / "app"  # a web app's manifest.json, two levels down
    webapp.mkdir(parents=True)
    (webapp / "manifest.json").write_text('{"name": "app", "icons": []}')
    (webapp / "index.html").write_text("<html></html>")
    extension = home / "teacher" / "ext-0123456789"  # a stage's name and a key's shape, but not ours
    extension.mkdir(parents=True)
    (extension / "manifest.json").write_text('{"manifest_version": 3, "files": ["a.js"]}')
    (extension / "a.js").write_text("x")
    def foreign_files() -> dict[str, str]:
        return {str(p): p.read_text() for folder in (webapp, extension) for p in folder.rglob("*")}

    foreign = foreign_files()
    capsys.readouterr()
    # no artifact at all: an error, nothing touched
    assert main(["verify", "--artifacts", str(home), "--repair"]) == 2
    assert "no artifact in it" in capsys.readouterr().err
    assert main(["verify", "--artifacts", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
    # beside real artifacts: the foreign folders are left alone; a damaged real one is deleted
    data = home / "data" / "lee-0123456789"
    with artifact_dir(data, {"stage": "data", "key": data.name}) as tmp:
        (tmp / "dev.parquet").write_bytes(b"x" * 10)
    zs = home / "zero_shot" / "z-0123456789"
    with artifact_dir(zs, {"stage": "zero_shot", "key": zs.name}):
        pass
    (data / "dev.parquet").write_bytes(b"y" * 10)
    (zs / "spec.json").unlink()  # lost its spec.json: its own manifest lists it
    moved = home / "student" / "lee-0123456789"  # an artifact of another stage and key, copied in by hand
    shutil.copytree(data, moved)
    (moved / "metrics.json").write_text("{}")
    code = main(["verify", "--artifacts", str(home), "--repair"])
    out = capsys.readouterr().out
    assert code == 1, out  # one damaged folder it may not delete
    assert not data.exists() and not zs.exists() and moved.is_dir()
    assert f"{moved}: its spec.json says it holds" not in out  # same key name: the stage differs
    assert "not moved: its spec.json names stage 'data' and key 'lee-0123456789', not 'student'" in out, out
    assert f"2 moved to {home}/.quarantine/" in out and "folder(s) under" in out and "left alone" in out
    assert foreign_files() == foreign and len(foreign) == 4


def test_a_stage_refuses_a_damaged_input_and_verify_repairs(tmp_path, capsys, monkeypatch):
    """Every file of a real data artifact, deleted or cut short in turn, stops the next stage before it reads
    anything, naming the input and the file; `augsbert verify --repair` deletes exactly the damaged artifacts."""
    import shutil

    from augsbert.face.cli import main
    from augsbert.store.manifests import MANIFEST

    root = tmp_path / "artifacts"
    config = str(Path(__file__).parents[1] / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)  # the planned path, artifacts/data/<key>
    assert main(["-q", "data", "--config", config, "--experiment", "demo_zeroshot"]) == 0
    data = next(p for p in (root / "data").iterdir() if not p.name.startswith("."))
    spec = json.dumps({"stage": "zero_shot", "key": "z", "inputs": {"data": str(data)},
                       "params": {"model": "no-such-model", "batch_size": 8, "max_length": 32}})
    pristine = tmp_path / "pristine"
    shutil.copytree(data, pristine)
    names = sorted(p.relative_to(data).as_posix() for p in data.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert {"train.parquet", "dev.parquet", "test.parquet", "spec.json", "metrics.json"} <= set(names)
    for name in names:
        for damage, expected in (("delete", f"{name} is missing"), ("truncate", f"{name} has 0 bytes")):
            if damage == "delete":
                (data / name).unlink()
            else:
                (data / name).write_bytes(b"")
            capsys.readouterr()
            assert main(["-q", "zero-shot", "--spec", spec, "--out", str(tmp_path / "zs"), "--device", "cpu"]) == 2
            err = capsys.readouterr().err
            assert f"input `data` {data} is damaged: {expected}" in err and "augsbert verify --repair" in err, err
            shutil.copy2(pristine / name, data / name)
    # verify: one damaged artifact among intact ones, a folder of your own files left alone
    intact = root / "zero_shot" / "z-0123456789"
    with artifact_dir(intact, {"stage": "zero_shot"}):
        pass
    (root / "notes").mkdir()
    (root / "notes" / "mine.txt").write_text("x")
    (data / "dev.parquet").unlink()
    capsys.readouterr()
    assert main(["verify", "--artifacts", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{data}: dev.parquet is missing" in out and "2 artifact(s) checked" in out and "1 damaged" in out
    assert data.is_dir()  # only reported without --repair
    assert main(["verify", "--artifacts", str(root), "--repair"]) == 0
    assert not data.exists() and intact.is_dir() and (root / "notes" / "mine.txt").is_file()
    assert [p.parent.name for p in (root / ".quarantine" / "data").iterdir()] == ["data"]  # moved aside
    # the moved folder is named as a target of the next run (Snakemake skips a missing intermediate)
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"snakemake <options> <targets> {data}")
    # an artifact that lost its spec.json is still checked (its manifest lists the file)
    (intact / "spec.json").unlink()
    assert main(["verify", "--artifacts", str(root)]) == 1
    assert f"{intact}: spec.json is missing" in capsys.readouterr().out
    shutil.rmtree(intact)
    assert main(["verify", "--artifacts", str(root)]) == 2  # "0 checked" is an error (issue 41), not a pass


def test_locks_and_resume_state_stay_in_the_folder_the_output_goes_to(tmp_path):
    """Issue 26 case 7: the lock of `--out DIR` was `DIR/../../.locks/...`: `/.locks/` for an absolute `--out` two
    levels below the file system root, and above the folder named for any other `--out`. Now the artifacts folder
    of the workflow's layout holds its locks and checkpoints; any other output has them beside it. Seen failing
    before: `/.locks/data/lee-0123456789.lock`, and `.locks` written to tmp_path itself."""
    from augsbert.store.artifacts import lock_path, stage_sidecar

    assert lock_path("artifacts/teacher/k-0123456789") == Path("artifacts/.locks/teacher/k-0123456789.lock")
    assert stage_sidecar("/p/artifacts/teacher/k", "checkpoints") == Path("/p/artifacts/.checkpoints/teacher/k")
    assert lock_path("/data/lee-0123456789") == Path("/data/.locks/lee-0123456789.lock")
    assert stage_sidecar("/data/lee-0123456789", "checkpoints") == Path("/data/.checkpoints/lee-0123456789")
    assert lock_path("results/tables/g.md") == Path("results/tables/.locks/g.md.lock")
    # a real write two levels below a folder: nothing is created above the folder the output goes to
    top = tmp_path / "top"
    out = top / "mine" / "model"
    work = stage_sidecar(out, "checkpoints")
    (work / "trainer").mkdir(parents=True)
    with artifact_dir(out, {}, checkpoints=work):
        pass
    assert [p.name for p in tmp_path.iterdir()] == ["top"] and [p.name for p in top.iterdir()] == ["mine"]
    assert sorted(p.name for p in (top / "mine").iterdir()) == [".locks", "model"]  # checkpoints removed
    assert (top / "mine" / ".locks" / "model.lock").is_file()
    # `--out ..` (refused: not an artifact) creates no lock anywhere
    (tmp_path / "work").mkdir()
    with pytest.raises(ArtifactExistsError):
        with artifact_dir(tmp_path / "work" / "..", {"stage": "data"}, force=True):
            pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["top", "work"]


def test_out_must_be_named_after_the_specs_content_key(tmp_path, monkeypatch, capsys):
    """Issue 26 case 7: a spec was computed into any `--out` folder, under a name that says another content.
    Seen failing before: exit 0, the data artifact written to `elsewhere`."""
    from augsbert.face.cli import main
    from augsbert.config.load import load_config
    from augsbert.plan import Plan

    monkeypatch.chdir(tmp_path)
    config = Path(__file__).parents[1] / "config" / "config.yaml"
    plan = Plan(load_config(config, lazy=True))
    key = plan.experiment("demo_zeroshot").runs[42]["data"]
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(plan.spec(key)))
    capsys.readouterr()
    for out in (tmp_path / "elsewhere", tmp_path / "artifacts" / "data" / "lee-0123456789"):
        assert main(["-q", "data", "--spec", f"@{spec}", "--out", str(out)]) == 2
        assert capsys.readouterr().err == (
            f"augsbert data: error: --out {out}: the spec's key is {key}, so the folder must be named after it "
            f"(artifacts/data/{key}, as the workflow writes it); refusing to run\n")
    # refused before anything was written: no output, partial folder or lock (the planning's digest cache aside)
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "artifacts" / "data").exists()
    assert not list(tmp_path.rglob("*.lock")) and not list(tmp_path.rglob("*partial*"))
    out = tmp_path / "artifacts" / "data" / key
    assert main(["-q", "data", "--spec", f"@{spec}", "--out", str(out)]) == 0
    assert read_json(out / "spec.json")["key"] == key


def test_a_write_cut_short_by_a_full_disk_leaves_no_partial_file_and_names_the_file(tmp_path, monkeypatch):
    """Issue 26 case 7: disk full left `.<name>.partial-<pid>` behind, and the OSError of a failing write()
    names no file. Seen failing before: the partial file stayed, and the message was only `[Errno 28] No space
    left on device`."""
    import errno
    import os
    import pathlib

    from augsbert.store.artifacts import OutputWriteError, write_text, writing
    from augsbert.store.fingerprints import DigestCache

    real = pathlib.Path.write_text

    def half_then_full(self, text, *args, **kwargs):  # the file is created, part of it written, then ENOSPC
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "results" / "x.json"
    out.parent.mkdir()
    out.write_text('{"old": "results"}')
    monkeypatch.setattr(pathlib.Path, "write_text", half_then_full)
    with pytest.raises(OSError) as err:
        write_text(out, '{"new": "results"}')
    assert str(err.value) == f"[Errno 28] No space left on device: '{out}'"
    with pytest.raises(OutputWriteError) as err:  # as a command reports it
        with writing(out):
            write_json(out, {"new": "results"})
    assert str(err.value) == f"cannot write {out}: No space left on device"
    from augsbert.planning.graph import write_spec

    with pytest.raises(OSError):  # a planned job's spec (artifacts/.specs/...)
        write_spec(tmp_path / "cache" / "x.json", "{}")
    cache = DigestCache(tmp_path / "cache" / "file-digests.json")
    cache.entries, cache.dirty = {"/a": [1, 2, 3, 4, "digest"]}, True
    cache.save()  # a planning step: a cache it cannot write only costs a re-hash next time
    monkeypatch.undo()
    assert sorted(p.name for p in out.parent.iterdir()) == ["x.json"]  # no partial file left
    assert out.read_text() == '{"old": "results"}'  # and nothing already produced is lost
    assert [p.name for p in (tmp_path / "cache").iterdir()] == []


def test_s5_repair_moves_a_damaged_artifact_aside_and_names_the_files_augsbert_did_not_write(tmp_path, capsys,
                                                                                            monkeypatch):
    """Issue 56 S5: `verify --repair` deleted an artifact holding a user's notes.txt, with the file, without naming
    it. Now each damaged artifact is moved whole into artifacts/.quarantine/<stage>/<key>-<time>/, the message
    names that folder and every file in it that augsbert did not write (hidden ones too), and says how to empty
    it; nothing is deleted, and the quarantine is no artifact to verify or to a second repair."""
    import re

    from augsbert.face.cli import main

    monkeypatch.chdir(tmp_path)
    root = Path("artifacts")
    student = root / "student" / "lee.be-0123456789"
    with artifact_dir(student, {"stage": "student", "key": student.name}) as tmp:
        (tmp / "model").mkdir()
        (tmp / "model" / "weights.bin").write_bytes(b"w" * 64)
    (student / "notes.txt").write_text("lr 2e-5 looked best\n")  # the user's own file: the artifact is damaged
    (student / "model" / ".notes.swp").write_text("x")
    teacher = root / "teacher" / "lee.ce-0123456789"
    with artifact_dir(teacher, {"stage": "teacher", "key": teacher.name}) as tmp:
        (tmp / "w.bin").write_bytes(b"t" * 8)
    (teacher / "w.bin").write_bytes(b"T" * 8)  # damaged, nothing of the user's in it
    before = {p.relative_to(student).as_posix(): p.read_bytes() for p in student.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["verify", "--repair"]) == 0
    out = capsys.readouterr().out
    quarantined = sorted((root / ".quarantine").glob("*/*"))
    assert [p.parent.name for p in quarantined] == ["student", "teacher"]
    place = quarantined[0]
    assert re.fullmatch(r"lee\.be-0123456789-\d{8}T\d{6}", place.name), place
    assert {p.relative_to(place).as_posix(): p.read_bytes() for p in place.rglob("*") if p.is_file()} == before
    assert not student.exists() and not teacher.exists()
    assert (f"{student}: notes.txt is not in its manifest.json (added after the artifact was written)\n"
            f"  moved to {place}; 2 file(s) in it augsbert did not write: model/.notes.swp, notes.txt\n") in out, out
    assert f"  moved to {quarantined[1]}\n" in out  # nothing of yours in it: no list
    assert ("2 artifact(s) checked under artifacts, 2 damaged, 2 moved to artifacts/.quarantine/\n"
            "artifacts/.quarantine/ keeps what was moved (nothing reads it); take out what you need, then empty it: "
            "rm -r artifacts/.quarantine\n") in out, out
    assert out.splitlines()[-1] == f"rebuild them and what depends on them: add them to the targets of your next " \
                                   f"run, snakemake <options> <targets> {student} {teacher}"
    # the quarantine is no artifact: a second verify sees none (an error: no artifact in the folder), a third
    # repair of a new damage of the same key goes beside the first
    assert main(["verify"]) == 2
    with artifact_dir(student, {"stage": "student", "key": student.name}):
        pass
    (student / "metrics.json").write_text("{}")
    monkeypatch.setattr("time.strftime", lambda *_: place.name.rsplit("-", 1)[1])  # the same second
    capsys.readouterr()
    assert main(["verify", "--repair"]) == 0
    assert sorted(p.name for p in place.parent.iterdir()) == [place.name, place.name + "-2"]


@pytest.mark.workflow
def test_v1_a_folder_in_an_artifacts_place_holding_nothing_is_named_moved_and_rebuilt(tmp_path, monkeypatch, capsys):
    """Issue 64 V1: a folder named after a real key holding nothing (or only spec.json): `verify` said "0 damaged",
    Snakemake took it for built ("Nothing to be done") and `export` pointed at a command that did nothing. Now
    verify names it incomplete, `--repair` moves it aside, the workflow plans it again, and export says so."""
    from augsbert.config.load import load_config
    from augsbert.face.cli import main
    from augsbert.export.export import ExportError, _finished
    from augsbert.plan import Plan
    from workflow_helpers import checkout, keep_experiments, planned

    workdir = checkout(tmp_path / "project")
    keep_experiments(workdir, "demo_zeroshot")
    monkeypatch.chdir(workdir)
    plan = Plan(load_config("config/config.yaml"))
    folder = Path(plan.node(plan.experiment("demo_zeroshot").runs[42]["data"]).path)
    folder.mkdir(parents=True)
    target = "results/demo_zeroshot.json"
    assert "data" not in planned(workdir, target)  # Snakemake sees only the folder: built, for all it knows
    finished = "(a finished one holds spec.json, metrics.json and manifest.json)"
    capsys.readouterr()
    assert main(["verify"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{folder}: incomplete, not a finished artifact: it is empty {finished}", out
    assert out[1] == "1 artifact(s) checked under artifacts, 1 damaged", out
    with pytest.raises(ExportError) as err:
        _finished({"path": str(folder)})
    assert str(err.value) == (f"{folder} is incomplete, not a finished artifact: it is empty {finished}; move it aside "
                              f"with `augsbert verify --repair`, then build it (`augsbert run <your config> {folder}`)")
    write_json(folder / "spec.json", {"stage": "data", "key": folder.name})  # only its spec.json
    assert main(["verify"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{folder}: incomplete, not a finished artifact: it holds only spec.json, no metrics.json and no "
        f"manifest.json {finished}")
    assert main(["verify", "--repair"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith(f"  moved to artifacts/.quarantine/data/{folder.name}-") and not folder.exists(), out
    assert out[-1].endswith(f"snakemake <options> <targets> {folder}"), out
    assert planned(workdir, target)["data"] == 1  # rebuilt by the next run
    # an empty folder of a stage's name that is no key, or a folder of your own files, is no artifact
    (workdir / "artifacts" / "data" / "mine").mkdir()
    assert main(["verify"]) == 2  # no artifact left under artifacts/: an error, as before
