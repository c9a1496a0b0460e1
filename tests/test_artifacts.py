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
