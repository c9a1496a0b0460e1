import json

import pytest

from augsbert.artifacts import ArtifactExistsError, artifact_dir, read_json, write_json


def test_artifact_appears_only_when_complete(tmp_path):
    out = tmp_path / "stage" / "k-0123456789"
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
    assert list(tmp_path.iterdir()) == []
    with artifact_dir(out, {"v": 1}):
        pass
    with pytest.raises(ArtifactExistsError, match="refusing to overwrite"):
        with artifact_dir(out, {"v": 2}):
            pass
    assert read_json(out / "spec.json") == {"v": 1}


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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k-0123456789"]


def test_read_only_full_or_forbidden_output_names_the_path(tmp_path, monkeypatch):
    import errno
    import os

    from augsbert.artifacts import OutputWriteError

    real_mkdir = os.mkdir

    (tmp_path / "ro").mkdir()  # a directory on a read-only mount: nothing can be created below it

    def read_only_mkdir(path, *args, **kwargs):
        if str(path).startswith(str(tmp_path / "ro") + "/"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", read_only_mkdir)
    out = tmp_path / "ro" / "data" / "k-0123456789"
    with pytest.raises(OutputWriteError) as err:
        with artifact_dir(out, {}):
            raise AssertionError("the stage must not start")
    assert str(err.value) == f"cannot write {out}: Read-only file system ({out.parent})"
    monkeypatch.setattr(os, "mkdir", real_mkdir)

    def full(self, *args, **kwargs):  # a failing write() carries no file name
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "full" / "k-0123456789"
    with pytest.raises(OutputWriteError) as err:
        with artifact_dir(out, {}) as tmp:
            monkeypatch.setattr(type(tmp), "write_text", full)
            write_json(tmp / "metrics.json", {})
    assert str(err.value) == f"cannot write {out}: No space left on device"
    monkeypatch.undo()
    assert list((tmp_path / "full").iterdir()) == []  # the partial directory is gone

    # a permission error elsewhere (an input, a model) is not an output problem: it keeps its traceback
    with pytest.raises(PermissionError):
        with artifact_dir(tmp_path / "ok" / "k-0123456789", {}):
            raise PermissionError(errno.EACCES, "Permission denied", "/somewhere/else/model.bin")


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
                    reason="root writes into read-only directories (the test above simulates it)")
def test_read_only_directory_for_real(tmp_path):
    from augsbert.artifacts import OutputWriteError

    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        with pytest.raises(OutputWriteError, match=f"cannot write {ro / 'k-0123456789'}: Permission denied"):
            with artifact_dir(ro / "k-0123456789", {}):
                pass
    finally:
        ro.chmod(0o755)
