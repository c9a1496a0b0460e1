"""A rehearsal reads the user's project as the real run does (issue 54): a relative local model path names the
project's folder, not one below the rehearsal's root, and Snakemake's own state (its run log) stays in the root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from workflow_helpers import checkout, keep_experiments, place_standins, snakemake


def _model(folder: Path, sentence_transformers: bool) -> Path:
    """A model folder as far as planning reads one: config.json (and modules.json for a sentence-transformers
    folder), weights bytes."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 16}))
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 4 + folder.name.encode())
    if sentence_transformers:
        (folder / "modules.json").write_text("[]")
    return folder


def test_a_relative_model_path_names_the_projects_folder_in_the_rehearsals_root(tmp_path, monkeypatch):
    """In the root (`.rehearsal/`, where the rehearsal plans and its jobs run) `models/mine` was read as a hub id
    (it looks like org/name: another key, a plain-checkpoint stand-in for a sentence-transformers folder) and
    `./models/plain` as a missing folder; with the project named ($AUGSBERT_PROJECT_DIR, set by the Snakefile
    and `augsbert rehearse`) each is what the real run, in the project, reads."""
    from augsbert.config.rehearsal import PROJECT_ENV, STANDINS_ENV
    from augsbert.store.fingerprints import DigestCache, model_identity
    from augsbert.store.model_refs import reference_kind, resolve_model, standin_kind, standin_path

    project = tmp_path / "project"
    _model(project / "models" / "mine", sentence_transformers=True)
    _model(project / "models" / "plain", sentence_transformers=False)
    refs = ["models/mine", "./models/mine", "models/plain", "./models/plain"]
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    monkeypatch.delenv(STANDINS_ENV, raising=False)

    def seen() -> dict:
        return {ref: (reference_kind(ref), model_identity(ref, DigestCache(fresh=True)), standin_kind(ref),
                      resolve_model(ref)) for ref in refs}

    monkeypatch.chdir(project)
    real = seen()
    assert [v[0] for v in real.values()] == ["path"] * 4
    assert [v[2] for v in real.values()] == ["bert-st", "bert-st", "bert-hf", "bert-hf"]
    assert real["models/mine"][3] == str(project / "models" / "mine")
    (project / ".rehearsal").mkdir()
    monkeypatch.chdir(project / ".rehearsal")
    monkeypatch.setenv(PROJECT_ENV, str(project))
    assert seen() == real
    # the jobs still load stand-ins: the kind the rehearsal gave each reference
    monkeypatch.setenv(STANDINS_ENV, str(tmp_path / "standins"))
    assert resolve_model("models/mine") == standin_path("models/mine", str(tmp_path / "standins"))
    assert resolve_model("models/mine") == str(tmp_path / "standins" / "bert-st")
    # an absolute path is itself, wherever the project is
    absolute = str(project / "models" / "plain")
    monkeypatch.setenv(PROJECT_ENV, str(tmp_path / "elsewhere"))
    assert reference_kind(absolute) == "path" and standin_kind(absolute) == "bert-hf"


def _specs(root: Path, stage: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((root / "artifacts" / ".specs" / stage).glob("*.json"))]


@pytest.mark.workflow
def test_a_rehearsal_plans_relative_models_as_the_real_run_and_keeps_snakemakes_state_in_its_root(tmp_path, standins):
    """`snakemake --config rehearse=true` on a config naming local models by relative paths: the rehearsal
    stopped on `./models/plain` ("no such local directory", read below .rehearsal/), or planned `models/mine` as
    a hub id. Now its teacher and student read the identities the real plan reads, and the stand-in kinds of the
    real folders. Started with --directory (Snakemake then ignores the Snakefile's `workdir:`) it planned in the
    project itself; a real (not dry) call left Snakemake's run log in the project's .snakemake/log/."""
    project = checkout(tmp_path / "project")
    keep_experiments(project, "demo_cbe")
    config_path = project / "config" / "config.yaml"
    config = yaml.safe_load(config_path.read_text())
    config["experiments"]["demo_cbe"].update(
        {"base_model": "models/mine", "teacher": {"arch": "cbe", "base_model": "./models/plain"}})
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    _model(project / "models" / "mine", sentence_transformers=True)
    _model(project / "models" / "plain", sentence_transformers=False)
    place_standins(project, standins)

    rehearsal = snakemake(tmp_path, "-n", "--snakefile", str(project / "workflow" / "Snakefile"), "--directory",
                          str(project), "--config", "rehearse=true", "--", "results/demo_cbe.json")
    assert rehearsal.returncode == 0, (rehearsal.stdout + rehearsal.stderr)[-3000:]
    assert not (project / "artifacts").exists() and not (project / "results").exists()
    root = project / ".rehearsal"
    kinds = json.loads(next((root / "standins").glob("*/references.json")).read_text())  # standins/<recipe>/
    assert kinds["models/mine"] == "bert-st" and kinds["./models/plain"] == "bert-hf"

    # a real call (nothing to build for a target no rule makes: it stops after reading the Snakefile, the log
    # open): its log in the root's .snakemake/log/, written on after the move, and no .snakemake/ in the project
    failed = snakemake(project, "--cores", "1", "--config", "rehearse=true", "--", "results/no_rule.txt")
    assert failed.returncode == 1
    assert not (project / ".snakemake").exists()
    logs = list((root / ".snakemake" / "log").glob("*.snakemake.log"))
    assert len(logs) == 1 and "results/no_rule.txt" in logs[0].read_text(), (failed.stderr[-2000:], logs)

    real = snakemake(project, "-n", "--", "results/demo_cbe.json")
    assert real.returncode == 0, (real.stdout + real.stderr)[-3000:]
    for stage, ref in (("teacher", "./models/plain"), ("student", "models/mine")):
        identities = [[(s["params"]["model"], s["params"]["model_identity"]) for s in _specs(folder, stage)]
                      for folder in (root, project)]
        assert identities[0] == identities[1] and identities[0], (stage, identities)
        assert {model for model, _ in identities[0]} == {ref}
        assert all(identity["model"].startswith("sha256:") for _, identity in identities[0])


def test_the_run_log_moves_into_the_root_and_the_projects_own_logs_stay(tmp_path, monkeypatch):
    """What the Snakefile does with Snakemake's open run log (its LoggerManager's logfile_handlers): the log moves
    into the root while open and goes on being written there; a project's .snakemake/log/ holding a real run's
    log keeps it (and stays); one left empty is removed with an empty .snakemake/."""
    import logging
    import types

    from augsbert.run.rehearse import move_run_log

    project = tmp_path / "project"
    (project / ".rehearsal").mkdir(parents=True)
    monkeypatch.chdir(project / ".rehearsal")
    for real_log in (True, False):
        logs = project / ".snakemake" / "log"
        logs.mkdir(parents=True)
        if real_log:
            (logs / "2026-01-01T000000.000000.snakemake.log").write_text("a real run\n")
        path = logs / f"{real_log}.snakemake.log"
        handler = logging.FileHandler(path)
        manager = types.SimpleNamespace(logfile_handlers={handler: str(path)})
        log = logging.getLogger(f"move-run-log-{real_log}")
        log.addHandler(handler)
        log.warning("before")
        new = project / ".rehearsal" / ".snakemake" / "log" / path.name
        assert move_run_log(manager, project) == [new]
        log.warning("after")
        handler.close()
        assert new.read_text() == "before\nafter\n" and manager.logfile_handlers == {handler: str(new)}
        assert not path.exists()
        if real_log:
            assert [p.name for p in logs.iterdir()] == ["2026-01-01T000000.000000.snakemake.log"]
            (logs / "2026-01-01T000000.000000.snakemake.log").unlink()
            logs.rmdir()
            (project / ".snakemake").rmdir()
        else:
            assert not (project / ".snakemake").exists()
        assert move_run_log(manager, project) == []  # in the root already: nothing moves
    assert move_run_log(None, project) == []  # a Snakemake without it: nothing to do
