"""Issue 41: every read is checked. The key, the folder and the content agree wherever an artifact is read; the
raw files and models a job reads are those its key was made from; settings files are regular UTF-8 files of
bounded size; and each failure a user can fix ends with one line naming the file or option, never a traceback.

Each test here failed before issue 41 (a wrong result with exit code 0, or a traceback). The cases on `verify
--repair`, large files and `export --force` are in test_artifacts.py and test_export.py; the move of a whole
project at the end of this file.
"""

from __future__ import annotations

import errno
import json
import re
import os
import shutil
from pathlib import Path

import pytest
import yaml

from augsbert.face.cli import main
from test_errors import CONFIG, config, lee_path, mine, prepare_lee

pytestmark = pytest.mark.usefixtures("in_tmp")


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def err_of(capsys, argv: list[str], code: int = 2) -> str:
    """stderr of `augsbert argv` (which must exit with `code`), checked to be one message, no traceback."""
    capsys.readouterr()
    assert main(["-q", *argv]) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def write_pairs(path: Path, n: int = 12) -> Path:
    path.write_text("sentence1,sentence2,score\n" + "".join(f"a{i} b c,a{i} d e,{i % 6}\n" for i in range(n)))
    return path


# --- the key, the folder and the content agree at every read ----------------------------------------------

def test_config_out_must_be_named_after_the_planned_key(tmp_path, capsys):
    """`--config C --experiment E --out artifacts/<stage>/<old key> --force` wrote another configuration's result
    under the old key; the name check of `--spec` applies to `--config` now."""
    prepare_lee(tmp_path)
    old = Path(lee_path())
    other = old.parent / "lee-0123456789"
    shutil.copytree(old, other)
    before = (other / "metrics.json").read_bytes()
    err = err_of(capsys, ["prepare-data", "--config", str(CONFIG), "--experiment", "demo_zeroshot",
                          "--out", str(other), "--force"])
    assert err == (f"augsbert prepare-data: error: --out {other}: the key planned from --config is {old.name}, so the "
                   f"folder must be named after it (artifacts/data/{old.name}, as the workflow writes it); refusing "
                   "to run\n")
    assert (other / "metrics.json").read_bytes() == before


def test_a_stage_refuses_an_input_whose_spec_names_another_key(tmp_path, capsys):
    prepare_lee(tmp_path)
    data = Path(lee_path())
    renamed = data.parent / "lee-0123456789"
    shutil.copytree(data, renamed)
    spec = json.dumps({"stage": "zero_shot", "key": "z", "inputs": {"data": str(renamed)},
                       "params": {"model": "no-such-model", "batch_size": 8, "max_length": 32}})
    err = err_of(capsys, ["zero-shot", "--spec", spec, "--out", str(tmp_path / "zs"), "--device", "cpu"])
    assert (f"input `data` {renamed} is damaged: its spec.json says it holds {data.name}, not lee-0123456789 as its "
            "folder's name says") in err


def _edit_same_size(path: Path) -> None:
    text = path.read_text()
    edited = text.replace("1", "9", 1) if "1" in text else text.replace("0", "8", 1)
    assert edited != text and len(edited) == len(text)
    stat = path.stat()
    path.write_text(edited)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_collect_results_and_render_table_refuse_an_edited_metrics_file(tmp_path, capsys):
    """A same-size edit of an artifact's metrics.json was published by collect-results and render-table."""
    from augsbert.store.artifacts import DamagedArtifactError
    from augsbert.reporting import tables

    prepare_lee(tmp_path)
    data = Path(lee_path())
    spec = {"experiment": "x", "config": {"dataset": "lee"}, "dataset": {}, "config_hash": "0123456789", "seeds": [42],
            "runs": {"42": {"data": {"key": data.name, "stage": "data", "path": str(data)}}}}
    assert main(["-q", "collect-results", "--spec", json.dumps(spec), "--out", "results/x.json"]) == 0
    _edit_same_size(data / "metrics.json")
    err = err_of(capsys, ["collect-results", "--spec", json.dumps(spec), "--out", "results/y.json"])
    assert f"`data` artifact {data} is damaged: metrics.json changed since it was written" in err
    assert not Path("results/y.json").exists()
    grid = {"grid": "g", "experiments": ["x"], "rows": [], "columns": [], "metrics": []}
    with pytest.raises(DamagedArtifactError, match="results/x.json: artifact .* metrics.json changed since it was written"):
        tables.collect(grid, "results")


def test_collect_results_names_an_artifact_without_metrics(tmp_path, capsys):
    """collect-results with both manifest.json and metrics.json of an artifact gone: a FileNotFoundError trace."""
    prepare_lee(tmp_path)
    data = Path(lee_path())
    (data / "manifest.json").unlink()
    (data / "metrics.json").unlink()
    spec = {"experiment": "x", "config": {"dataset": "lee"}, "dataset": {}, "config_hash": "0123456789", "seeds": [42],
            "runs": {"42": {"data": {"key": data.name, "stage": "data", "path": str(data)}}}}
    err = err_of(capsys, ["collect-results", "--spec", json.dumps(spec), "--out", "results/x.json"])
    # named as incomplete (issue 64 V1: a folder without metrics.json or manifest is no finished artifact)
    assert f"`data` artifact {data} is damaged: incomplete, not a finished artifact: it holds only " in err


# --- raw files and models re-checked at job start ----------------------------------------------------------

def test_a_raw_file_edited_after_planning_is_refused(tmp_path, capsys):
    """A raw file edited between planning and the data job was written under the key of the old content."""
    from augsbert.config.load import load_config
    from augsbert.plan import Plan

    write_pairs(tmp_path / "p.csv")
    plan = Plan(load_config(mine(tmp_path, train="p.csv", test="p.csv"), lazy=True))
    key = plan.experiment("e").runs[42]["data"]
    spec = plan.spec_file(key)
    _edit_same_size(tmp_path / "p.csv")
    err = err_of(capsys, ["data", "--spec", spec, "--out", plan.node(key).path])
    assert err == (f"augsbert data: error: dataset 'mine': raw file(s) {tmp_path}/p.csv changed since the job was "
                   f"planned (the key {key} holds the content planned); plan again (run snakemake again: it writes the "
                   "job's spec under the key of what is there now); nothing was written\n")
    assert not Path(plan.node(key).path).exists()


def test_a_spec_pointing_at_another_model_is_refused(tmp_path, capsys):
    """A spec whose runtime `model` path pointed at another model was accepted under the original key."""
    from augsbert.config.load import load_config
    from augsbert.plan import Plan

    for name, width in (("m1", 1), ("m2", 2)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"hidden_size": width}))
    cfg = config(tmp_path, experiments={"demo_zeroshot": {"base_model": str(tmp_path / "m1")}})
    plan = Plan(load_config(cfg, lazy=True))
    key = plan.experiment("demo_zeroshot").runs[42]["zero_shot"]
    spec = plan.spec(key)
    spec["params"]["model"] = str(tmp_path / "m2")  # a runtime setting: outside the key's hash
    err = err_of(capsys, ["zero-shot", "--spec", json.dumps(spec), "--out", plan.node(key).path, "--device", "cpu"])
    assert err.startswith(f"augsbert zero-shot: error: model '{tmp_path}/m2' is not the model the key {key} was made "
                          "from (its files changed, or the spec points at another model)")


# --- scores -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("score_range, expected", [
    ([-1e308, 1e308], "score_range [-1e+308, 1e+308] is inf wide, not a finite number"),
    ([-1e307, 1e307], "rescaled from score_range [-1e+307, 1e+307], 6 distinct score(s) become 1"),
])
def test_a_score_range_that_flattens_the_gold_is_refused(tmp_path, capsys, score_range, expected):
    """`score_range: [-1e308, 1e308]` turned every gold score into 0.0 and the Spearman into null, exit 0."""
    write_pairs(tmp_path / "p.csv")
    cfg = mine(tmp_path, train="p.csv", test="p.csv", score_range=score_range)
    err = err_of(capsys, ["prepare-data", "--config", cfg, "--experiment", "e"])
    assert f"augsbert prepare-data: error: dataset 'mine': {expected}" in err and "datasets.mine.score_range" in err


# --- one line instead of a traceback ---------------------------------------------------------------------

def test_a_latin1_config_file(tmp_path, capsys):
    (tmp_path / "c.yaml").write_bytes(b"seeds: [42]\n# r\xe9sum\xe9\n")
    err = err_of(capsys, ["plan", "--config", "c.yaml"])
    assert err == ("augsbert plan: error: c.yaml:2: not valid utf-8 text (byte 0xe9 at byte offset 15); save the "
                   "config file as utf-8\n")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_config_and_spec_at_a_device(capsys, device):
    """`--config` / `--spec` at /dev/zero ran out of memory; /dev/urandom never ended."""
    err = err_of(capsys, ["plan", "--config", device])
    assert err == (f"augsbert plan: error: {device}: is a character device, not a config file; name a config file "
                   "(a regular file)\n")
    err = err_of(capsys, ["data", "--spec", f"@{device}", "--out", "x"])
    assert err == (f"augsbert data: error: --spec @{device}: {device}: is a character device, not a spec file; name a "
                   "spec file (a regular file)\n")


def test_a_config_over_the_size_limit(tmp_path, capsys, monkeypatch):
    import augsbert.config.reading as reading

    monkeypatch.setattr(reading, "CONFIG_LIMIT", 100)
    (tmp_path / "c.yaml").write_text("seeds: [42]\n" + "# padding\n" * 20)
    assert "c.yaml: 212 bytes, more than a config file can be" in err_of(capsys, ["plan", "--config", "c.yaml"])


def test_a_list_nested_800_deep(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("seeds: " + "[" * 800 + "]" * 800 + "\n")
    err = err_of(capsys, ["plan", "--config", "c.yaml"])
    assert err.startswith("augsbert plan: error: c.yaml: mappings and lists nested") and "is it the right file?" in err
    (tmp_path / "s.json").write_text('{"a": ' + "[" * 800 + "]" * 800 + "}")
    err = err_of(capsys, ["data", "--spec", "@s.json", "--out", "x"])
    assert err.startswith("augsbert data: error: --spec @s.json: ") and "nested" in err


def test_a_full_disk_while_a_library_saves_a_model(tmp_path, capsys, monkeypatch):
    """safetensors reports a full disk in a SafetensorError of its own, not an OSError: it ended in a traceback."""
    from safetensors import SafetensorError

    import augsbert.jobs.data as stage

    def save(*args, **kwargs):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space '
                              'left on device" })')

    monkeypatch.setattr(stage, "run", save)
    err = err_of(capsys, ["prepare-data", "--config", str(CONFIG), "--experiment", "demo_zeroshot"])
    assert err == (f"augsbert prepare-data: error: cannot write {lee_path()}: No space left on device (while "
                   "SafetensorError saved a file into it)\n")


def _read_only(monkeypatch, top: Path) -> None:
    """A read-only mount at `top` (tests run as root, for whom chmod stops nothing)."""
    real_open, real_mkdir = os.open, os.mkdir

    def refuse(path):
        if os.path.abspath(path).startswith(str(top) + os.sep) or os.path.abspath(path) == str(top):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    def mkdir(path, *args, **kwargs):
        refuse(path)
        return real_mkdir(path, *args, **kwargs)

    def open_(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", open_)


@pytest.mark.parametrize("folder", ["artifacts", "results"])
def test_read_only_artifacts_or_results_are_found_before_planning(tmp_path, monkeypatch, folder):
    """A read-only artifacts/ (even in a dry run, which writes spec files) or results/ ended in a traceback; the
    workflow checks both before it plans (common.smk calls check_writable)."""
    from augsbert.store.artifacts import OutputWriteError, check_writable

    (tmp_path / folder).mkdir()
    _read_only(monkeypatch, tmp_path / folder)
    with pytest.raises(OutputWriteError, match=rf"^cannot write {folder}/: Read-only file system; the workflow writes "
                                               rf"its {folder} there. Make it writable"):
        check_writable(folder)
    check_writable("elsewhere")
    common = (Path(__file__).parents[1] / "workflow" / "rules" / "common.smk").read_text()
    assert common.index('for _folder in ("artifacts", "results"):') < common.index("PLAN = Plan(config)")


@pytest.mark.workflow
@pytest.mark.parametrize("folder", ["artifacts", "results"])
def test_a_dry_run_names_an_unwritable_artifacts_or_results_folder(tmp_path, folder):
    """The same check in a real dry run: `artifacts` (or `results`) is a file here, so no folder can be made in it
    (as root, a read-only mount is the other way to get there)."""
    from workflow_helpers import checkout, keep_experiments, snakemake

    project = checkout(tmp_path / "p")
    keep_experiments(project, "demo_zeroshot")
    (project / folder).write_text("not a folder")
    proc = snakemake(project, "-n", "results/demo_zeroshot.json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"augsbert: error: cannot write {folder}/: File exists; the workflow writes its {folder} there. Make it "
            "writable") in proc.stderr and "Traceback" not in proc.stderr


def test_verify_repair_on_a_read_only_mount(tmp_path, capsys, monkeypatch):
    prepare_lee(tmp_path)
    data = Path(lee_path())
    (data / "dev.parquet").write_bytes(b"x")

    def rename(path, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(os, "rename", rename)
    err = err_of(capsys, ["verify", "--repair"])
    place = next(Path("artifacts/.quarantine/data").iterdir(), None) if Path("artifacts/.quarantine/data").is_dir() \
        else None
    assert place is None  # nothing was moved
    assert re.fullmatch(
        rf"augsbert verify: error: cannot move {re.escape(str(data))} aside \(to artifacts/\.quarantine/data/"
        rf"{data.name}-\d{{8}}T\d{{6}}\): Read-only file system \({re.escape(str(data))}\); make artifacts writable "
        r"\(a read-only mount\?\) and run `augsbert verify --repair` again, or move it away yourself\n", err), err
    assert (data / "dev.parquet").is_file()


def test_an_out_where_no_folder_can_be_made(capsys):
    err = err_of(capsys, ["prepare-data", "--config", str(CONFIG), "--experiment", "demo_zeroshot",
                          "--out", "/proc/lee-0123456789"])
    assert "--out /proc/lee-0123456789: the key planned from --config" in err  # named otherwise: refused first
    key = Path(lee_path()).name
    err = err_of(capsys, ["prepare-data", "--config", str(CONFIG), "--experiment", "demo_zeroshot",
                          "--out", f"/proc/{key}"])
    assert err == (f"augsbert prepare-data: error: cannot write /proc/{key}: No such file or directory (its lock file "
                   f"/proc/.locks/{key}.lock); name an output in a folder you can write\n")


def test_device_names(capsys, monkeypatch):
    """`--device banana` ended in torch's RuntimeError; `--device cuda:99` was reported as `cuda`."""
    err = err_of(capsys, ["zero-shot", "--config", str(CONFIG), "--experiment", "demo_zeroshot", "--device", "banana"])
    assert err == ("augsbert zero-shot: error: --device 'banana': not a device; use auto, cpu, cuda, cuda:N (N = 0, 1, "
                   "...) or mps\n")
    import torch

    from augsbert.models.device import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("AUGSBERT_DEVICE_REQUESTED", "cuda:99")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "99")
    from augsbert.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^device 'cuda:99' requested, but there is no GPU with index 99 "
                                          r"\(CUDA_VISIBLE_DEVICES=99; `nvidia-smi -L` lists"):
        resolve_device("cuda")


@pytest.mark.parametrize("argv, expected", [
    (["collect-results", "--spec", '{"experiment": "x"}'], "--spec: an experiment spec holds `config` as an object; "
                                                          "it is missing"),
    (["render-table", "--spec", '{"grid": "g", "metrics": [], "columns": [], "rows": {}}'],
     "--spec: a grid spec holds `rows` as an array; it is dict, not an array"),
    (["export", "--spec", '{"experiment": "x", "config": {}, "dataset": {}, "config_hash": "0", "seeds": [42], '
                          '"runs": {"42": {"student": "s"}}}', "--to", "out"],
     "--spec: runs.42.student is not a node (an object with `key`, `stage` and `path`)"),
])
def test_an_incomplete_experiment_or_grid_spec(capsys, argv, expected):
    """An experiment or grid spec cut short ended in a KeyError traceback (collect-results, render-table, export)."""
    assert err_of(capsys, argv) == f"augsbert {argv[0]}: error: {expected}" + (
        "" if "runs." in expected else f" (the workflow writes {'grid' if 'grid' in expected else 'experiment'} specs "
        f"to artifacts/.specs/; or plan one with --config and --{'grid' if 'grid' in expected else 'experiment'})") + "\n"


# --- moving the project, its data or its environment reruns nothing --------------------------------------

@pytest.mark.workflow
def test_moving_the_project_and_its_data_reruns_nothing_now_or_at_the_next_change(tmp_path, tiny_model):
    """Snakemake recorded the raw files' paths (rerun trigger `input`): a moved data folder retrained data,
    student and suite, and after the project or its environment was reached by another path the next change of
    one student's lr replanned every stage. Raw files enter by content only now: after moving the project and
    the folder of its raw data (as a recreated environment moves Lee's files), a dry run plans nothing and the
    lr change plans that student and what follows it."""
    from conftest import theme_pairs
    from workflow_helpers import checkout, planned, run

    project, env = checkout(tmp_path / "p1"), tmp_path / "env1"
    env.mkdir()
    for split, (n, seed) in {"train": (32, 1), "dev": (12, 2), "test": (12, 3)}.items():
        theme_pairs(n, seed).to_csv(env / f"{split}.csv", index=False)
    (project / "small.yaml").write_text(yaml.safe_dump({
        "data_dir": str(env),  # outside the project, by an absolute path
        "datasets": {"mine": {"loader": "pairs_file", "train": "train.csv", "dev": "dev.csv", "test": "test.csv"}},
        "defaults": {"base_model": tiny_model, "student": {"epochs": 1, "max_length": 32, "batch_size": 16},
                     "suite": {"max_length": 32, "suites": []}},
        "experiments": {"moved": {"dataset": "mine", "models": ["lower_bound"]}}}))
    args = ("--configfile", "config/config.yaml", "small.yaml")
    target = "results/moved.json"
    assert run(project, target, *args) == {"data": 1, "student": 1, "collect_results": 1}
    before = json.loads((project / target).read_text())["stages"]

    moved, moved_env = tmp_path / "p2", tmp_path / "env2"
    shutil.move(project, moved)
    shutil.move(env, moved_env)
    args = (*args, "--config", f"data_dir={moved_env}")
    assert planned(moved, target, *args) == {}
    lr = ("--config", f"data_dir={moved_env}", "experiments={moved: {student: {lr: 3.0e-5}}}")
    assert planned(moved, target, *args[:3], *lr) == {"student": 1, "collect_results": 1}
    assert json.loads((moved / target).read_text())["stages"] == before
