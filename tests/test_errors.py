"""Every foreseeable failure ends with one message and exit code 2, never a traceback.

The table below is the reference (README "Errors" lists the same cases): each row
sets up an input, runs the real command line (`augsbert.face.cli.main`) and compares
what is printed on stderr. `{tmp}` is the case's directory (also the working
directory), `{lee}` the Lee data artifact. Unexpected exceptions keep their
traceback (last tests).
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest
import yaml

from augsbert.face.cli import main
from augsbert.config.load import deep_merge
from augsbert.config.names import NAME_RULE
from conftest import REPO, write_jsonl

CONFIG = REPO / "config" / "config.yaml"
USE = f"use {NAME_RULE}"
FIX_ROWS = "Fix the file(s), or set datasets.mine.on_bad_rows: skip to drop such rows."


def config(tmp: Path, **override) -> str:
    """config/config.yaml with `override` merged over it, written to {tmp}/config.yaml."""
    raw = deep_merge(yaml.safe_load(CONFIG.read_text()), override)
    (tmp / "config.yaml").write_text(yaml.safe_dump(raw))
    return str(tmp / "config.yaml")


def mine(tmp: Path, **dataset) -> str:
    """A config with dataset `mine` (pairs_file unless given) and experiment `e` using it."""
    return config(tmp, data_dir=str(tmp), datasets={"mine": {"loader": "pairs_file", **dataset}},
                  experiments={"e": {"dataset": "mine", "models": ["zero_shot"]}})


def prepare_lee(tmp: Path) -> None:
    assert main(["-q", "prepare-data", "--config", str(CONFIG), "--experiment", "demo_zeroshot"]) == 0


def candidates_spec(tmp: Path, **params) -> str:
    """A sample-pairs spec on the Lee data whose encoder does not exist: encoding first would fail differently."""
    base = {"strategies": ["semantic_search"], "top_k": 3, "pool": "train", "semantic_model": "pretrained",
            "exact": True, "batch_size": 64, "max_length": 64, "exclude_eval_sentences": True,
            "candidate_pool": {"random": 3, "semantic_search": 3}, "model": str(tmp / "no-such-model"), "seed": 42}
    return json.dumps({"stage": "candidates", "key": "c", "inputs": {"data": lee_path()},
                       "params": {**base, **params}})


def lee_path() -> str:
    from augsbert.config.load import load_config
    from augsbert.plan import Plan

    plan = Plan(load_config(CONFIG))
    return plan.node(plan.experiment("demo_zeroshot").runs[42]["data"]).path


def read_only_under(tmp: Path, monkeypatch, top: str) -> None:
    """Simulate a read-only mount at {tmp}/{top}: tests run as root, for whom chmod does not stop writes."""
    (tmp / top).mkdir()
    real = os.mkdir

    def mkdir(path, *args, **kwargs):
        if os.path.abspath(path).startswith(str(tmp / top) + os.sep):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)


def disk_full_under(tmp: Path, monkeypatch, top: str) -> None:
    """Simulate a full disk for writes below {tmp}/{top} (a failing write() names no file)."""
    real = pathlib.Path.write_text

    def write_text(self, *args, **kwargs):
        if os.path.abspath(self).startswith(str(tmp / top)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)


@dataclass
class Case:
    name: str
    setup: Callable  # (tmp, monkeypatch) -> argv
    expected: str  # stderr, exactly (after formatting {tmp} and {lee})
    code: int = 2
    secret: str | None = None  # file content that must not appear anywhere in the output


def _non_utf8(tmp, mp):
    (tmp / "p.csv").write_bytes(b"sentence1,sentence2,score\na,b,1\ncaf\xe9,b,1\n")
    return ["prepare-data", "--config", mine(tmp, train="p.csv", test="p.csv"), "--experiment", "e"]


def _jsonl(record):
    def setup(tmp, mp):
        write_jsonl(tmp / "p.jsonl", [{"sentence1": "a", "sentence2": "b", "score": 0.5}, record])
        write_jsonl(tmp / "t.jsonl", [{"sentence1": "a", "sentence2": "b", "score": 0.5}])
        return ["prepare-data", "--config", mine(tmp, train="p.jsonl", test="t.jsonl"), "--experiment", "e"]
    return setup


def _scores_0_to_5(tmp, mp):
    """Issue 42: STS-style scores 0-5 without `score_range` (default [0, 1])."""
    (tmp / "p.csv").write_text("sentence1,sentence2,score\na,b,0.5\nc,d,4.2\ne,f,5\ng,h,0\n")
    return ["prepare-data", "--config", mine(tmp, train="p.csv", test="p.csv"), "--experiment", "e"]


def _unrelated_file(content: bytes):
    def setup(tmp, mp):
        (tmp / "secret").write_bytes(content)
        cfg = config(tmp, datasets={"mine": {"loader": "bws_cross_topic", "path": str(tmp / "secret")}},
                     experiments={"e": {"dataset": "mine", "models": ["zero_shot"]}})
        return ["prepare-data", "--config", cfg, "--experiment", "e"]
    return setup


def _empty_model_dir(tmp, mp):
    (tmp / "model").mkdir()
    return ["plan", "--config", config(tmp, experiments={"demo_zeroshot": {"base_model": str(tmp / "model")}})]


def _top_k_plan(tmp, mp):
    prepare_lee(tmp)
    cfg = config(tmp, experiments={"big_k": {"dataset": "lee", "candidates": {"strategies": ["bm25"], "top_k": 30}}})
    return ["plan", "--config", cfg]


def _top_k_data(tmp, mp):  # a first run: no data yet, so the data job is the first to know the pool
    cfg = config(tmp, experiments={"big_k": {"dataset": "lee", "candidates": {"strategies": ["bm25"], "top_k": 30}}})
    return ["prepare-data", "--config", cfg, "--experiment", "big_k"]


def _top_k_stage(tmp, mp):
    prepare_lee(tmp)
    return ["sample-pairs", "--spec", candidates_spec(tmp, top_k=25), "--out", str(tmp / "cand"), "--device", "cpu"]


def _read_only(tmp, mp):
    read_only_under(tmp, mp, "artifacts")
    return ["prepare-data", "--config", str(CONFIG), "--experiment", "demo_zeroshot"]


def _disk_full(tmp, mp):
    disk_full_under(tmp, mp, "artifacts")
    return ["prepare-data", "--config", str(CONFIG), "--experiment", "demo_zeroshot"]


def _duplicate_key(tmp, mp):
    (tmp / "c.yaml").write_text("seeds: [42]\ndata_dir: data\nseeds: [1]\n")
    return ["plan", "--config", str(tmp / "c.yaml")]


def _nul_byte(tmp, mp):
    (tmp / "p.csv").write_bytes(b"sentence1,sentence2,score\na,b,1\nc\x00d,b,1\n")
    return ["prepare-data", "--config", mine(tmp, train="p.csv", test="p.csv"), "--experiment", "e"]


def _not_a_file(path):
    def setup(tmp, mp):
        (tmp / "folder").mkdir()
        return ["prepare-data", "--config", mine(tmp, train=path, test=path), "--experiment", "e"]
    return setup


CASES = [
    Case("misspelt config key",
         lambda tmp, mp: ["plan", "--config", config(tmp, experiments={"demo_zeroshot": {"studnet": {"epochs": 1}}})],
         "augsbert plan: error: unknown key experiments.demo_zeroshot.studnet\n  did you mean 'student'?\n"),
    Case("grid named with shell syntax",
         lambda tmp, mp: ["plan", "--config", config(tmp, grids={"g;touch x;y": {"columns": {"lee": {}}}})],
         f"augsbert plan: error: grids.g;touch x;y: invalid name 'g;touch x;y': {USE}\n"),
    Case("experiment name escaping the project",
         lambda tmp, mp: ["plan", "--config", config(tmp, experiments={"../../x": {"dataset": "lee"}})],
         f"augsbert plan: error: experiments.../../x: invalid name '../../x': {USE}\n"),
    Case("dataset name with a slash",
         lambda tmp, mp: ["plan", "--config", config(tmp, datasets={"a/b": {"loader": "lee"}})],
         f"augsbert plan: error: datasets.a/b: invalid name 'a/b': {USE}\n"),
    Case("results spec escaping the project",
         lambda tmp, mp: ["collect-results", "--spec", json.dumps({"experiment": "../../x"})],
         f"augsbert collect-results: error: --spec: experiment: invalid name '../../x': {USE}\n"),
    Case("base_model directory that is not a model", _empty_model_dir,
         "augsbert plan: error: experiments.demo_zeroshot.base_model: model '{tmp}/model': the directory "
         "{tmp}/model holds no config.json, so it is not a model; give a directory saved by save_pretrained / "
         "SentenceTransformer.save (or downloaded with `hf download`)\n"),
    Case("top_k larger than the pool, while planning", _top_k_plan,
         "augsbert plan: error: experiments.big_k.candidates.top_k: 30 partners per sentence, but the pool "
         "(candidates.pool: train) has 25 unique sentence(s), so at most 24\n"),
    Case("top_k larger than the pool, in the data job of a first run (before any training)", _top_k_data,
         "augsbert prepare-data: error: experiments.big_k.candidates.top_k: 30 partners per sentence, but the pool "
         "(candidates.pool: train) has 25 unique sentence(s), so at most 24\n"),
    Case("top_k larger than the pool, in the sampling stage (before encoding)", _top_k_stage,
         "augsbert sample-pairs: error: candidates.top_k: 25 partners per sentence, but the pool (candidates.pool: "
         "train) has 25 unique sentence(s), so at most 24\n"),
    Case("non-UTF-8 input", _non_utf8,
         "augsbert prepare-data: error: {tmp}/p.csv:3: not valid utf-8 text (byte 0xe9 at byte offset 35); "
         "convert the file to utf-8\n"),
    Case("jsonl text that is a list", _jsonl({"sentence1": ["a", "b"], "sentence2": "b", "score": 0.5}),
         "augsbert prepare-data: error: dataset 'mine': 1 bad row(s):\n"
         "  {tmp}/p.jsonl:2: key 'sentence1' holds an array, expected a string\n" + FIX_ROWS + "\n"),
    Case("jsonl text that is an object", _jsonl({"sentence1": "a", "sentence2": {"t": "b"}, "score": 0.5}),
         "augsbert prepare-data: error: dataset 'mine': 1 bad row(s):\n"
         "  {tmp}/p.jsonl:2: key 'sentence2' holds an object, expected a string\n" + FIX_ROWS + "\n"),
    Case("jsonl score that is a boolean", _jsonl({"sentence1": "a", "sentence2": "b", "score": True}),
         "augsbert prepare-data: error: dataset 'mine': 1 bad row(s):\n"
         "  {tmp}/p.jsonl:2: key 'score' holds a boolean (true), expected a number\n" + FIX_ROWS + "\n"),
    Case("scores on a 0-5 scale without score_range: the observed range and the score_range to set", _scores_0_to_5,
         "augsbert prepare-data: error: dataset 'mine': 4 bad row(s):\n"
         "  {tmp}/p.csv:3: score 4.2 outside the declared range [0, 1]\n"
         "  {tmp}/p.csv:4: score 5 outside the declared range [0, 1]\n"
         "  {tmp}/p.csv:3: score 4.2 outside the declared range [0, 1]\n"
         "  {tmp}/p.csv:4: score 5 outside the declared range [0, 1]\n"
         "The scores run from 0 to 5, and 4 row(s) lie outside datasets.mine.score_range: [0, 1] (default [0, 1]). "
         "If your scale is wider, set datasets.mine.score_range: [0, 5] (the scale's bounds; scores are rescaled to "
         "[0, 1] from it).\n"),
    Case("dataset path at an unrelated text file", _unrelated_file(b"ghp_SECRET0123456789abcdef,token\n"),
         "augsbert prepare-data: error: {tmp}/secret:1: header lacks column(s) ['id', 'argument1', 'argument2', "
         "'topic', 'score'] (found 2 column(s))\n", secret="SECRET"),
    Case("dataset path at a binary file", _unrelated_file(b"\x89PNG\r\n\x1a\nSECRET\x00\xff"),
         "augsbert prepare-data: error: {tmp}/secret:1: not valid utf-8 text (byte 0x89 at byte offset 0); "
         "convert the file to utf-8\n", secret="SECRET"),
    Case("read-only artifact directory", _read_only,
         "augsbert prepare-data: error: cannot write {lee}: Read-only file system (artifacts/.locks/data)\n"),
    Case("full disk under the artifact directory", _disk_full,
         "augsbert prepare-data: error: cannot write {lee}: No space left on device ({lee}/spec.json)\n"),
    Case("a key written twice in a config file", _duplicate_key,
         "augsbert plan: error: {tmp}/c.yaml:3: duplicate key seeds (first written at line 1); YAML would silently "
         "keep only the last one: remove or merge one of them\n"),
    Case("a NUL byte in a text file", _nul_byte,
         "augsbert prepare-data: error: {tmp}/p.csv:3: a NUL byte (\\x00) in the text: a UTF-16 or binary file? "
         "convert the file to utf-8 text\n"),
    Case("a data path at a directory", _not_a_file("folder"),
         "augsbert prepare-data: error: dataset 'mine': {tmp}/folder is a directory, not a file; point "
         "`datasets.mine.train` (or `data_dir`) at the data file\n"
         "  what it is: a pairs file of your own (csv, tsv, jsonl or parquet)\n"),
    Case("a data path at /dev/zero", _not_a_file("/dev/zero"),
         "augsbert prepare-data: error: dataset 'mine': /dev/zero is not a regular file (a character device); point "
         "`datasets.mine.train` (or `data_dir`) at the data file\n"
         "  what it is: a pairs file of your own (csv, tsv, jsonl or parquet)\n"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_error_table(case, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = case.setup(tmp_path, monkeypatch)
    capsys.readouterr()
    assert main(["-q", *argv]) == case.code
    out, err = capsys.readouterr()
    assert err == case.expected.format(tmp=tmp_path, lee=lee_path())
    assert "Traceback" not in err
    if case.secret:
        assert case.secret not in out + err


def test_failed_stages_leave_no_artifact(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _top_k_stage(tmp_path, monkeypatch)
    main(["-q", "sample-pairs", "--spec", candidates_spec(tmp_path, top_k=25), "--out", str(tmp_path / "cand")])
    assert not (tmp_path / "cand").exists() and not list(tmp_path.glob(".cand*"))


def run_cli(tmp: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=tmp, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_the_real_entry_point_exits_2_without_a_traceback(tmp_path):
    cfg = config(tmp_path, experiments={"demo_zeroshot": {"studnet": {}}})
    proc = run_cli(tmp_path, f"import sys; from augsbert.face.cli import main; sys.exit(main(['plan', '--config', {cfg!r}]))")
    assert proc.returncode == 2
    assert proc.stderr == "augsbert plan: error: unknown key experiments.demo_zeroshot.studnet\n  did you mean 'student'?\n"


def test_unexpected_exceptions_keep_their_traceback(tmp_path):
    code = ("import sys, augsbert.jobs.data as stage\n"
            "def broken(*args, **kwargs): raise RuntimeError('a bug')\n"
            "stage.run = broken\n"
            "from augsbert.face.cli import main\n"
            f"sys.exit(main(['prepare-data', '--config', {str(CONFIG)!r}, '--experiment', 'demo_zeroshot']))")
    proc = run_cli(tmp_path, code)
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr and proc.stderr.endswith("RuntimeError: a bug\n")


# --- issue 56 (the third fault probe): tracebacks and unclear messages, cases 6-11 and 15 ---------------------

def _infinite_scores(tmp, mp):
    """E6: inf, -inf and 1e999 (read as inf) are no score on any scale: bad rows, not an OverflowError while the
    score_range hint rounded the observed range."""
    (tmp / "p.csv").write_text("sentence1,sentence2,score\na,b,0.5\nc,d,inf\ne,f,1e999\ng,h,-inf\ni,j,3\n")
    (tmp / "t.csv").write_text("sentence1,sentence2,score\na,b,0.5\n")
    return ["prepare-data", "--config", mine(tmp, train="p.csv", test="t.csv"), "--experiment", "e"]


ISSUE56_CASES = [
    Case("E6 a score inf, -inf or 1e999", _infinite_scores,
         "augsbert prepare-data: error: dataset 'mine': 4 bad row(s):\n"
         "  {tmp}/p.csv:3: score 'inf' is not a finite number\n"
         "  {tmp}/p.csv:4: score '1e999' is not a finite number\n"
         "  {tmp}/p.csv:5: score '-inf' is not a finite number\n"
         "  {tmp}/p.csv:6: score 3 outside the declared range [0, 1]\n"
         "The scores run from 0.5 to 3, and 1 row(s) lie outside datasets.mine.score_range: [0, 1] (default [0, 1]). "
         "If your scale is wider, set datasets.mine.score_range: [0, 3] (the scale's bounds; scores are rescaled to "
         "[0, 1] from it). For the other rows: fix the file(s), or set datasets.mine.on_bad_rows: skip to drop such "
         "rows.\n"),
    Case("C8 a mistyped choice in a list of a grid axis, at the axis (not the expanded experiment)",
         lambda tmp, mp: ["plan", "--config", config(tmp, grids={"g": {"columns": {"lee": {"dataset": "lee"}},
                                                                       "axes": {"a": {"x": {"candidates": {
                                                                           "strategies": ["bm2"]}}}}}})],
         "augsbert plan: error: grids.g.axes.a.x.candidates.strategies.0: 'bm2' is not a choice; did you mean "
         "'bm25'? choose from none, random, bm25, bm25_least, semantic_search, semantic_search_least, kde, "
         "iterative_kde, target_pairs\n"),
    Case("M1 a pairs file of your own that is missing: the path, the key and data_dir; no corpus, no licence",
         lambda tmp, mp: ["prepare-data", "--config", mine(tmp, train="nothere.csv", test="nothere.csv"),
                          "--experiment", "e"],
         "augsbert prepare-data: error: dataset 'mine': missing file {tmp}/nothere.csv (datasets.mine.train: "
         "nothere.csv, relative to data_dir: {tmp})\n"
         "  what it is: a pairs file of your own (csv, tsv, jsonl or parquet)\n"
         "  put the file there, or point `datasets.mine.train` (or `data_dir`) at it\n"),
]


@pytest.mark.parametrize("case", ISSUE56_CASES, ids=[c.name for c in ISSUE56_CASES])
def test_issue56_error_table(case, tmp_path, monkeypatch, capsys):
    test_error_table(case, tmp_path, monkeypatch, capsys)


def _bad_results(tmp: Path, make: str) -> Path:
    path = tmp / "results" / "x.json"
    path.parent.mkdir(exist_ok=True)
    if make == "folder":
        path.mkdir()
    else:
        path.write_bytes(b'{"experiment": "caf\xe9"}')
    return path


BAD_RESULTS = {"folder": "results/x.json: is a directory, not a results file; remove or rename it",
               "latin-1": "results/x.json:1: not valid utf-8 text (byte 0xe9 at byte offset 19); not as collect-results "
                          "wrote it: collect it again from the artifacts (`snakemake results/x.json` after deleting it, "
                          "or `augsbert collect-results`); nothing was published"}


@pytest.mark.parametrize("make", list(BAD_RESULTS))
def test_s9_s10_verify_names_a_results_file_not_utf8_or_a_folder(make, tmp_path, monkeypatch, capsys):
    """Issue 56 S9, S10: `augsbert verify` ended in UnicodeDecodeError / IsADirectoryError over results/x.json."""
    monkeypatch.chdir(tmp_path)
    prepare_lee(tmp_path)
    _bad_results(tmp_path, make)
    capsys.readouterr()
    assert main(["-q", "verify"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == BAD_RESULTS[make] and "Traceback" not in out + err
    assert out.splitlines()[1] == "1 results file(s) under results not as collected (not deleted: collect them again)"


@pytest.mark.parametrize("make", list(BAD_RESULTS))
def test_s9_s10_render_table_names_a_results_file_not_utf8_or_a_folder(make, tmp_path, monkeypatch):
    """Issue 56 S9, S10: render-table ended in a traceback (non-UTF-8), or said "no results file yet" of a folder."""
    from augsbert.reporting import tables
    from augsbert.store.artifacts import DamagedArtifactError

    monkeypatch.chdir(tmp_path)
    _bad_results(tmp_path, make)
    grid = {"grid": "g", "experiments": ["x"], "rows": [], "columns": [], "metrics": []}
    with pytest.raises(DamagedArtifactError) as err:
        tables.run(grid, "results", Path("results/tables/g.md"))
    assert str(err.value) == BAD_RESULTS[make]


# A stand-in for Snakemake under `augsbert run`: on SIGINT it says so, takes a moment to stop its jobs, and fails
SNAKEMAKE_STANDIN = """
import signal, sys, time
def stop(*_):
    print("standin: stopping its jobs", file=sys.stderr, flush=True)
    time.sleep(0.5)
    print("standin: stopped", file=sys.stderr, flush=True)
    sys.exit(1)
signal.signal(signal.SIGINT, stop)
print("standin: running", file=sys.stderr, flush=True)
time.sleep(120)
"""


def test_r10_ctrl_c_in_augsbert_run_waits_for_snakemake_and_says_how_to_continue(tmp_path):
    """Issue 56 R10, I1: Ctrl-C during `augsbert run` ended in a KeyboardInterrupt traceback while Snakemake, cut
    off from its console, went on stopping its jobs. Now the console is passed on until Snakemake has ended, then
    one line says what was kept and how to continue; exit code 130. A real SIGINT to the process group, as a
    terminal sends it."""
    import signal

    cfg = config(tmp_path)
    code = (f"import sys\nimport augsbert.face.cli as cli\nreal = cli.run_snakemake\n"
            f"cli.run_snakemake = lambda command: real([sys.executable, '-c', {SNAKEMAKE_STANDIN!r}])\n"
            f"sys.exit(cli.main(['run', {cfg!r}, 'demo_zeroshot']))")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line == "standin: running\n":
            os.killpg(proc.pid, signal.SIGINT)
            break
    rest = proc.stderr.read()
    assert proc.wait(timeout=60) == 130
    assert rest == ("standin: stopping its jobs\nstandin: stopped\n"
                    "augsbert run: interrupted (Ctrl-C); Snakemake stopped its jobs. Every artifact finished before is "
                    "kept, and a job cut short wrote none (a training job keeps its checkpoints in "
                    "artifacts/.checkpoints/).\n"
                    f"To continue, run the same command again: augsbert run {cfg} demo_zeroshot\n")


def test_r10_ctrl_c_in_augsbert_rehearse_says_what_was_kept(tmp_path, monkeypatch, capsys):
    import augsbert.run.rehearse as rehearse

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rehearse, "run", interrupted)
    assert main(["rehearse", "results/demo_zeroshot.json"]) == 130
    assert capsys.readouterr().err == (
        "augsbert rehearse: interrupted (Ctrl-C); the jobs it finished are kept under .rehearsal/ (log: "
        ".rehearsal/rehearse.log).\nTo continue, run the same command again: augsbert rehearse "
        "results/demo_zeroshot.json\n")


@pytest.mark.parametrize("checkpoint", [None, "trainer/checkpoint-20"])
def test_i1_ctrl_c_in_a_job_command_names_what_it_left(checkpoint, tmp_path, monkeypatch, capsys):
    """Issue 56 I1: a job command (`augsbert teacher ...`) under Ctrl-C: one line, exit code 130; no artifact and no
    partial folder, the checkpoints a training job saved kept (the same command resumes from them)."""
    import augsbert.jobs.data as stage
    from augsbert.store.artifacts import artifact_dir, checkpoint_dir

    def interrupted(spec, out, force=False):  # cut short while it writes its partial folder
        with artifact_dir(out, spec, force) as tmp:
            (tmp / "train.parquet").write_bytes(b"PAR1")
            raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stage, "run", interrupted)
    lee = lee_path()
    if checkpoint:
        (checkpoint_dir(lee) / checkpoint).mkdir(parents=True)
    assert main(["-q", "prepare-data", "--config", str(CONFIG), "--experiment", "demo_zeroshot"]) == 130
    kept = (f"Its checkpoints in {checkpoint_dir(lee)} are kept: the same command resumes from the last one (step 20)."
            if checkpoint else "The same command starts it again (no checkpoint was saved yet).")
    assert capsys.readouterr().err == (f"augsbert prepare-data: interrupted (Ctrl-C); {lee} was not written (its "
                                       f"partial files are removed). {kept}\n")
    assert not Path(lee).exists() and not list(Path(lee).parent.glob(".*partial*"))


@pytest.mark.parametrize("argv, targets", [
    (["--config", "{cfg}", "results/x.json"], ["results/x.json"]),
    (["--config", "{cfg}", "results/tables/g.md", "artifacts/teacher/lee.cbe-0123456789"],
     ["results/tables/g.md", "artifacts/teacher/lee.cbe-0123456789"]),
    (["--config", "{cfg}", "demo_zeroshot"], ["results/demo_zeroshot.json"]),
    (["results/x.json", "--config", "{cfg}"], ["results/x.json"]),
    (["demo_zeroshot"], ["results/demo_zeroshot.json"]),
])
def test_r8_rehearse_takes_a_target_written_after_config(argv, targets, tmp_path, monkeypatch):
    """Issue 56 R8: `augsbert rehearse --config my.yaml results/x.json` ended in argparse's "the following arguments
    are required: TARGET" (--config takes several files, so it took the target). A trailing target (or an
    experiment's or grid's name, as `augsbert run` takes them) is taken back as the target."""
    import augsbert.run.rehearse as rehearse

    calls = []
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rehearse, "run", lambda targets, configs, **kwargs: calls.append((targets, configs)) or 0)
    cfg = config(tmp_path)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text((tmp_path / "config.yaml").read_text())  # the project's own
    assert main(["rehearse", *[a.format(cfg=cfg) for a in argv]]) == 0
    assert calls == [(targets, [cfg] if "--config" in argv else None)]


AFTER_CONFIG = ("--config takes config YAML files, and every word after it up to the next option: write a name or a "
                "target before --config, or as the option it is (e.g. --experiment NAME)")


@pytest.mark.parametrize("argv, expected", [
    (["rehearse", "--config", "{cfg}"],
     "augsbert rehearse: error: no TARGET given (a results file, a table, an artifact, or an experiment's or grid's "
     "name): augsbert rehearse results/<experiment>.json [--config my.yaml]"),
    (["plan", "--config", "{cfg}", "demo_zeroshot"],
     f"augsbert plan: error: --config demo_zeroshot: no such config file; {AFTER_CONFIG}"),
    (["plan", "--config", "{cfg}", "results/x.json"],
     "augsbert plan: error: --config results/x.json: it is a results file; --config takes config YAML files "
     "(config/config.yaml, a file of your own), and every word after it up to the next option: write a name or a "
     "target before --config, or as the option it is (e.g. --experiment NAME)"),
    (["export", "--config", "{cfg}", "demo_zeroshot", "--to", "x"],
     "augsbert export: error: --config needs --experiment; --config took demo_zeroshot as one more config file (it "
     "takes every word after it up to the next option): write --experiment demo_zeroshot"),
    (["render-table", "--config", "{cfg}", "results/tables/g.md"],
     "augsbert render-table: error: --config needs --grid; --config took results/tables/g.md as one more config "
     "file (it takes every word after it up to the next option): write --grid g"),
    (["fetch", "--config", "{cfg}", "demo_zeroshot"],
     "augsbert fetch: error: fetch needs --experiment; --config took demo_zeroshot as one more config file (it "
     "takes every word after it up to the next option): write --experiment demo_zeroshot"),
    (["teacher", "--config", "{cfg}", "demo_zeroshot"],
     "augsbert teacher: error: --config needs --experiment; --config took demo_zeroshot as one more config file (it "
     "takes every word after it up to the next option): write --experiment demo_zeroshot"),
])
def test_r8_a_name_or_target_after_config_says_how_it_was_read(argv, expected, tmp_path, monkeypatch, capsys):
    """Issue 56 R8, every command with a multi-file --config: a name or target typed after it is named as read
    (before: "config file not found: demo_zeroshot", "--config needs --experiment")."""
    monkeypatch.chdir(tmp_path)
    cfg = config(tmp_path)
    capsys.readouterr()
    try:
        code = main([a.format(cfg=cfg) for a in argv])
    except SystemExit as stop:  # argparse's p.error
        code = stop.code
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == expected


def test_s7_an_artifact_copied_into_another_stages_folder_is_named_by_verify(tmp_path, monkeypatch, capsys):
    """Issue 56 S7: a zero_shot artifact copied into artifacts/suite/ (same key) passed verify: its spec.json's key
    matched the folder, and nothing compared its stage with the folder it lies in. Here the data artifact, copied
    into artifacts/suite/, the cheapest artifact to make; the check is the same for every stage."""
    import shutil

    monkeypatch.chdir(tmp_path)
    prepare_lee(tmp_path)
    lee = Path(lee_path())
    copy = Path("artifacts/suite") / lee.name
    shutil.copytree(lee, copy)
    capsys.readouterr()
    assert main(["-q", "verify"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[0] == (f"{copy}: its spec.json says it is a data artifact, not a suite one as its folder "
                                   "artifacts/suite/ says")
    assert out.splitlines()[-1] == "2 artifact(s) checked under artifacts, 1 damaged"


def test_a_pair_shared_by_dev_and_test_is_called_so_not_seen_in_training(tmp_path, monkeypatch):
    """Issue 56: the warning for pairs in both dev and test said "a test pair seen in training"; the data job
    compares the splits pairwise (the same two texts, either order), so it says which splits share them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tr.csv").write_text("sentence1,sentence2,score\na,b,0.1\nc,d,0.5\n")
    (tmp_path / "dv.csv").write_text("sentence1,sentence2,score\ne,f,0.2\ng,h,0.9\n")
    (tmp_path / "te.csv").write_text("sentence1,sentence2,score\nf,e,0.3\na,b,0.4\ni,j,1\n")
    cfg = mine(tmp_path, train="tr.csv", dev="dv.csv", test="te.csv")
    assert main(["-q", "prepare-data", "--config", cfg, "--experiment", "e"]) == 0
    metrics = json.loads(next(Path("artifacts/data").glob("mine-*/metrics.json")).read_text())
    assert metrics["warnings"] == [
        "mine: 1 pair(s) occur in both train/test (a test pair seen in training inflates its score)",
        "mine: 1 pair(s) occur in both dev/test (shared by dev and test: the epoch picked on dev was picked on these "
        "test pairs, which inflates the test score)"]


@pytest.mark.parametrize("backend", ["onnx", "openvino"])
def test_a_missing_backend_points_at_the_deploy_environment_not_at_a_downgrading_pip_install(backend, tmp_path,
                                                                                            monkeypatch):
    """Issue 56: `--backend onnx` without its packages advised `pip install 'sentence-transformers[onnx]'`, which
    pulls optimum-onnx and with it older transformers and sentence-transformers into .venv (docs/guide/compact.md
    "Packages"). It names the separate deploy environment instead (issue 58: the export runs there)."""
    from augsbert.export.backends import backend_available

    monkeypatch.setenv("AUGSBERT_DEPLOY_PYTHON", str(tmp_path / "no-deploy-env" / "python"))
    why = backend_available(backend)
    assert "pip install" not in why and why == (
        f"--backend {backend} runs in the deploy environment, which is missing (AUGSBERT_DEPLOY_PYTHON="
        f"{tmp_path / 'no-deploy-env' / 'python'} is not a file): create it with `make deploy-env` in the augsbert "
        "checkout")
