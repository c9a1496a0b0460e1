"""The workflow through Snakemake itself: job counts of dry runs, a real run, rerun behaviour.

Each test works on a copy of the workflow in a temporary directory and runs
the `snakemake` command line (so `--config` parsing is the real one).

Tests of behaviour (what runs, what is reused or rerun, what is written) train the random tiny
BERT of conftest's `tiny_model`: a whole chain trains in seconds. The two zero-shot tests keep
the packaged MiniLM, the shipped default, for their reference values. A test of one small
experiment's planning cuts the copied config to that experiment (`keep_experiments`); the grid
tests plan the shipped config in full, which checks that it is valid.
"""

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from augsbert.evaluation import correlations
from conftest import REPO, write_bws
from workflow_helpers import checkout, keep_experiments, planned, run, snakemake  # planned: test_topics imports it

pytestmark = pytest.mark.workflow


@pytest.fixture
def workdir(tmp_path) -> Path:
    return checkout(tmp_path)


FULL = {"data": 1, "zero_shot": 1, "suite": 1, "collect_results": 1}
EVAL_ONLY = {"zero_shot": 1, "suite": 1, "collect_results": 1}
TARGET = "results/demo_zeroshot.json"


def test_demo_run_and_rerun_behaviour(workdir):
    # The packaged MiniLM (the shipped default) is kept: the first run's Spearman and diagnostics are
    # reference values of that model. The rerun checks reuse this run's artifacts; a second chain on
    # the tiny model would cost more Snakemake calls than MiniLM's zero-shot evaluations take.
    keep_experiments(workdir, "demo_zeroshot")
    assert run(workdir, TARGET) == FULL
    result = json.loads((workdir / TARGET).read_text())
    zs = result["models"]["zero_shot"]
    pred = pd.read_parquet(workdir / result["stages"][next(
        k for k, s in result["stages"].items() if s["stage"] == "zero_shot")]["path"] / "predictions.parquet")
    assert zs["summary"]["spearman"]["mean"] == pytest.approx(
        correlations(pred["predicted"], pred["gold"])["spearman"], abs=1e-3)
    assert zs["summary"]["spearman"]["mean"] > 30  # MiniLM does track human judgements of the Lee documents
    # the evaluation suite: diagnostics computed, every absent task listed with its reason
    assert -4 < zs["per_seed"]["42"]["uniformity"] < 0 and 0 < zs["per_seed"]["42"]["alignment"] < 2
    assert set(zs["skipped"]) == {"sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "topic",
                                  "askubuntu", "cqadupstack", "twitterpara", "scidocs"}
    assert zs["skipped"]["sts12"] == "no file data/raw/sts_suite/sts12.tsv (and suite.sts_hub is false)"
    assert result["data"]["sizes"] == {"train": 300, "dev": 45, "test": 105, "unlabeled": 300}
    assert result["versions"]["torch"] and result["device"] == ["cpu"] and len(result["config_hash"]) == 10
    assert all(s["wall_time_s"] is not None for s in result["stages"].values())
    assert (workdir / "logs" / "zero_shot").is_dir()

    # a fresh second run does nothing
    assert planned(workdir, TARGET) == {}

    # a setting that cannot change a result (an inference batch size) reruns no stage, only the cheap
    # results file that reports the config
    assert planned(workdir, TARGET, "--config", "experiments={demo_zeroshot: {suite: {batch_size: 16}}}") == {
        "collect_results": 1}
    # a downstream-only change, given the two ways users give it, reruns only that stage and after
    assert planned(workdir, TARGET, "--config", "experiments={demo_zeroshot: {suite: {max_length: 64}}}") == EVAL_ONLY
    override = workdir / "override.yaml"
    override.write_text("experiments:\n  demo_zeroshot:\n    suite: {max_length: 64}\n")
    assert planned(workdir, TARGET, "--configfile", "config/config.yaml", str(override)) == EVAL_ONLY
    # the device is a runtime choice and never reruns anything
    assert planned(workdir, TARGET, "--config", "device=cpu") == {}

    # reverting schedules nothing
    assert planned(workdir, TARGET) == {}

    # after actually running the changed config, reverting reuses the old artifact:
    # only the cheap collect_results job rewrites the results file
    run(workdir, TARGET, "--configfile", "config/config.yaml", str(override))
    assert run(workdir, TARGET) == {"collect_results": 1}
    assert len(list((workdir / "artifacts" / "zero_shot").iterdir())) == 2

    # a checkout (new mtimes everywhere) or a comment edit retrains nothing
    with open(workdir / "workflow" / "rules" / "data.smk", "a") as handle:
        handle.write("\n# a comment\n")
    for path in [*workdir.joinpath("workflow").rglob("*"), *workdir.joinpath("config").rglob("*"),
                 *(REPO / "src" / "augsbert").rglob("*.py")]:
        os.utime(path)
    assert planned(workdir, TARGET) == {}

    # adding an STS-suite file re-evaluates only the suite of the model (and rewrites the results file)
    suite_dir = workdir / "data" / "raw" / "sts_suite"
    suite_dir.mkdir(parents=True)
    lee_test = pd.read_parquet(next((workdir / "artifacts" / "data").iterdir()) / "test.parquet")
    rows = [f"{a}\t{b}\t{5 * s}" for a, b, s in zip(lee_test["sentence1"], lee_test["sentence2"], lee_test["score"])]
    (suite_dir / "sts12.tsv").write_text("sentence1\tsentence2\tscore\n" + "\n".join(rows) + "\n")
    assert run(workdir, TARGET) == {"suite": 1, "collect_results": 1}
    zs = json.loads((workdir / TARGET).read_text())["models"]["zero_shot"]
    # the same pairs as the test split: the suite's Spearman equals the test Spearman
    assert zs["per_seed"]["42"]["sts12"] == pytest.approx(zs["per_seed"]["42"]["spearman"], abs=1e-3)
    assert zs["summary"]["sts_avg"]["mean"] == pytest.approx(zs["per_seed"]["42"]["sts12"])
    assert "sts12" not in zs["skipped"] and "sts13" in zs["skipped"]


def test_missing_real_data_fails_fast_then_runs(workdir):
    # The packaged MiniLM (the shipped default) is kept for the topic-classification threshold below,
    # a quality value of that model's frozen embeddings.
    keep_experiments(workdir, "bws_zeroshot")
    proc = snakemake(workdir, "-n", "results/bws_zeroshot.json")
    err = proc.stdout + proc.stderr
    # issue 26 case 7: one clean message and exit code 2, as the README says, not InputFunctionException (exit 1)
    assert proc.returncode == 2 and "InputFunctionException" not in err and "Traceback" not in err
    assert "missing file data/raw/bws/BWS_Argument_Similarity_Corpus.csv" in err
    assert "where to get it" in err and "where to put it" in err

    write_bws(workdir / "data" / "raw" / "bws" / "BWS_Argument_Similarity_Corpus.csv", per_topic=12)
    assert run(workdir, "results/bws_zeroshot.json") == FULL
    result = json.loads((workdir / "results" / "bws_zeroshot.json").read_text())
    assert result["data"]["sizes"] == {"train": 60, "dev": 12, "test": 24}
    zs = result["models"]["zero_shot"]
    assert zs["summary"]["spearman"]["n"] == 1
    # BWS has topics: frozen-encoder topic classification over its 8 topics
    assert zs["summary"]["topic_macro_f1"]["mean"] > 30 and "topic" not in zs["skipped"]

    # raw data are tracked by content: a re-copied or touched identical file reruns nothing ...
    raw = workdir / "data" / "raw" / "bws" / "BWS_Argument_Similarity_Corpus.csv"
    shutil.copy(raw, workdir / "copy.csv")
    shutil.copy(workdir / "copy.csv", raw)
    os.utime(raw)
    assert planned(workdir, "results/bws_zeroshot.json") == {}
    # ... one changed score reruns the data stage and everything after it
    lines = raw.read_text().splitlines()
    fields = lines[1].rsplit(",", 1)
    lines[1] = f"{fields[0]},{float(fields[1]) / 2:.4f}"
    raw.write_text("\n".join(lines) + "\n")
    assert planned(workdir, "results/bws_zeroshot.json") == FULL


def test_config_errors_name_the_key(workdir):
    proc = snakemake(workdir, "-n", TARGET, "--config", "experiments={demo_zeroshot: {suiet: {batch_size: 3}}}")
    # the same two lines as the augsbert CLI, not Snakemake's dump of the schema and the config
    assert proc.returncode == 2 and proc.stderr.endswith(
        "augsbert: error: unknown key experiments.demo_zeroshot.suiet\n  did you mean 'suite'?\n")
    assert "Failed validating" not in proc.stderr and "Traceback" not in proc.stderr
    proc = snakemake(workdir, "-n", "results/nope.json")
    assert proc.returncode != 0 and "unknown experiment 'nope'" in proc.stdout + proc.stderr
    # issue 42: a forgotten --configfile: the closest names, where the rest are, how to name one's own file
    keep_experiments(workdir, "demo_zeroshot")
    (workdir / "my.yaml").write_text("experiments:\n  mine_zeroshot: {dataset: lee, models: [zero_shot]}\n")
    proc = snakemake(workdir, "-n", "results/mine_zeroshot.json")
    assert proc.returncode == 2 and proc.stderr.endswith(
        "augsbert: error: unknown experiment 'mine_zeroshot'\n"
        "  did you mean 'demo_zeroshot'?\n"
        "  all 1 experiments: .venv/bin/augsbert list experiments\n"
        "  defined in a config file of your own? Name that file: snakemake --configfile my.yaml -- "
        "results/mine_zeroshot.json (`--` ends the list of config files), or augsbert ... --config my.yaml\n"), proc.stderr
    # ... and the target written after --configfile (which takes every path after it): what happened, where it goes
    (workdir / "results").mkdir(exist_ok=True)
    (workdir / "results" / "x.json").write_text('{"experiment": "x", "config_hash": "0", "created": "", "models": {}}')
    proc = snakemake(workdir, "-n", "--configfile", "my.yaml", "results/x.json")
    assert proc.returncode == 2 and proc.stderr.endswith(
        "augsbert: error: results/x.json was read as a config file, but it is a results file. Snakemake's "
        "--configfile takes every path after it up to the next option, so a target written after it becomes one "
        "more config file: end the config files with `--` (snakemake -n --configfile my.yaml -- results/x.json) or "
        "name the targets first\n"), proc.stderr
    assert planned(workdir, "--configfile", "my.yaml", "--", "results/mine_zeroshot.json")["collect_results"] == 1
    # issue 26 case 7: a key written twice in the config file (Snakemake's own reading keeps the last one)
    config = workdir / "config" / "config.yaml"
    lines = config.read_text().splitlines()
    first = next(i for i, line in enumerate(lines, start=1) if line.startswith("data_dir:"))
    config.write_text("\n".join([*lines, "data_dir: elsewhere"]) + "\n")
    proc = snakemake(workdir, "-n", TARGET)
    assert proc.returncode == 2 and proc.stderr.endswith(
        f"augsbert: error: config/config.yaml:{len(lines) + 1}: duplicate key data_dir (first written at line "
        f"{first}); YAML would silently keep only the last one: remove or merge one of them\n"), proc.stderr


def test_demo_cbe_trains_and_a_student_lr_change_reruns_only_the_student(workdir, tiny_model):
    keep_experiments(workdir, "demo_cbe", "demo_cbe_distill", "demo_augsbert_cbe", "demo_fulldomain_cbe")
    small = workdir / "small.yaml"
    small.write_text(
        f"defaults:\n  base_model: {tiny_model}\n"
        "  teacher: {epochs: 1, max_length: 96, batch_size: 32}\n"
        "  student: {epochs: 1, max_length: 48, batch_size: 32}\n"
        "  suite: {max_length: 48, suites: []}\n")
    args = ("--configfile", "config/config.yaml", str(small))
    target = "results/demo_cbe.json"
    assert run(workdir, target, *args) == {"data": 1, "zero_shot": 1, "teacher": 1, "student": 1, "collect_results": 1}
    result = json.loads((workdir / target).read_text())
    assert set(result["models"]) == {"zero_shot", "lower_bound", "teacher"}
    assert result["models"]["teacher"]["per_seed"]["42"]["arch"] == "cbe"
    teacher_dir = workdir / next(s["path"] for s in result["stages"].values() if s["stage"] == "teacher")
    assert (teacher_dir / "model" / "cross_bi_encoder.json").is_file()
    metrics = json.loads((teacher_dir / "metrics.json").read_text())
    assert metrics["test"]["spearman"] == pytest.approx(result["models"]["teacher"]["summary"]["spearman"]["mean"],
                                                        abs=1e-3)
    assert metrics["dev_history"][0]["epoch"] == 1
    log = (workdir / "logs" / "teacher" / f"{teacher_dir.name}.log").read_text()
    assert "epoch 1 (step" in log and "dev spearman" in log
    assert not (workdir / "artifacts" / ".checkpoints").exists()  # removed once the artifacts were complete

    assert planned(workdir, target, *args) == {}
    changed = planned(workdir, target, *args, "--config", "experiments={demo_cbe: {student: {lr: 3.0e-5}}}")
    assert changed == {"student": 1, "collect_results": 1}
    # the distillation experiment reuses this teacher and lower bound
    assert planned(workdir, "results/demo_cbe_distill.json", *args) == {"labels": 1, "student": 1, "collect_results": 1}

    # Augmented SBERT: silver pairs by BM25 + semantic search (the fine-tuned lower bound encodes the pool)
    augsbert = "results/demo_augsbert_cbe.json"
    silver_jobs = {"candidates": 1, "labels": 1, "student": 1, "collect_results": 1}
    assert run(workdir, augsbert, *args) == silver_jobs  # teacher and lower bound are reused
    result = json.loads((workdir / augsbert).read_text())
    assert set(result["models"]) == {"zero_shot", "lower_bound", "teacher", "student"}
    silver = result["silver"]["42"]
    assert {"gold", "bm25", "semantic_search"} <= set(silver["strategies"])
    assert silver["strategies"]["bm25"]["kept"] > 0 and 0 <= silver["strategies"]["bm25"]["ks_to_gold"] <= 1
    labels_dir = workdir / next(s["path"] for s in result["stages"].values() if s["stage"] == "labels")
    assert (labels_dir / "score_densities.png").stat().st_size > 10_000
    pairs = pd.read_parquet(labels_dir / "pairs.parquet")
    assert len(pairs) == silver["pairs"] and set(pairs["teacher"]) == {teacher_dir.name}
    # changing only the sampling strategy reuses the teacher
    assert planned(workdir, augsbert, *args, "--config",
                   "experiments={demo_augsbert_cbe: {candidates: {strategies: [random, kde]}}}") == silver_jobs

    # MLM domain adaptation (FullDomainSBERT): adapted teacher and student; the lower bound is reused
    full = "results/demo_fulldomain_cbe.json"
    mlm = ("--config", "experiments={demo_fulldomain_cbe: {adapt: {max_steps: 12, max_length: 64, batch_size: 8}}}")
    # (its silver candidates are those of demo_augsbert_cbe: same pool, strategies and encoder)
    assert run(workdir, full, *args, *mlm) == {"adapt": 1, "teacher": 1, "labels": 1, "student": 1,
                                               "collect_results": 1}
    adapt_dir = next((workdir / "artifacts" / "adapt").iterdir())
    held_out = json.loads((adapt_dir / "metrics.json").read_text())["held_out"]
    assert held_out["adapted"]["loss"] < held_out["base"]["loss"]
    steps = ("--config", "experiments={demo_fulldomain_cbe: {adapt: {max_steps: 13, max_length: 64, batch_size: 8}}}")
    assert planned(workdir, full, *args, *steps) == {"adapt": 1, "teacher": 1, "labels": 1, "student": 1,
                                                     "collect_results": 1}
    student_lr = ("--config", "experiments={demo_fulldomain_cbe: {adapt: {max_steps: 12, max_length: 64, "
                  "batch_size: 8}, student: {lr: 3.0e-5}}}")
    # the student's lr also changes the lower bound, which encodes the pool for semantic search;
    # adaptation and the teacher are untouched
    assert planned(workdir, full, *args, *student_lr) == {"student": 2, "candidates": 1, "labels": 1,
                                                          "collect_results": 1}
    # adapt.pairs: candidates (thesis 4.3.1): MLM on the candidates the teacher labels, which exist already
    # (the DAG runs candidates before adapt); only the adaptation and what follows it run again
    shared = ("--config", "experiments={demo_fulldomain_cbe: {adapt: {max_steps: 12, max_length: 64, "
              "batch_size: 8, pairs: candidates}}}")
    assert planned(workdir, full, *args, *shared) == {"adapt": 1, "teacher": 1, "labels": 1, "student": 1,
                                                      "collect_results": 1}

    # issue 26's fault matrix, on the artifacts of every stage this chain trained
    check_fault_matrix(workdir, (target, augsbert, full), (*args, *mlm))


# What the next run plans once `augsbert verify --repair` deleted the artifact of a stage, named as a target
# beside the chain's three results files (the stage's artifact of demo_cbe, else of demo_augsbert_cbe, else
# of demo_fulldomain_cbe): that artifact and exactly what depends on it. The lower bound (a student) encodes
# the pool for semantic search, so it feeds both silver students; demo_cbe's teacher labels the silver
# pairs of demo_augsbert_cbe; the adapted model (adapt) feeds only demo_fulldomain_cbe's teacher.
FAULT_JOBS = {
    "data": {"data": 1, "zero_shot": 1, "teacher": 2, "student": 3, "candidates": 1, "labels": 2, "adapt": 1,
             "collect_results": 3},
    "zero_shot": {"zero_shot": 1, "collect_results": 3},
    "student": {"student": 3, "candidates": 1, "labels": 2, "collect_results": 3},
    "teacher": {"teacher": 1, "labels": 1, "student": 1, "collect_results": 2},
    "candidates": {"candidates": 1, "labels": 2, "student": 2, "collect_results": 2},
    "labels": {"labels": 1, "student": 1, "collect_results": 1},
    "adapt": {"adapt": 1, "teacher": 1, "labels": 1, "student": 1, "collect_results": 1},
}
# files also cut to 0 bytes (besides being deleted): data read at parse time (the silver pool's size), weights
TRUNCATED = {("data", "train.parquet"), ("teacher", "model/model.safetensors")}


def check_fault_matrix(workdir: Path, targets: tuple[str, ...], args: tuple[str, ...]) -> None:
    """Issue 26: every file of an artifact of every stage, deleted (some also cut to 0 bytes) in turn, is found
    by the documented step, `augsbert verify --repair` (docs/guide/errors.md), which deletes exactly that
    artifact; the next run, given the deleted folder as a target as verify says, plans that artifact and its
    dependents. Each case starts from the finished artifacts (the folder is copied back, times kept)."""
    import contextlib
    import io

    from augsbert.face.cli import main
    from augsbert.store.manifests import MANIFEST, artifact_folders

    def verify(*flags: str) -> tuple[int, list[str]]:  # `augsbert verify` as run in the project folder
        out = io.StringIO()
        with contextlib.chdir(workdir), contextlib.redirect_stdout(out):
            code = main(["verify", *flags])
        return code, out.getvalue().splitlines()

    def check(stage: str, folder: Path, name: str, damage: str, size: int, first: bool) -> None:
        file = workdir / folder / name
        if damage == "delete":
            file.unlink()
            expected = f"{folder}: {name} is missing"
        elif damage == "flip":  # one byte in the middle, size and modification time kept (issue 41)
            stat = file.stat()
            with open(file, "r+b") as handle:
                handle.seek(size // 2)
                byte = handle.read(1)
                handle.seek(size // 2)
                handle.write(bytes([byte[0] ^ 0xFF]))
            os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            assert file.stat().st_size == size and file.stat().st_mtime_ns == stat.st_mtime_ns
            expected = f"{folder}: {name} changed since it was written (same size, other content)"
        else:
            file.write_bytes(b"")
            expected = f"{folder}: {name} has 0 bytes, {size} when written"
            # Snakemake sees only the folder: the damage plans nothing, and the dry run does not fail at
            # parse time (planning reads the data artifact for the silver pool's size)
            assert planned(workdir, *targets, *args) == {}
        if name == MANIFEST and damage == "truncate":
            expected = f"{folder}: {folder / MANIFEST} is damaged"
        case = (stage, name, damage)
        code, lines = verify()
        assert code == 1 and lines[0] == expected, (case, lines)
        assert (workdir / folder).is_dir()  # only reported without --repair
        code, lines = verify("--repair")
        # moved aside (issue 56 S5), named; the quarantine is emptied for the next case
        assert code == 0 and lines[0] == expected and re.fullmatch(
            rf"  moved to artifacts/\.quarantine/{stage}/{re.escape(folder.name)}-\d{{8}}T\d{{6}}(; .*)?",
            lines[1]), (case, lines)
        assert (workdir / lines[1].split()[2].rstrip(";")).is_dir(), (case, lines)
        shutil.rmtree(workdir / "artifacts" / ".quarantine")
        assert lines[-1].endswith(f"snakemake <options> <targets> {folder}"), (case, lines)
        assert artifact_folders(workdir / "artifacts") == [f for f in every if f != workdir / folder], case
        if stage == "data" and first:  # without the deleted folder as a target Snakemake skips it (an intermediate)
            assert planned(workdir, *targets, *args) == {}
        if first:  # what is planned depends on the folder deleted alone: once per stage
            rebuild = lines[-1].split("<targets> ")[1].split()
            assert planned(workdir, *targets, *rebuild, *args) == FAULT_JOBS[stage], case

    assert planned(workdir, *targets, *args) == {}
    # folders of other programs under the artifacts root, with a manifest.json of their own (issue 41: `verify
    # --repair` deleted them): never touched, whatever the damage around them
    foreign = {workdir / "artifacts" / "webapp" / "app": {"manifest.json": '{"name": "app", "icons": []}',
                                                         "index.html": "<html></html>"},
               workdir / "artifacts" / "teacher" / "ext-0123456789": {"manifest.json": '{"manifest_version": 3}',
                                                                      "background.js": "x"}}
    for place, files in foreign.items():
        place.mkdir(parents=True)
        for name, text in files.items():
            (place / name).write_text(text)
    folders: dict[str, Path] = {}
    for result in targets:
        for stage in json.loads((workdir / result).read_text())["stages"].values():
            folders.setdefault(stage["stage"], Path(stage["path"]))
    assert set(folders) == set(FAULT_JOBS)
    every = artifact_folders(workdir / "artifacts")
    pristine = workdir.parent / f"{workdir.name}-pristine"
    cases = []
    for stage, folder in folders.items():
        saved = pristine / stage
        shutil.copytree(workdir / folder, saved, symlinks=True)
        manifest = json.loads((saved / MANIFEST).read_text())["files"]
        on_disk = sorted(p.relative_to(saved).as_posix() for p in saved.rglob("*")
                         if p.is_file() and p.name != ".snakemake_timestamp")  # Snakemake's, added after the manifest
        assert set(on_disk) == {*manifest, MANIFEST} and {"spec.json", "metrics.json"} <= set(on_disk), on_disk
        if stage in ("student", "teacher", "adapt"):
            assert "model/model.safetensors" in on_disk
        largest = max(manifest, key=lambda name: manifest[name]["size"])
        for name in on_disk:
            damages = ("delete", "truncate") if (stage, name) in TRUNCATED else ("delete",)
            for damage in (*damages, "flip") if name == largest else damages:
                try:
                    check(stage, folder, name, damage, manifest.get(name, {}).get("size"), first=name == on_disk[0])
                finally:  # the next case, and what follows, start from the finished artifact
                    if (workdir / folder).exists():
                        shutil.rmtree(workdir / folder)
                    shutil.copytree(saved, workdir / folder, symlinks=True)
                cases.append((stage, name, damage))
    assert len(cases) > 50 and {stage for stage, *_ in cases} == set(FAULT_JOBS)
    assert {stage for stage, _, damage in cases if damage == "flip"} == set(FAULT_JOBS)
    code, lines = verify()
    assert code == 0 and lines[-1] == f"{len(every)} artifact(s) checked under artifacts, 0 damaged", lines
    for place, files in foreign.items():  # every foreign folder as it was
        assert {p.name: p.read_text() for p in place.iterdir()} == files
        shutil.rmtree(place)
    (workdir / "artifacts" / "webapp").rmdir()
    assert planned(workdir, *targets, *args) == {}  # restored as they were: nothing to rebuild
    shutil.rmtree(pristine)


def test_real_data_chains_plan_in_full(workdir):
    from conftest import write_spanish, write_stsb_sbert

    write_bws(workdir / "data" / "raw" / "bws" / "BWS_Argument_Similarity_Corpus.csv", per_topic=12)
    write_stsb_sbert(workdir / "data" / "raw" / "stsb")
    assert planned(workdir, "results/bws_cbe.json", "results/stsb2bws_cbe.json", "results/bws_ce.json",
                   "results/stsb2bws_ce.json") == {
        "data": 2, "zero_shot": 1, "teacher": 4, "student": 6, "candidates": 2,
        "labels": 4, "suite": 7, "collect_results": 4}


def test_thesis_grid_plans_in_full_with_real_data_files(workdir):
    from conftest import write_spanish

    write_bws(workdir / "data" / "raw" / "bws" / "BWS_Argument_Similarity_Corpus.csv", per_topic=12)
    stems = ["sts14-li65", "sts14-news", "sts14-wikipedia", "sts15-newswire", "sts15-wikipedia", "sts17-es"]
    write_spanish(workdir / "data" / "raw" / "spanish_sts", {s: [str(i % 5) for i in range(60)] for s in stems})
    jobs = planned(workdir, "results/tables/augsbert_semi.md")
    # 3 datasets x 3 seeds: one lower bound, two teachers, ten students (2 teachers x 5 samplings) each
    assert jobs == {"data": 3, "student": 3 * 3 * 11, "teacher": 3 * 3 * 2,
                    "candidates": 3 * 3 * 4, "labels": 3 * 3 * 10, "collect_results": 30, "grid_table": 1}


def test_grid_table_report_and_adding_a_seed(workdir, tiny_model):
    keep_experiments(workdir)  # the grid below is all this test plans
    grid = workdir / "grid.yaml"
    grid.write_text(
        "grids:\n  tiny:\n    description: tiny grid\n    seeds: [1, 2]\n    options:\n"
        f"      base_model: {tiny_model}\n      models: [lower_bound, teacher, student]\n"
        "      teacher: {epochs: 1, max_length: 64, batch_size: 32}\n"
        "      student: {epochs: 1, max_length: 48, batch_size: 32}\n"
        "      candidates: {pool: train+unlabeled, top_k: 1}\n"
        "      suite: {max_length: 48, suites: [diagnostics]}\n"
        "    columns: {lee: {dataset: lee}}\n"
        "    axes: {sampling: {bm25: {candidates: {strategies: [bm25]}}}}\n"
        "    metrics: [spearman, uniformity]\n")
    args = ("--configfile", "config/config.yaml", str(grid))
    target = "results/tables/tiny.md"
    # two seeds: lower bound, teacher, BM25 candidates, labels, student and two suite evaluations each
    assert run(workdir, target, *args) == {
        "data": 1, "student": 2 * 2, "teacher": 2, "candidates": 2, "labels": 2,
        "suite": 2 * 2, "collect_results": 1, "grid_table": 1}
    table = (workdir / target).read_text()
    result = json.loads((workdir / "results" / "tiny.bm25.lee.json").read_text())
    student = result["models"]["student"]
    mean, std = student["summary"]["spearman"]["mean"], student["summary"]["spearman"]["std"]
    seeds = [student["per_seed"][s]["spearman"] for s in ("1", "2")]
    assert mean == pytest.approx(sum(seeds) / 2, abs=1e-3) and std == pytest.approx(abs(seeds[0] - seeds[1]) / 2 ** 0.5, abs=1e-3)
    assert f"| AugSBERT | {mean:.2f} ± {std:.2f} |" in table
    for label in ("SBERT (lower bound)", "CBE (upper bound)", "AugSBERT"):
        assert sum(line.startswith(f"| {label} |") for line in table.splitlines()) == 3  # overview, spearman, uniformity
    csv = pd.read_csv(workdir / "results" / "tables" / "tiny.csv")
    assert len(csv) == 3 * 2 and set(csv["seeds"]) == {"1 2"}
    assert (workdir / "results" / "tables" / "tiny.png").stat().st_size > 5_000
    assert any(p.name.startswith("teacher.") for p in (workdir / "results" / "tables" / "tiny.logs").iterdir())
    assert len(list((workdir / "results" / "tables" / "tiny.figures").glob("*.png"))) == 2  # seeds 1 and 2
    # the results file follows the documented schema (collect-results validates before writing)
    assert set(result["wall_time_s"]["per_stage"]) == {"data", "teacher", "student", "candidates", "labels", "suite"}

    proc = snakemake(workdir, "--report", "report.html", target, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (workdir / "report.html").stat().st_size > 50_000
    # one experiment's report holds its metrics table, training curves and silver densities
    proc = snakemake(workdir, "--report", "experiment.zip", "results/tiny.bm25.lee.json", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with zipfile.ZipFile(workdir / "experiment.zip") as archive:
        names = archive.namelist()
        metrics = pd.read_csv(archive.open(next(n for n in names if n.endswith("/metrics.csv"))))
    row = metrics[(metrics["model"] == "student") & (metrics["metric"] == "spearman")]
    assert row["mean"].item() == pytest.approx(mean, abs=1e-3) and row["seeds"].item() == 2
    assert set(metrics["model"]) == {"lower_bound", "teacher", "student"}
    report_files = {n.rsplit("/", 1)[-1] for n in names}
    assert {"training_curves.png", "silver_densities.seed1.png", "silver_densities.seed2.png",
            "tiny.bm25.lee.json"} <= report_files

    # a third seed: only that seed's chain, the two results files and the table
    more = ("--config", "grids={tiny: {seeds: [1, 2, 3]}}")
    assert planned(workdir, target, *args, *more) == {
        "student": 2, "teacher": 1, "candidates": 1, "labels": 1, "suite": 2,
        "collect_results": 1, "grid_table": 1}


def test_transfer_uses_no_target_label(workdir, tiny_model):
    """Domain transfer: with the target's scores replaced by random numbers, the silver set and the
    student's predictions on the target test sentences stay identical (no target label enters)."""
    import numpy as np
    from conftest import write_stsb_sbert

    keep_experiments(workdir)  # the experiment below is all this test plans
    bws = write_bws(workdir / "data" / "raw" / "bws" / "BWS_Argument_Similarity_Corpus.csv", per_topic=12)
    write_stsb_sbert(workdir / "data" / "raw" / "stsb")
    extra = workdir / "transfer.yaml"
    extra.write_text(
        f"defaults:\n  base_model: {tiny_model}\n"
        "  teacher: {epochs: 1, max_length: 64, batch_size: 16}\n"
        "  student: {epochs: 2, max_length: 32, batch_size: 16, use_gold_labels: true}\n"
        "  suite: {max_length: 32, suites: []}\n"
        "experiments:\n  leak:\n    source: stsb\n    dataset: bws_cross_topic\n    models: [student]\n"
        "    labels: {relabel_gold: true}\n"
        "    candidates: {strategies: [bm25, kde, iterative_kde, target_pairs], top_k: 2}\n")
    args = ("--configfile", "config/config.yaml", str(extra))

    def outcome():
        run(workdir, "results/leak.json", *args)
        result = json.loads((workdir / "results" / "leak.json").read_text())
        stage = {s["stage"]: workdir / s["path"] for s in result["stages"].values()}
        silver = pd.read_parquet(stage["labels"] / "pairs.parquet")
        predicted = pd.read_parquet(stage["student"] / "predictions.parquet")
        return result, silver.drop(columns=["teacher"]), predicted

    first, silver, predicted = outcome()
    assert first["models"]["student"]["per_seed"]["42"]["selection"] == "source_dev"
    assert set(silver["strategy"]) >= {"gold", "bm25", "target_pairs"}
    table = pd.read_csv(bws)
    table["score"] = np.random.default_rng(0).random(len(table)).round(4)  # train, dev and test scores
    table.to_csv(bws, index=False)
    second, silver_2, predicted_2 = outcome()
    assert second["stages"].keys() != first["stages"].keys()  # the target data changed: the chain ran again
    pd.testing.assert_frame_equal(silver_2, silver)
    pd.testing.assert_series_equal(predicted_2["predicted"], predicted["predicted"])
    pd.testing.assert_series_equal(predicted_2["sentence1"], predicted["sentence1"])


def test_pretrain_chain_feeds_the_student_and_semantic_search(workdir, tiny_model):
    """A tiny SimCSE run: its own results row, the student and semantic search start from it; a student
    change reruns the student only, a pretrain change reruns pretrain and everything that uses it."""
    keep_experiments(workdir, "demo_simcse_student")
    small = workdir / "small.yaml"
    small.write_text(
        f"defaults:\n  base_model: {tiny_model}\n"
        "  teacher: {epochs: 1, max_length: 96, batch_size: 32}\n"
        "  student: {epochs: 1, max_length: 48, batch_size: 32}\n"
        "  suite: {max_length: 48, suites: []}\n"
        "experiments:\n  demo_simcse_student:\n    models: [zero_shot, student]\n"
        "    pretrain: {max_steps: 4, batch_size: 8, max_length: 32, eval_steps: 2}\n")
    args = ("--configfile", "config/config.yaml", str(small))
    target = "results/demo_simcse_student.json"
    assert run(workdir, target, *args) == {
        "data": 1, "zero_shot": 1, "pretrain": 1, "teacher": 1, "candidates": 1,
        "labels": 1, "student": 1, "collect_results": 1}
    result = json.loads((workdir / target).read_text())
    assert set(result["models"]) == {"zero_shot", "pretrained", "student"}
    pretrained = result["models"]["pretrained"]["per_seed"]["42"]
    assert pretrained["selection"] == "target_dev" and -100 <= pretrained["spearman"] <= 100
    stage = next(s for s in result["stages"].values() if s["stage"] == "pretrain")
    metrics = json.loads((workdir / stage["path"] / "metrics.json").read_text())
    assert metrics["steps"] == 4 and [h["step"] for h in metrics["history"]] == [2, 4]
    assert (workdir / stage["path"] / "model" / "modules.json").is_file()
    pooling = json.loads((workdir / stage["path"] / "model" / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode"] == "cls"
    assert "held-out loss" in (workdir / "logs" / "pretrain" / f"{Path(stage['path']).name}.log").read_text()

    assert planned(workdir, target, *args, "--config", "experiments={demo_simcse_student: {student: {lr: 3.0e-5}}}") \
        == {"student": 1, "collect_results": 1}
    assert planned(workdir, target, *args, "--config", "experiments={demo_simcse_student: {pretrain: {lr: 1.0e-4}}}") \
        == {"pretrain": 1, "candidates": 1, "labels": 1, "student": 1, "collect_results": 1}


def write_stsb_useb(workdir: Path) -> None:
    """The `stsb_useb` dataset's files: STS-B (sbert layout) and 50 USEB-like titles."""
    from conftest import write_stsb_sbert

    write_stsb_sbert(workdir / "data" / "raw" / "stsb")
    (workdir / "data" / "raw" / "useb").mkdir(parents=True)
    (workdir / "data" / "raw" / "useb" / "titles.txt").write_text("".join(f"title number {i}\n" for i in range(50)))


def test_unsupervised_grid_plans_with_the_useb_titles(workdir):
    write_stsb_useb(workdir)
    jobs = planned(workdir, "results/tables/unsupervised.md")
    # 3 seeds: 13 objective rows, the 6 multi-task ones once more for the second reading of λ (axis `weight`,
    # aux_weight_on contrastive | main; objectives without λ share one artifact across it)
    assert jobs["pretrain"] == 3 * (13 + 6) and jobs["grid_table"] == 1
    # AugSBERT / DomainSBERT / FullDomainSBERT (thesis 5.4.3), per seed: one set of semantic-search + random pairs
    # (thesis 6.2), one MLM adaptation on them, a teacher from RoBERTa and one from the adapted checkpoint (each
    # labelling the pairs), three 12.5K-step students; no lower bound (the base model searches)
    assert jobs["adapt"] == 3 and jobs["candidates"] == 3 and jobs["teacher"] == 3 * 2 and jobs["labels"] == 3 * 2
    # 16 rows x 2 λ readings, each its own results file
    assert jobs["collect_results"] == 2 * 16 and jobs["student"] == 3 * 3


def test_consert_ae_grid_plans_with_the_useb_titles(workdir):
    write_stsb_useb(workdir)
    jobs = planned(workdir, "results/tables/consert_ae.md")
    # 14 rows (simcse_3ep: the 3-epoch SimCSE of Wang's Tables 5.15 / 5.17) x 3 seeds
    assert jobs["pretrain"] == 3 * 14 and jobs["collect_results"] == 14 and jobs["grid_table"] == 1
    assert jobs["suite"] == 3 * 14 + 1  # every pre-trained encoder and the zero-shot model


def test_simcse_variants_grid_plans_with_the_useb_titles(workdir):
    """Seed 001 Tables 2-5: 25 rows (VAE sampling posterior / prior, covariance filtering N(μ, Σ) / μ + Σ ε
    included) x Park's 5 seeds, each its own pretrain job (no two rows share a key)."""
    write_stsb_useb(workdir)
    jobs = planned(workdir, "results/tables/simcse_variants.md")
    assert jobs["pretrain"] == 5 * 25 and jobs["collect_results"] == 25 and jobs["grid_table"] == 1
    assert jobs["suite"] == 5 * 25 + 1  # every pre-trained encoder and the zero-shot model


def test_rcl_grid_plans_one_entropy_job_per_phi_and_seed(workdir):
    """Seed 002 Tables 3-4: entropy models shared by the rows that use them. Without the NLI file the plan stops
    with its path, as a missing raw data file does (issue 46: it was found by the entropy job, hours in)."""
    from conftest import write_stsb_sbert
    from augsbert.data.standins import write_triples

    write_stsb_sbert(workdir / "data" / "raw" / "stsb")
    proc = snakemake(workdir, "-n", "results/tables/rcl.md")
    assert proc.returncode == 2
    assert "data/raw/nli/all-nli-triplet.parquet: no such file (pretrain.triples" in proc.stderr
    write_triples(workdir / "data" / "raw" / "nli" / "all-nli-triplet.parquet")
    jobs = planned(workdir, "results/tables/rcl.md")
    # 5 seeds: phi 0.01 ... 0.05 once each; 6 final models (equation 1 alone, 1-5 entropy models)
    assert jobs["rcl_entropy"] == 5 * 5 and jobs["pretrain"] == 5 * 6 and jobs["collect_results"] == 6
    assert jobs["suite"] == 5 * 6 + 1 and jobs["grid_table"] == 1
    assert planned(workdir, "results/tables/demo_rcl.md")["rcl_entropy"] == 4


def test_gpl_targets_plan_in_snakemakes_dag_with_one_line_beir_stand_ins(workdir):
    """Issue 47: with BEIR folders in place (one passage, one query, one judgement each), Snakemake's own DAG
    (not only the package's plan) holds every GPL target: the two-retriever margins keys have a producing rule."""
    from conftest import write_jsonl

    for name in ("scifact", "fiqa", "trec-covid"):
        root = workdir / "data" / "raw" / "beir" / name
        (root / "qrels").mkdir(parents=True)
        write_jsonl(root / "corpus.jsonl", [{"_id": "d1", "title": "", "text": "a passage"}])
        write_jsonl(root / "queries.jsonl", [{"_id": "q1", "text": "a query"}])
        for split in ("train", "test"):
            (root / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    write_stsb_useb(workdir)
    write_bws(workdir / "data" / "raw" / "bws" / "BWS_Argument_Similarity_Corpus.csv", per_topic=12)
    jobs = planned(workdir, "results/scifact_gpl.json", "results/scifact_negatives.json",
                   "results/tables/gpl.md", "results/tables/gpl_compare.md", "results/tables/gpl_symmetric.md")
    # gpl: 3 datasets x 2 rows (a starting point with its miners), each queries -> negatives -> margins -> student;
    # scifact_gpl: its train qrels mined; scifact_negatives: mined only; gpl_compare: 3 seeds, its two GPL rows
    # share the seed's negatives and margins (the same trained teacher); gpl_symmetric: 3 seeds x 2 columns; the
    # queries of grid gpl: one per dataset (both rows generate the same)
    assert jobs["negatives"] == 6 + 1 + 1 + 3 + 6 and jobs["margins"] == 6 + 1 + 3 + 6
    assert jobs["gpl"] == 6 + 1 + 3 * 2 + 6 and jobs["queries"] == 3 + 3 + 6 and jobs["grid_table"] == 3
