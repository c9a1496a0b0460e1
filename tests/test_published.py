"""Issue 49: nothing is published that the artifacts do not say. Results files, manifests, raw reads and exports
are checked end to end; the cases of the fault probe of 4e56e01 (docs/guide/caching.md, "Faults and what
answers them"), each of which passed silently or ended in a traceback there.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from augsbert.face.cli import main
from test_errors import CONFIG, lee_path, mine, prepare_lee
from test_trust import _edit_same_size, err_of, write_pairs

pytestmark = pytest.mark.usefixtures("in_tmp")


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def planned_data(tmp_path: Path, **files) -> tuple:
    """A plan of dataset `mine` (pairs_file) and the key, spec file and path of its data node."""
    from augsbert.config.load import load_config
    from augsbert.plan import Plan

    plan = Plan(load_config(mine(tmp_path, **files), lazy=True))
    key = plan.experiment("e").runs[42]["data"]
    return plan, key, plan.spec_file(key), plan.node(key).path


def collect_lee(name: str = "x") -> tuple[Path, dict]:
    data = Path(lee_path())
    spec = {"experiment": name, "config": {"dataset": "lee"}, "dataset": {}, "config_hash": "0123456789",
            "seeds": [42], "runs": {"42": {"data": {"key": data.name, "stage": "data", "path": str(data)}}}}
    assert main(["-q", "collect-results", "--spec", json.dumps(spec), "--out", f"results/{name}.json"]) == 0
    return data, spec


# --- manifests that cannot be emptied (G2, G5) -----------------------------------------------------------

def test_g2_a_stray_file_in_an_artifact_is_named_and_refused_by_its_reader(tmp_path, capsys):
    """A dev.parquet dropped into a data artifact without dev was ignored by verify and read by the teacher."""
    write_pairs(tmp_path / "p.csv")
    plan, key, spec, out = planned_data(tmp_path, train="p.csv", test="p.csv", score_range=[0, 5])
    assert main(["-q", "data", "--spec", spec, "--out", out]) == 0
    assert not (Path(out) / "dev.parquet").exists()
    shutil.copyfile(Path(out) / "test.parquet", Path(out) / "dev.parquet")
    reader = json.dumps({"stage": "zero_shot", "key": "z", "inputs": {"data": out},
                         "params": {"model": "no-such-model", "batch_size": 8, "max_length": 32}})
    err = err_of(capsys, ["zero-shot", "--spec", reader, "--out", str(tmp_path / "zs"), "--device", "cpu"])
    assert f"input `data` {out} is damaged: dev.parquet is not in its manifest.json (added after the artifact was " \
           "written)" in err
    capsys.readouterr()
    assert main(["verify"]) == 1
    assert f"{out}: dev.parquet is not in its manifest.json (added after the artifact was written)" in \
        capsys.readouterr().out
    # a file browser's or an editor's files beside the content are no damage (verify --repair deletes damage)
    (Path(out) / "dev.parquet").unlink()
    (Path(out) / ".DS_Store").write_bytes(b"\0")
    (Path(out) / ".metrics.json.swp").write_bytes(b"\0")
    (Path(out) / "metrics.json~").write_text("{}")
    assert main(["verify"]) == 0


def test_g5_an_emptied_manifest_is_named_and_nothing_beside_it_is_published(tmp_path, capsys):
    prepare_lee(tmp_path)
    data = Path(lee_path())
    (data / "manifest.json").write_text('{"files": {}}')
    _edit_same_size(data / "metrics.json")
    capsys.readouterr()
    assert main(["verify"]) == 1
    out = capsys.readouterr().out
    assert (f"{data}: manifest.json does not list spec.json, which every artifact of its stage holds (emptied or "
            "edited); manifest.json does not list metrics.json") in out
    spec = {"experiment": "x", "config": {"dataset": "lee"}, "dataset": {}, "config_hash": "0123456789",
            "seeds": [42], "runs": {"42": {"data": {"key": data.name, "stage": "data", "path": str(data)}}}}
    err = err_of(capsys, ["collect-results", "--spec", json.dumps(spec), "--out", "results/x.json"])
    assert "metrics.json is not in its manifest.json" in err and not Path("results/x.json").exists()


def test_verify_names_an_emptied_manifest_a_stray_file_and_an_edited_results_file_together(tmp_path, capsys):
    write_pairs(tmp_path / "p.csv")
    write_pairs(tmp_path / "q.csv", n=8)
    outs = []
    for raw in ("p.csv", "q.csv"):
        _, key, spec, out = planned_data(tmp_path, train=raw, test=raw, score_range=[0, 5])
        assert main(["-q", "data", "--spec", spec, "--out", out]) == 0
        outs.append(out)
    spec = {"experiment": "x", "config": {"dataset": "mine"}, "dataset": {}, "config_hash": "0123456789",
            "seeds": [42], "runs": {"42": {"data": {"key": Path(outs[0]).name, "stage": "data", "path": outs[0]}}}}
    assert main(["-q", "collect-results", "--spec", json.dumps(spec), "--out", "results/x.json"]) == 0
    (Path(outs[0]) / "manifest.json").write_text('{"files": {}}')  # after collecting: the results' source
    (Path(outs[1]) / "notes.txt").write_text("mine")
    _edit_same_size(Path("results/x.json"))
    capsys.readouterr()
    assert main(["verify"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith(f"{outs[0]}: manifest.json does not list spec.json") for line in lines)
    assert f"{outs[1]}: notes.txt is not in its manifest.json (added after the artifact was written)" in lines
    assert any(line.startswith("results/x.json: results file edited after collect-results wrote it") for line in lines)
    assert "2 artifact(s) checked under artifacts, 2 damaged" in lines


# --- results are derived, never trusted (G11, G12) -----------------------------------------------------------

def test_g11_an_edited_results_file_is_not_rendered(tmp_path, capsys):
    """A same-size edit of a number in results/<experiment>.json was rendered as if measured."""
    from augsbert.reporting import tables
    from augsbert.store.artifacts import DamagedArtifactError

    prepare_lee(tmp_path)
    collect_lee("x")
    grid = {"grid": "g", "experiments": ["x"], "rows": [], "columns": [], "metrics": []}
    tables.collect(grid, "results")  # as collected: read
    text = Path("results/x.json").read_text()
    edited = text.replace('"skipped_rows": 0', '"skipped_rows": 9', 1)
    assert edited != text and len(edited) == len(text)
    Path("results/x.json").write_text(edited)
    with pytest.raises(DamagedArtifactError, match=r"^results/x.json: results file edited after collect-results "
                                                   r"wrote it \(its content does not match its digest\)"):
        tables.collect(grid, "results")


def test_g11_results_collected_from_an_artifact_rebuilt_since_are_refused(tmp_path):
    from augsbert.reporting import tables
    from augsbert.store.artifacts import DamagedArtifactError
    from augsbert.store.manifests import write_manifest

    prepare_lee(tmp_path)
    data, _ = collect_lee("x")
    metrics = json.loads((data / "metrics.json").read_text())
    metrics["wall_time_s"] = 123.0  # rewritten as a rerun would, its manifest with it
    (data / "metrics.json").write_text(json.dumps(metrics))
    write_manifest(data)
    grid = {"grid": "g", "experiments": ["x"], "rows": [], "columns": [], "metrics": []}
    with pytest.raises(DamagedArtifactError, match=f"results/x.json: artifact {data} was rewritten after the results "
                                                   "were collected from it"):
        tables.collect(grid, "results")


def test_e5_render_table_before_the_results_exist(tmp_path, capsys):
    from augsbert.reporting import tables
    from augsbert.store.artifacts import DamagedArtifactError

    grid = {"grid": "g", "experiments": ["x"], "rows": [], "columns": [], "metrics": []}
    with pytest.raises(DamagedArtifactError, match=r"results/x.json: no results file yet \(grid g needs it\)"):
        tables.run(grid, "results", Path("results/tables/g.md"))


# --- raw files hashed as they are read (G10, G13) ------------------------------------------------------------

def test_g10_a_digest_cache_holding_valid_json_that_is_no_object(tmp_path, capsys):
    write_pairs(tmp_path / "p.csv")
    cache = Path("artifacts/.cache/file-digests.json")
    for content in ("[]", "3", '"x"', '{"%s": 7}' % (tmp_path / "p.csv")):
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(content)
        _, key, _, _ = planned_data(tmp_path, train="p.csv", test="p.csv", score_range=[0, 5])
        assert key.startswith("mine-")
    assert isinstance(json.loads(cache.read_text()), dict)


def test_g13_a_poisoned_cache_entry_is_not_what_a_job_records_and_is_corrected(tmp_path, capsys):
    """The job trusted the cache's stat entry: a poisoned entry was trusted for ever, and a data artifact was
    written whose spec.json records a sha256 its content does not have."""
    write_pairs(tmp_path / "p.csv")
    planned_data(tmp_path, train="p.csv", test="p.csv", score_range=[0, 5])  # fills the cache
    cache = Path("artifacts/.cache/file-digests.json")
    entries = json.loads(cache.read_text())
    name = str((tmp_path / "p.csv").resolve())
    good = entries[name][-1]
    entries[name][-1] = "0" * 64  # poisoned: the stamp still matches
    cache.write_text(json.dumps(entries))
    _, key, spec, out = planned_data(tmp_path, train="p.csv", test="p.csv", score_range=[0, 5])
    err = err_of(capsys, ["data", "--spec", spec, "--out", out])
    assert "changed since the job was planned" in err and not Path(out).exists()
    assert json.loads(cache.read_text())[name][-1] == good  # the job put what it hashed into the cache
    _, key, spec, out = planned_data(tmp_path, train="p.csv", test="p.csv", score_range=[0, 5])
    assert main(["-q", "data", "--spec", spec, "--out", out]) == 0
    assert json.loads((Path(out) / "spec.json").read_text())["params"]["files"] == [["p.csv", good]] * 2


def test_g13_race_a_raw_file_rewritten_while_the_data_job_reads_it(tmp_path, capsys, monkeypatch):
    """The job exited 0 and the old key held the new content; restoring the file reused the wrong artifact. Now
    no artifact is written, and the plan after the restore reuses nothing."""
    from augsbert.data import loaders

    raw = write_pairs(tmp_path / "p.csv")
    original = raw.read_bytes()
    _, key, spec, out = planned_data(tmp_path, train="p.csv", test="p.csv", score_range=[0, 5])
    loader = type(loaders.get_loader("pairs_file"))
    load = loader.load

    def rewritten_while_read(self, *args, **kwargs):
        prepared = load(self, *args, **kwargs)
        raw.write_bytes(original.replace(b"a1 ", b"z1 "))  # another process rewrites it during the read
        return prepared

    monkeypatch.setattr(loader, "load", rewritten_while_read)
    err = err_of(capsys, ["data", "--spec", spec, "--out", out])
    assert err == (f"augsbert data: error: dataset 'mine': raw file {tmp_path}/p.csv changed while the data job read "
                   f"it (the key {key} names the content planned); plan again (run snakemake again: it writes the "
                   "job's spec under the key of what is there now); nothing was written\n")
    assert not Path(out).exists()
    monkeypatch.setattr(loader, "load", load)
    _, edited_key, _, _ = planned_data(tmp_path, train="p.csv", test="p.csv", score_range=[0, 5])
    assert edited_key != key
    raw.write_bytes(original)  # restored: the original key again, and no artifact under it to reuse
    _, restored_key, spec, out = planned_data(tmp_path, train="p.csv", test="p.csv", score_range=[0, 5])
    assert restored_key == key and not Path(out).exists()
    assert main(["-q", "data", "--spec", spec, "--out", out]) == 0
    assert b"z1 " not in b"".join(p.read_bytes() for p in Path(out).glob("*.parquet"))


def test_g13_the_data_artifact_of_a_file_edited_in_place_is_keyed_by_what_was_read(tmp_path):
    """A job's spec.json never records a digest its raw file does not have: the artifact written holds the
    planned digest, which is the sha256 of the file's bytes."""
    import hashlib

    raw = write_pairs(tmp_path / "p.csv")
    _, _, spec, out = planned_data(tmp_path, train="p.csv", test="p.csv", score_range=[0, 5])
    assert main(["-q", "data", "--spec", spec, "--out", out]) == 0
    recorded = json.loads((Path(out) / "spec.json").read_text())["params"]["files"]
    assert recorded == [["p.csv", hashlib.sha256(raw.read_bytes()).hexdigest()]] * 2


# --- one line each, exit status 2 (C12, E4, B3) ----------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [
    ({"seeds": "[1"}, "seeds: the string '[1' (it is not valid YAML: expected ',' or ']', but got '<stream end>' at "
                      "column 3); a --config value is YAML in flow style: quote the whole argument, e.g. --config "
                      "'seeds=[...]'"),
    ({"experiments": "{a"}, "experiments: a mapping of name -> experiment, not the string '{a' (it is not valid "
                            "YAML: expected ',' or '}', but got '<stream end>' at column 3); a --config value is YAML "
                            "in flow style: quote the whole argument, e.g. --config 'experiments={name: {option: "
                            "value}}'"),
])
def test_c12_a_malformed_config_mapping_is_named(raw, expected):
    """`snakemake --config 'seeds=[1'` ended in a YAML traceback (exit 1); `experiments={a` said only "not str"."""
    from augsbert.config.load import prepare_config
    from augsbert.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        prepare_config(raw)
    assert str(err.value) == expected


@pytest.mark.workflow
def test_e4_a_malformed_config_value_exits_2_in_snakemake(tmp_path):
    from workflow_helpers import checkout, keep_experiments, snakemake

    project = checkout(tmp_path / "p")
    keep_experiments(project, "demo_zeroshot")
    proc = snakemake(project, "-n", "--config", "seeds=[1", "--", "results/demo_zeroshot.json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "augsbert: error: seeds: the string '[1' (it is not valid YAML" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.workflow
def test_c8_a_yaml_error_in_a_configfile_names_file_line_and_column(tmp_path):
    """Snakemake said only "Config file is not valid JSON or YAML" (exit 1): it reads --configfile before any
    workflow code; the workflow profile reads them first now."""
    from augsbert.config.yaml_files import configfile_args
    from workflow_helpers import checkout, keep_experiments, snakemake

    assert configfile_args(["-n", "--configfile", "a.yaml", "b.yaml", "-n", "x", "--configfiles=c.yaml"]) == \
        ["a.yaml", "b.yaml", "c.yaml"]
    project = checkout(tmp_path / "p")
    keep_experiments(project, "demo_zeroshot")
    (project / "my.yaml").write_text("experiments:\n  e: [a\n")
    proc = snakemake(project, "-n", "--configfile", "my.yaml", "--", "results/demo_zeroshot.json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.endswith("augsbert: error: my.yaml:3:1: not valid YAML: did not find expected ',' or ']' "
                                "(while parsing a flow sequence at line 2, column 6)\n"), proc.stderr


@pytest.mark.workflow
def test_a_target_after_configfile_without_the_separator_is_one_line(tmp_path):
    """Issue 50 item 3: `snakemake --configfile my.yaml results/x.json` (no `--`) with x.json not yet present ended
    in a 27-line traceback (FileNotFoundError: 'results/x.json'); now the one line it got when the file existed."""
    from workflow_helpers import checkout, keep_experiments, snakemake

    project = checkout(tmp_path / "p")
    keep_experiments(project, "demo_zeroshot")
    (project / "my.yaml").write_text("seeds: [42]\n")
    proc = snakemake(project, "-n", "--configfile", "my.yaml", "results/demo_zeroshot.json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.endswith(
        "augsbert: error: results/demo_zeroshot.json was read as a config file, but it is a results file. Snakemake's "
        "--configfile takes every path after it up to the next option, so a target written after it becomes one "
        "more config file: end the config files with `--` (snakemake -n --configfile my.yaml -- "
        "results/demo_zeroshot.json) or name the targets first\n"), proc.stderr
    assert "Traceback" not in proc.stderr


def test_b3_a_read_only_stage_folder_is_found_before_planning(tmp_path, monkeypatch):
    """A read-only artifacts/<stage>/ ended in an OSError from Snakemake's remove_existing_output."""
    from augsbert.store.artifacts import OutputWriteError, check_writable
    from test_trust import _read_only

    (tmp_path / "artifacts" / "teacher").mkdir(parents=True)
    (tmp_path / "artifacts" / "data").mkdir()
    _read_only(monkeypatch, tmp_path / "artifacts" / "teacher")
    check_writable("artifacts")  # the top folder alone: writable
    with pytest.raises(OutputWriteError, match=r"^cannot write artifacts/teacher/: Read-only file system"):
        check_writable("artifacts", below=True)
    common = (Path(__file__).parents[1] / "workflow" / "rules" / "common.smk").read_text()
    assert "check_writable(_folder, below=True)" in common


# --- scores that cannot rank (D9, C14) -----------------------------------------------------------------------

def test_d9_an_undefined_correlation_says_why(caplog):
    import numpy as np

    from augsbert.evaluation.similarity import correlations

    with caplog.at_level("WARNING"):
        assert np.isnan(correlations([0.5, 0.5, 0.5], [0.1, 0.2, 0.3])["spearman"])
        assert np.isnan(correlations([0.1, 0.2, 0.3], [1.0, 1.0, 1.0])["pearson"])
    assert [r.getMessage() for r in caplog.records] == [
        "Spearman and Pearson undefined (null in the metrics): the model gives all 3 pairs the same score (0.5), "
        "so it ranks none above another (a collapsed or untrained model?)",
        "Spearman and Pearson undefined (null in the metrics): all 3 gold scores are equal (1); check the split's "
        "scores and the dataset's score_range"]


def test_c14_a_score_range_far_wider_than_the_scores_and_equal_scores_warn(tmp_path, capsys, caplog):
    write_pairs(tmp_path / "p.csv")  # scores 0 to 5
    (tmp_path / "same.csv").write_text("sentence1,sentence2,score\n" + "".join(f"a{i},b{i},3\n" for i in range(4)))
    _, _, spec, out = planned_data(tmp_path, train="p.csv", test="same.csv", score_range=[-1000, 1000])
    with caplog.at_level("WARNING", logger="augsbert.data.tables"):
        assert main(["data", "--spec", spec, "--out", out]) == 0
    messages = [r.getMessage() for r in caplog.records if r.name == "augsbert.data.tables"]
    assert ("dataset 'mine': datasets.mine.score_range [-1000, 1000] is 400 times wider than the scores (0 to 5), "
            "which land in [0.5, 0.502] after rescaling; set it to the bounds of the scores' scale") in messages
    assert "dataset 'mine': all 4 scores are equal (3): Spearman and Pearson against them are undefined (null)" \
        in messages


def test_g13_one_raw_file_read_for_two_splits_beside_another(tmp_path):
    """The after-read check pairs each file with its own planned digest, also where a file serves two splits."""
    write_pairs(tmp_path / "p.csv")
    write_pairs(tmp_path / "q.csv", n=8)
    _, _, spec, out = planned_data(tmp_path, train="p.csv", dev="p.csv", test="q.csv", score_range=[0, 5])
    assert main(["-q", "data", "--spec", spec, "--out", out]) == 0
    assert [name for name, _ in json.loads((Path(out) / "spec.json").read_text())["params"]["files"]] == \
        ["p.csv", "p.csv", "q.csv"]
