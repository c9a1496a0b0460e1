import json
import re
from pathlib import Path

import pandas as pd
import pytest

from augsbert.face.cli import main
from augsbert.config.load import ConfigError
from augsbert.evaluation import correlations
from conftest import REPO

CONFIG = str(REPO / "config" / "config.yaml")
MINIMAL_SPEC = json.dumps({"stage": "data", "params": {"dataset": "x", "loader": "lee"}, "inputs": {}})  # what a lock test needs of a spec


def test_every_command_has_help(capsys):
    for command in ["prepare-data", "evaluate-zero-shot", "adapt-mlm", "train-teacher", "sample-pairs", "label-pairs",
                    "train-student", "evaluate-suite", "collect-results", "render-table", "plan", "list", "export",
                    "fetch", "config-reference", "run"]:
        with pytest.raises(SystemExit) as exit_:
            main([command, "--help"])
        assert exit_.value.code == 0
        assert "usage: augsbert" in capsys.readouterr().out


def test_help_imports_no_table_or_model_library():
    """`augsbert --help` and a stage's `--help` stay quick: no pandas, numpy, torch or transformers (issue 25)."""
    import subprocess
    import sys

    code = ("import contextlib, io, sys\nfrom augsbert.face.cli import main\n"
            "for argv in (['--help'], ['student', '--help'], ['pretrain', '--help']):\n"
            "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
            "        main(argv)\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pandas', 'numpy', 'torch', 'transformers'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def lee_artifact(root: Path) -> Path:
    """Where the Lee data artifact of demo_zeroshot goes under `root`: artifacts/data/<its key> (a folder named
    otherwise is refused: its name must say what it holds)."""
    from augsbert.config.load import load_config
    from augsbert.plan import Plan

    plan = Plan(load_config(CONFIG, lazy=True))
    return root / plan.node(plan.experiment("demo_zeroshot").runs[42]["data"]).path


def test_prepare_data_standalone_and_no_overwrite(tmp_path, capsys):
    out = lee_artifact(tmp_path)
    assert main(["-q", "prepare-data", "--config", CONFIG, "--experiment", "demo_zeroshot", "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["sizes"] == {"train": 300, "dev": 45, "test": 105, "unlabeled": 300}
    spec = json.loads((out / "spec.json").read_text())
    assert spec["stage"] == "data" and spec["params"]["dataset"] == "lee"
    before = (out / "test.parquet").read_bytes()
    capsys.readouterr()
    # the same key again: finished already, nothing written (issue 56 I4; it was refused, exit 2)
    assert main(["-q", "prepare-data", "--config", CONFIG, "--experiment", "demo_zeroshot", "--out", str(out)]) == 0
    assert "is finished already" in capsys.readouterr().err
    assert (out / "test.parquet").read_bytes() == before


def test_zero_shot_stage_matches_direct_computation(tmp_path, tiny_model):
    data = lee_artifact(tmp_path)
    main(["-q", "prepare-data", "--config", CONFIG, "--experiment", "demo_zeroshot", "--out", str(data)])
    spec = {"stage": "zero_shot", "key": "t", "inputs": {"data": str(data)},
            "params": {"model": tiny_model, "batch_size": 16, "max_length": 128}}
    out = tmp_path / "zs"
    assert main(["-q", "evaluate-zero-shot", "--spec", json.dumps(spec), "--out", str(out), "--device", "cpu"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    pred = pd.read_parquet(out / "predictions.parquet")
    assert len(pred) == 105 and metrics["test"]["n_pairs"] == 105 and metrics["device"] == "cpu"
    assert metrics["test"]["spearman"] == pytest.approx(correlations(pred["predicted"], pred["gold"])["spearman"])

    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(tiny_model, device="cpu")
    model.max_seq_length = 128
    row = pred.iloc[3]
    a, b = model.encode([row["sentence1"], row["sentence2"]], normalize_embeddings=True)
    assert float(a @ b) == pytest.approx(row["predicted"], abs=1e-5)

    # the suite stage on an STS file holding the same test pairs reproduces the zero-shot Spearman
    sts = tmp_path / "sts12.tsv"
    sts.write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"{r.sentence1}\t{r.sentence2}\t{5 * r.gold}\n" for r in pred.itertuples()))
    suite_spec = {"stage": "suite", "key": "s", "inputs": {"data": str(data)},
                  "params": {"model": tiny_model, "batch_size": 16, "max_length": 128, "sts": {"sts12": str(sts)},
                             "useb": {}, "skipped": {"topic": "the dataset has no topic labels"},
                             "positive_threshold": 0.8}}
    assert main(["-q", "evaluate-suite", "--spec", json.dumps(suite_spec), "--out", str(tmp_path / "suite"),
                 "--device", "cpu"]) == 0
    suite = json.loads((tmp_path / "suite" / "metrics.json").read_text())
    assert suite["summary"]["sts12"] == pytest.approx(metrics["test"]["spearman"], abs=1e-6)
    assert suite["summary"]["sts_avg"] == suite["summary"]["sts12"] and suite["sts"]["sts_avg_tasks"] == ["sts12"]
    assert suite["skipped"] == {"topic": "the dataset has no topic labels"}
    assert suite["diagnostics"]["n_positive_pairs"] == int((pred["gold"] >= 0.8).sum())


def test_bad_spec_and_missing_data_are_clear(tmp_path, capsys):
    spec = {"stage": "data", "key": "x", "inputs": {},
            "params": {"dataset": "bws_cross_topic", "loader": "bws_cross_topic", "on_bad_rows": "error",
                       "unlabeled": None, "data_dir": str(tmp_path), "path": "bws/BWS_Argument_Similarity_Corpus.csv",
                       "train_topics": ["Cloning"], "dev_topics": ["Abortion"], "test_topics": ["Gun control"]}}
    assert main(["prepare-data", "--spec", json.dumps(spec), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "missing file" in err and "BWS_Argument_Similarity_Corpus.csv" in err
    assert not (tmp_path / "o").exists()
    assert main(["prepare-data", "--spec", "{not json", "--out", str(tmp_path / "o")]) == 2
    assert "augsbert prepare-data: error: --spec: not valid JSON" in capsys.readouterr().err
    # issue 26 case 5: a missing @file and a spec that is not an object end the same way, not with a traceback
    assert main(["prepare-data", "--spec", f"@{tmp_path / 'nope.json'}", "--out", str(tmp_path / "o")]) == 2
    assert f"--spec @{tmp_path / 'nope.json'}: cannot read the spec file (FileNotFoundError" in capsys.readouterr().err
    assert main(["prepare-data", "--spec", "[1, 2]", "--out", str(tmp_path / "o")]) == 2
    assert "a spec is a JSON object" in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert main(["prepare-data", "--spec", "{}", "--out", str(tmp_path / "o")]) == 2
    assert "a stage spec holds `params` and `inputs` as JSON objects; `params` is missing" in capsys.readouterr().err


def test_plan_command_prints_keys(capsys):
    assert main(["plan", "--config", CONFIG, "--experiment", "demo_zeroshot", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert set(plan["demo_zeroshot"]["runs"]["42"]) == {"data", "zero_shot", "zero_shot_suite"}


LIST_CONFIG = """\
data_dir: {tmp}/raw
datasets:
  lee: {{loader: lee}}
  mine: {{loader: pairs_file, train: train.csv, test: test.csv}}
experiments:
  demo: {{dataset: lee, models: [zero_shot], description: "Lee,   zero-shot"}}
  transfer: {{dataset: lee, source: mine, models: [zero_shot, lower_bound]}}
grids:
  g: {{description: two columns, columns: {{lee: {{dataset: lee}}, mine: {{dataset: mine}}}}, axes: {{k: {{a: {{}}}}}}}}
"""


def words(out: str) -> list[list[str]]:
    """The output's lines split at runs of two or more spaces (its columns)."""
    import re

    return [re.split(r"\s{2,}", line) for line in out.splitlines()]


def test_list_names_each_item_with_its_data_and_whether_it_is_present(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(LIST_CONFIG.format(tmp=tmp_path))
    monkeypatch.chdir(tmp_path)  # no config/config.yaml here for --config to merge c.yaml over
    monkeypatch.setenv("COLUMNS", "1000")
    assert main(["list", "experiments", "--config", str(cfg)]) == 0
    assert words(capsys.readouterr().out) == [
        ["EXPERIMENT", "DATA", "DESCRIPTION"],
        ["demo", "lee: present", "Lee, zero-shot"],
        ["transfer", "lee: present, mine: MISSING"],  # domain transfer: the target and the source
        ["g.a.lee", "lee: present", "grid g: k=a, column lee"],
        ["g.a.mine", "mine: MISSING", "grid g: k=a, column mine"]]
    assert main(["list", "grids", "--config", str(cfg)]) == 0
    assert words(capsys.readouterr().out) == [["GRID", "DATA", "DESCRIPTION"],
                                              ["g", "lee: present, mine: MISSING", "two columns"]]
    assert main(["list", "datasets", "--config", str(cfg)]) == 0
    rows = words(capsys.readouterr().out)
    assert rows[0] == ["DATASET", "LOADER", "DATA", "DESCRIPTION"] and rows[1][:3] == ["lee", "lee", "present"]
    assert rows[2] == ["mine", "pairs_file", f"MISSING (missing file {tmp_path}/raw/train.csv (datasets.mine.train: "
                                             f"train.csv, relative to data_dir: {tmp_path}/raw))",
                       "a pairs file of your own (csv, tsv, jsonl or parquet)"]
    (tmp_path / "raw").mkdir()
    for name in ("train.csv", "test.csv"):  # present = every file the loader reads is there
        (tmp_path / "raw" / name).write_text("sentence1,sentence2,score\n")
    assert main(["list", "--config", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "MISSING" not in out and out.startswith("# experiments (4)\n") and "\n# grids (1)\n" in out
    assert "\n# datasets (2)\n" in out and ["mine", "pairs_file", "present"] in [r[:3] for r in words(out)]
    with pytest.raises(SystemExit):
        main(["list", "models", "--config", str(cfg)])
    assert ("'models' is neither a kind (experiments, grids, datasets) nor a config file"
            in capsys.readouterr().err)


def test_plan_prints_a_table_of_artifacts_and_whether_they_are_built(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(LIST_CONFIG.format(tmp=tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--config", str(cfg), "--experiment", "transfer", "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["transfer"]["runs"]["42"]
    Path(runs["data"]["path"]).mkdir(parents=True)  # a finished artifact folder
    assert main(["plan", "--config", str(cfg), "--experiment", "transfer"]) == 0
    rows = words(capsys.readouterr().out)
    assert rows[0][0].startswith("experiment transfer (config ") and rows[0][0].endswith(", seeds 42)")
    assert rows[1] == ["SEED", "ROLE", "STAGE", "ARTIFACT", "BUILT"]
    assert rows[2:] == [["42", role, run["stage"], run["path"], "yes" if role == "data" else "no"]
                        for role, run in runs.items()]
    assert [r[1] for r in rows[2:]] == ["data", "source_data", "lower_bound", "zero_shot", "zero_shot_suite",
                                        "lower_bound_suite"]


def test_role_and_seed_select_the_planned_node():
    import argparse

    from augsbert.face.cli import _planned_spec

    args = argparse.Namespace(config=CONFIG, experiment="demo_cbe_distill", role=None, seed=None)
    spec, path = _planned_spec(args, "student")
    assert spec["inputs"].keys() == {"data", "labels"} and spec["params"]["use_gold_labels"] is False
    args.role = "lower_bound"
    spec, _ = _planned_spec(args, "student")
    assert spec["inputs"].keys() == {"data"} and spec["params"]["use_gold_labels"] is True
    args.seed = 7
    with pytest.raises(SystemExit, match="no seed 7"):
        _planned_spec(args, "student")


def test_stage_job_holds_the_artifact_lock_before_its_runner_starts(tmp_path, monkeypatch):
    """A second `augsbert` process on the same key stops while the first job is still reading its inputs."""
    import os
    import subprocess
    import sys

    import augsbert
    from augsbert.face.cli import EXIT_LOCKED
    from augsbert.jobs import data as data_job

    out = tmp_path / "data" / "d-0123456789"
    seen = {}

    def runner(spec, out_, force=False):  # no artifact_dir yet: only the CLI's lock can stop the second process
        seen["second"] = subprocess.run(
            [sys.executable, "-m", "augsbert", "-q", "prepare-data", "--spec", MINIMAL_SPEC, "--out", str(out)],
            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(Path(augsbert.__file__).parents[1])})
        return {}

    monkeypatch.setattr(data_job, "run", runner)
    assert main(["-q", "prepare-data", "--spec", MINIMAL_SPEC, "--out", str(out)]) == 0
    second = seen["second"]
    assert second.returncode == EXIT_LOCKED, second.stderr
    assert f"augsbert prepare-data: error: {out} is being written by pid {os.getpid()} on host " in second.stderr
    assert "Traceback" not in second.stderr


def test_a_spec_must_be_its_stages_and_match_its_key(tmp_path, capsys):
    """Issue 26 cases 5 and 7: another stage's spec was run, and a spec with changed params was computed and
    stored under its old key."""
    from augsbert.jobs.specs import check_stage_spec
    from conftest import plan_shipped

    plan = plan_shipped({}, plan=("demo_cbe",))
    for key in plan.experiment("demo_cbe").runs[42].values():  # every planned spec passes
        check_stage_spec(plan.spec(key), plan.node(key).stage)
    teacher = plan.spec(plan.experiment("demo_cbe").runs[42]["teacher"])
    with pytest.raises(ConfigError, match="a spec of stage 'teacher', given to `augsbert student`"):
        check_stage_spec(teacher, "student")
    edited = {**teacher, "params": {**teacher["params"], "lr": 1.0}}
    with pytest.raises(ConfigError, match="not those its key .* was made from"):
        check_stage_spec(edited, "teacher")
    runtime_only = {**teacher, "params": {**teacher["params"], "eval_batch_size": 7}}  # leaves the key
    check_stage_spec(runtime_only, "teacher")
    spec_file = tmp_path / "t.json"
    spec_file.write_text(json.dumps(edited))
    assert main(["-q", "teacher", "--spec", f"@{spec_file}", "--out", str(tmp_path / "t")]) == 2
    assert f"--spec @{spec_file}: its params or inputs are not those" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()


def test_plan_into_a_closed_pipe_stops_quietly():
    """`augsbert plan | head -1`: the reader leaves early; the command ends with 141 (SIGPIPE) and no traceback."""
    import fcntl
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)  # one page: the plan (8 kB) cannot all wait in the pipe
    proc = subprocess.Popen([sys.executable, "-m", "augsbert", "plan", "--config", CONFIG, "--experiment", "demo_cbe",
                             "--json"], stdout=write, stderr=subprocess.PIPE, cwd=REPO)
    os.close(write)
    first = os.read(read, 2)  # two bytes, unbuffered: the rest of the first page stays in the pipe
    os.close(read)  # the pipe's reader is gone before the plan is printed
    err = proc.stderr.read().decode()
    assert first == b"{\n", first
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_list_wraps_to_the_terminal_and_cuts_nothing_and_long_keeps_one_line(capsys, monkeypatch):
    """Issue 42: fits the terminal's width, `--long` one whole line per item. Issue 56: it cut every description
    to 24 characters (and long names, which then could not be typed) on an 80-column terminal; now nothing is
    cut: a description is wrapped in its column, or below the item's other cells where they leave it too little
    room, and the text read back is the whole description."""
    monkeypatch.chdir(REPO)
    assert main(["list", "grids", "--long"]) == 0
    whole = capsys.readouterr().out.splitlines()[1:]
    items = {line.split()[0]: " ".join(re.split(r"\s{2,}", line)[2:]) for line in whole}
    for columns in (60, 80, 250):
        monkeypatch.setenv("COLUMNS", str(columns))
        assert main(["list", "grids"]) == 0
        out = capsys.readouterr().out
        assert max(map(len, out.splitlines())) <= columns and "…" not in out
        text = " ".join(out.split())
        for name, description in items.items():  # each name, and its whole description, in the wrapped text
            assert f" {name} " in text and " ".join(description.split()) in text
    assert main(["list", "grids"]) == 0
    assert capsys.readouterr().err == "\n(config/config.yaml only; yours too: augsbert list my.yaml)\n"


def test_list_takes_a_config_file_of_your_own_as_it_takes_a_kind(tmp_path, capsys, monkeypatch):
    """Issue 56: `augsbert list` showed a user's own experiments only with --config; a file given like a kind
    (`augsbert list my.yaml`, `augsbert list experiments my.yaml`) is read as --config is."""
    mine = tmp_path / "my.yaml"
    mine.write_text("experiments:\n  mine_x: {dataset: lee, models: [zero_shot], description: mine}\n")
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("COLUMNS", "200")
    for argv in (["list", str(mine)], ["list", "experiments", str(mine)], ["list", str(mine), "--long"]):
        assert main(argv) == 0
        out, err = capsys.readouterr()
        assert ["mine_x", "lee: present", "mine"] in words(out) and err == ""


def test_run_builds_the_snakemake_call_and_an_unknown_name_is_one_line(tmp_path, capsys, monkeypatch):
    """`augsbert run my.yaml NAME` (issue 50 item 3): the `--` a user forgets after --configfile is written for
    them; an experiment becomes results/<name>.json, a grid results/tables/<grid>.md; a name of neither (or a
    target left out) is one line and exit status 2, before Snakemake starts."""
    import sys

    from augsbert.face import cli

    mine = tmp_path / "my.yaml"
    mine.write_text("experiments:\n  mine_zero: {dataset: lee, models: [zero_shot]}\n")
    monkeypatch.chdir(REPO)
    calls = []
    monkeypatch.setattr(cli, "run_snakemake", lambda command: calls.append(command) or 0)
    # a real run first removes the lock files a killed run left (augsbert.store.live_runs), a dry run does not
    from augsbert.store.live_runs import StaleLocks

    monkeypatch.setattr(cli, "clear_stale_locks", lambda: calls.append("clear") or StaleLocks(2))
    assert main(["run", str(mine), "mine_zero", "demo_quick", "--cores", "3", "-n"]) == 0
    assert calls == [[sys.executable, "-m", "snakemake", "--cores", "3", "--configfile", str(mine), "--dry-run", "--",
                      "results/mine_zero.json", "results/tables/demo_quick.md"]]
    capsys.readouterr()
    assert main(["run", str(mine), "results/mine_zero.json"]) == 0 and calls[-1][-2:] == ["--", "results/mine_zero.json"]
    assert calls[-2] == "clear" and capsys.readouterr().err.startswith(
        "augsbert: removed 2 lock file(s) in .snakemake/locks/ that no live run holds (the run that left them was "
        "stopped: killed, its session lost, or the machine went down); what it finished is kept, and a job it cut "
        "short runs again\n")
    assert main(["run", str(mine), "mine_zer"]) == 2
    assert capsys.readouterr().err == ("augsbert run: error: 'mine_zer' is no experiment or grid of the config (did you "
                                       "mean 'mine_zero'?)\n")
    assert main(["run", str(tmp_path / "absent.yaml"), "mine_zero"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert len(calls) == 3


def test_run_says_a_renamed_section_once_and_its_snakemake_stays_quiet(tmp_path, capsys, monkeypatch):
    """`augsbert run` read the config and said a renamed section's notice, then the Snakemake it starts read the
    same config and said it again: the child is started with AUGSBERT_RENAMES_SAID=1, which silences it."""
    import os

    from augsbert.config.renames import SAID
    from augsbert.face import cli

    mine = tmp_path / "my.yaml"
    mine.write_text("experiments:\n  old: {dataset: lee, models: [zero_shot], evaluation: {suites: [sts]}}\n")
    monkeypatch.chdir(REPO)
    monkeypatch.delenv(SAID, raising=False)
    seen = []
    monkeypatch.setattr(cli, "run_snakemake", lambda command: seen.append(os.environ.get(SAID)) or 0)
    assert main(["run", str(mine), "old", "-n"]) == 0
    notices = [line for line in capsys.readouterr().err.splitlines() if "is now `suite`" in line]
    assert notices == [f"{mine}: experiments.old.evaluation is now `suite`; read as `suite` (rename it)"]
    assert seen == ["1"]  # what the child inherits
    from augsbert.config.load import load_configs

    load_configs([str(mine)], lazy=True)  # as the child reads it
    assert "is now" not in capsys.readouterr().err


def test_run_shows_the_failed_jobs_own_error_last(tmp_path, capsys):
    """`augsbert run`: below Snakemake's report of a failed job, the job's own one-line error from its log."""
    import sys

    from augsbert.scheduling.snakemake_console import run_snakemake

    log = tmp_path / "data.log"
    log.write_text("INFO reading\naugsbert data: error: train.csv:1: header lacks column(s) ['score'] (found 3 "
                   "column(s); did you mean 'scor' for 'score'?)\n")
    fake = (f"import sys; print('Error in rule data:', file=sys.stderr); print('    log: {log} (check log file(s) for "
            "error details)', file=sys.stderr); sys.exit(1)")
    assert run_snakemake([sys.executable, "-c", fake]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == (f"augsbert: a job failed ({log}): augsbert data: error: train.csv:1: header lacks column(s) "
                       "['score'] (found 3 column(s); did you mean 'scor' for 'score'?)")
    assert err[:2] == ["Error in rule data:", f"    log: {log} (check log file(s) for error details)"]


def test_snakemakes_rule_exception_report_of_a_failed_command_is_dropped():
    import logging

    from augsbert.scheduling.snakemake_console import QuietRuleExceptions

    def record(msg, exception):
        made = logging.LogRecord("snakemake.logging", logging.ERROR, "f", 1, msg, None, None)
        made.exception = exception
        return made

    quiet = QuietRuleExceptions()
    assert not quiet.filter(record("RuleException:\nCalledProcessError in file \"stages.smk\", line 46:\nCommand "
                                   "'augsbert data ...' returned non-zero exit status 2.", "RuleException"))
    assert quiet.filter(record("RuleException:\nKeyError in file \"common.smk\", line 9:\n'key'", "RuleException"))
    assert quiet.filter(record("WorkflowError:\nAt least one job did not complete successfully.", "WorkflowError"))
    assert quiet.filter(record("Error in rule data:", None))


def test_run_of_a_job_failing_on_a_bad_column_ends_with_its_error(tmp_path, monkeypatch, capsys):
    """A real `augsbert run` whose data job fails on a column its file lacks: no RuleException block, and the
    job's one-line error (naming the columns found) is the console's last line."""
    from workflow_helpers import checkout, keep_experiments

    workdir = checkout(tmp_path / "proj")
    keep_experiments(workdir, "demo_cbe")
    (tmp_path / "train.csv").write_text("sentence1,sentence2,score\na b,c d,1\ne f,g h,0\n")
    mine = tmp_path / "my.yaml"
    mine.write_text(f"datasets:\n  mine: {{loader: pairs_file, train: {tmp_path / 'train.csv'}, "
                    f"test: {tmp_path / 'train.csv'}, columns: {{score: relatedness_score}}}}\n"
                    "experiments:\n  mine_zero: {dataset: mine, models: [zero_shot]}\n")
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("AUGSBERT_WARM", "0")
    capsys.readouterr()
    assert main(["run", str(mine), "mine_zero", "--cores", "1"]) == 1
    err = capsys.readouterr().err
    assert "RuleException" not in err and "CalledProcessError" not in err
    assert err.splitlines()[-1].endswith(
        f"augsbert data: error: {tmp_path / 'train.csv'}:1: header lacks column(s) ['relatedness_score']; "
        "found: 'sentence1', 'sentence2', 'score'")


def test_i4_a_job_whose_artifact_is_finished_already_succeeds_and_leaves_it(tmp_path, monkeypatch, capsys):
    """Issue 56 I4: after `snakemake --unlock` beside a live run, a second run's job found the artifact the first run
    had finished, failed ("already exists; refusing to overwrite"), and Snakemake removed that finished artifact as
    the failed job's output. Same key, same content: the job now succeeds without writing, also when it waited for
    the lock of the writer that finished it; a damaged artifact or `--force` is not taken for finished."""
    import os
    import subprocess
    import sys
    import time

    import augsbert
    from augsbert.jobs import data as data_job

    monkeypatch.chdir(tmp_path)
    command = ["-q", "data", "--config", CONFIG, "--experiment", "demo_zeroshot"]
    assert main(command) == 0
    data = next(p for p in (tmp_path / "artifacts" / "data").iterdir() if not p.name.startswith("."))

    def state() -> dict:
        return {p.relative_to(data).as_posix(): (p.stat().st_ino, p.stat().st_mtime_ns) for p in data.rglob("*")}

    before = state()
    capsys.readouterr()
    assert main(command) == 0
    err = capsys.readouterr().err
    assert (f"augsbert data: artifacts/data/{data.name} is finished already (same key, same content: another run or "
            "job wrote it); nothing to do, it is left as it is") in err, err
    assert state() == before
    # a writer finishes it while a second job waits for its lock: the second then finds it finished
    os.rename(data, tmp_path / "kept")
    real = data_job.run
    second, seen = tmp_path / "second.err", {}

    def runner(spec, out, force=False):
        seen["proc"] = subprocess.Popen(
            [sys.executable, "-m", "augsbert", "data", "--config", CONFIG, "--experiment", "demo_zeroshot",
             "--wait-lock", "120"], stderr=open(second, "w"), stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(Path(augsbert.__file__).parents[1])})
        for _ in range(600):
            if "waiting up to 120 s" in second.read_text() or seen["proc"].poll() is not None:
                break
            time.sleep(0.05)
        return real(spec, out, force)

    monkeypatch.setattr(data_job, "run", runner)
    assert main(command) == 0
    assert seen["proc"].wait(120) == 0, second.read_text()
    text = second.read_text()
    assert "waiting up to 120 s" in text and "is finished already" in text, text
    # damaged: not finished (refused as before: `verify --repair` or --force replaces it)
    monkeypatch.setattr(data_job, "run", real)
    (data / "dev.parquet").write_bytes(b"x")
    capsys.readouterr()
    assert main(command) == 2
    assert "already exists; refusing to overwrite a finished artifact" in capsys.readouterr().err
