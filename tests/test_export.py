"""`augsbert export` and the Cross-Bi-Encoder's hub format.

Artifacts are built directly from the random tiny BERT of conftest's
`tiny_model` (nothing is trained): an exported model must give exactly the
artifact model's outputs, and its card must carry the experiment's facts, so
no test depends on what the model has learnt. The hub is never contacted
(uploads are monkeypatched).
"""

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from augsbert.face.cli import main
from augsbert.export.export import MARKER, ExportError, export, push_to_hub
from augsbert.models.architectures import ARCHITECTURES
from augsbert.models.cross_bi_encoder import CrossBiEncoder
from augsbert.store.results_files import seal
from conftest import train_params

PAIRS = [("a cat sat on the mat", "a dog lay on the rug"), ("stock prices fell", "it rained all day"),
         ("the team won the match", "the coach was happy")]
TEXTS = ["a cat sat on the mat", "stock prices fell sharply", "x"]
# The gold train split (4 pairs) and the teacher-labelled pairs (4 re-labelled gold, 3 bm25) the artifacts hold
GOLD = [("a cat sat on the mat", "a dog lay on the rug", 0.5), ("stock prices fell", "it rained all day", 0.0),
        ("the team won the match", "the coach was happy", 0.75), ("x y", "x y z", 1.0)]
SILVER = [(a, b, 0.25 * i, "gold") for i, (a, b, _) in enumerate(GOLD)] + [
    ("a cat sat on the mat", "stock prices fell", 0.125, "bm25"), ("x y", "the team won the match", 0.0, "bm25"),
    ("a dog lay on the rug", "it rained all day | hard", 0.5, "bm25")]
DATA = "artifacts/data/lee-0000000000"
TEACHER = {"ce": "artifacts/teacher/lee.ce-1111111111", "cbe": "artifacts/teacher/lee.cbe-1111111111"}
LABELS = "artifacts/labels/lee.ce-2222222222"
STUDENTS = {42: "artifacts/student/lee.be-3333333333", 43: "artifacts/student/lee.be-4444444444"}
PARAMS = {"epochs": 1, "batch_size": 16, "lr": 2e-5, "warmup_ratio": 0.1, "weight_decay": 0.01, "max_length": 32,
          "model": "minilm-l6", "seed": 42, "eval_batch_size": 8, "freeze_embeddings": False}


def _artifact(path: str, metrics: dict, params: dict, inputs: dict) -> Path:
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    (root / "metrics.json").write_text(json.dumps(metrics))
    (root / "spec.json").write_text(json.dumps({"params": params, "inputs": inputs}))
    return root


def write_experiment(tiny_model: str) -> dict:
    """A finished two-seed experiment (student, lower bound = student of seed 43's model, CE teacher), written
    into the working directory; returns its spec."""
    data = _artifact(DATA, {"sizes": {"train": 4, "dev": 2, "test": 3}}, {}, {})
    pd.DataFrame(GOLD, columns=["sentence1", "sentence2", "score"]).to_parquet(data / "train.parquet")
    torch.manual_seed(0)
    ce = ARCHITECTURES["ce"].build(tiny_model, train_params("ce", **PARAMS), "cpu")
    teacher = _artifact(TEACHER["ce"], {"arch": "ce", "test": {"spearman": 51.5, "pearson": 50.0, "n_pairs": 3},
                                        "seed": 42, "train_pairs": 4, "loss_log": [{"step": 1, "loss": 0.75}]},
                        {**PARAMS, "arch": "ce", "symmetric": False, "loss": "bce", "activation": "sigmoid"}, {"data": DATA})
    ARCHITECTURES["ce"].save(ce, teacher / "model")
    labels = _artifact(LABELS, {}, {}, {"teacher": str(teacher), "gold": DATA})
    pd.DataFrame(SILVER, columns=["sentence1", "sentence2", "score", "strategy"]).to_parquet(labels / "pairs.parquet")
    (labels / "sampling_stats.json").write_text(json.dumps(
        {"teacher": teacher.name, "teacher_arch": "ce", "pairs": 7,
         "strategies": {"bm25": {"kept": 3, "after_dedup": 3}, "gold": {"kept": 4, "after_dedup": 4}}}))
    for seed, path in STUDENTS.items():
        student = _artifact(path, {"arch": "be", "test": {"spearman": 60.0 + seed - 42, "pearson": 61.0, "n_pairs": 3},
                                   "train_pairs": 7, "training_set": {"relabelled_gold": 4, "bm25": 3}, "seed": seed,
                                   "dev_history": [{"epoch": 1, "step": 1, "dev_spearman": 55.5, "train_loss": 0.125}],
                                   "best_epoch": 1, "dev_spearman": 55.5},
                            {**PARAMS, "seed": seed, "selection": "target_dev", "use_gold_labels": False},
                            {"data": DATA, "labels": LABELS})
        shutil.copytree(tiny_model, student / "model")
    runs = {str(seed): {"data": {"key": "lee-0000000000", "stage": "data", "path": DATA},
                        "teacher": {"key": Path(TEACHER["ce"]).name, "stage": "teacher", "path": TEACHER["ce"]},
                        "labels": {"key": Path(LABELS).name, "stage": "labels", "path": LABELS},
                        "student": {"key": Path(path).name, "stage": "student", "path": path}}
            for seed, path in STUDENTS.items()}
    spec = {"experiment": "g.bm25.lee", "config": {"dataset": "lee", "source": None, "description": "a test",
                                                   "candidates": {"strategies": ["bm25"], "top_k": 1, "pool": "train"}},
            "dataset": {"loader": "lee"}, "config_hash": "0123456789", "seeds": [42, 43], "runs": runs}
    Path("results").mkdir()
    results = {"models": {
        "student": {"per_seed": {"42": {"spearman": 60.25, "pearson": 61.5, "n_pairs": 3, "sts_avg": 70.125},
                                 "43": {"spearman": 61.75, "pearson": 62.5, "n_pairs": 3}},
                    "summary": {"spearman": {"mean": 61.0, "std": 1.0607, "n": 2}},
                    "artifacts": {"42": {"model": STUDENTS[42]}, "43": {"model": STUDENTS[43]}}},
        "teacher": {"per_seed": {"42": {"spearman": 51.5, "pearson": 50.0, "n_pairs": 3}},
                    "summary": {}, "artifacts": {"42": {"model": TEACHER["ce"]}}}}}
    Path("results/g.bm25.lee.json").write_text(json.dumps(seal(results)))  # as collect-results writes it
    return spec


@pytest.fixture(scope="module")
def finished_experiment(tmp_path_factory, tiny_model) -> tuple[Path, dict]:
    """`write_experiment`'s files, written once per module (building the CE teacher is the slow part)."""
    root = tmp_path_factory.mktemp("experiment")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        return root, write_experiment(tiny_model)


@pytest.fixture
def experiment(finished_experiment, tmp_path, monkeypatch) -> dict:
    """The finished experiment copied into this test's directory, the working directory: tests change it."""
    root, spec = finished_experiment
    shutil.copytree(root, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    return copy.deepcopy(spec)


def test_bi_encoder_export_reproduces_embeddings_and_fills_the_card(experiment, tmp_path):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "elsewhere" / "student"  # any user-named path
    record = export(experiment, "student", out)
    assert record["seed"] == 42 and record["key"] == "lee.be-3333333333"  # the first seed by default
    original = SentenceTransformer(f"{STUDENTS[42]}/model", device="cpu").encode(TEXTS)
    np.testing.assert_allclose(SentenceTransformer(str(out), device="cpu").encode(TEXTS), original, atol=1e-6)
    card = (out / "README.md").read_text()
    assert card.startswith("---\n") and "- augsbert\n" in card and "library_name: sentence-transformers" in card
    assert "# augsbert g.bm25.lee: student (Bi-Encoder (SentenceTransformer), seed 42)" in card
    for fact in ("| seed | 42 (the experiment's seeds: 42, 43; the first, exported by default) |",
                 "| data sizes | train 4, dev 2, test 3 |",
                 "| teacher | Cross-Encoder `lee.ce-1111111111`, test Spearman 51.50 |",
                 "| silver pairs (teacher-labelled) | bm25 3, relabelled gold 4; 7 in total |",
                 "| training set by source | relabelled_gold 4, bm25 3 |",
                 "### Test metrics (from `results/g.bm25.lee.json`)",
                 "| spearman | 60.25 | 61.00 ± 1.06 (n=2) |", "| sts_avg | 70.12 | – |",
                 "`0123456789`",
                 # issue 42: a recipe that runs as written: one config file with the dataset and the experiment
                 # (renamed: the grid makes g.bm25.lee itself), then the commands
                 "save this as `reproduce.yaml`", ".venv/bin/snakemake --cores 2 --configfile reproduce.yaml -- "
                 "results/g-bm25-lee.json",
                 f".venv/bin/augsbert export --config reproduce.yaml --experiment g-bm25-lee --model student --seed 42 "
                 f"--to {out}",
                 # the usage snippet loads the export, not a placeholder
                 f'model = SentenceTransformer("{out}")'):
        assert fact in card, fact
    assert "sentence_transformers_model_id" not in card
    assert "Download from the" not in card and "# Load the exported folder" in card  # a local path (issue 50)
    recipe = yaml.safe_load(card.split("save this as `reproduce.yaml`", 1)[1].split("```yaml\n", 1)[1].split("```")[0])
    assert recipe == {"seeds": [42, 43], "datasets": {"lee": {"loader": "lee"}},  # the seeds it ran with
                      "experiments": {"g-bm25-lee": experiment["config"]}}
    # no shipped config to plan it over here: the whole config, and the card says why (issue 50 item 7)
    assert ("it could not be cut to the options this model used: no config/config.yaml in the working directory "
            "to plan it with") in card
    meta, _ = card_parts(out / "README.md")
    assert meta["license"] == "apache-2.0" and meta["language"] == "en"  # the base model's; Lee is English
    assert card.index("## Training (augsbert)") < card.index("## Model Details")  # ST's card, our section first
    assert json.loads((out / MARKER).read_text())["config_hash"] == "0123456789"
    # every file readable by others, as a new file under the usual umask 022 (atomic writes made some 0600)
    assert {oct(p.stat().st_mode & 0o777) for p in out.rglob("*") if p.is_file()} == {"0o644"}


def card_parts(readme: Path) -> tuple[dict, str]:
    """A card's YAML header (parsed) and its Markdown body."""
    text = readme.read_text()
    assert text.startswith("---\n")
    header, body = text[4:].split("\n---\n", 1)
    return yaml.safe_load(header), body


def test_student_card_holds_what_a_sentence_transformers_card_does(experiment, tmp_path):
    experiment["dataset"] = {"loader": "stsb"}  # a loader whose data is a hub dataset: named in `datasets`
    export(experiment, "student", tmp_path / "s")
    meta, body = card_parts(tmp_path / "s" / "README.md")
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"  # the packaged alias minilm-l6
    assert meta["datasets"] == ["sentence-transformers/stsb"]
    assert meta["pipeline_tag"] == "sentence-similarity" and "augsbert" in meta["tags"]
    assert meta["widget"] == [{"source_sentence": "a cat sat on the mat",  # the training pairs, first first
                               "sentences": ["a dog lay on the rug", "it rained all day", "the coach was happy"]}]
    [entry] = meta["model-index"]
    [result] = entry["results"]
    assert result["task"]["type"] == "semantic-similarity" and result["dataset"]["split"] == "test"
    # this seed's test correlations of the results file (60.25 and 61.5 x 100), as fractions
    assert {m["type"]: m["value"] for m in result["metrics"]} == {"pearson_cosine": 0.615, "spearman_cosine": 0.6025}
    for fact in (
            # the training set as the student stage builds it: 4 re-labelled gold + 3 bm25 pairs
            "`lee`: the Bi-Encoder's training pairs, by source; 7 pairs (relabelled_gold 4, bm25 3).",
            "| details | min: 2, mean: 4.29, max: 6 words | min: 3, mean: 4.43, max: 6 words | "
            "min: 0, mean: 0.3036, max: 0.75 |",
            "| stock prices fell | it rained all day | 0.25 |",
            "`sentence_transformers.CosineSimilarityLoss` with these parameters:",
            '"loss_fct": "torch.nn.modules.loss.MSELoss"',
            "- `learning_rate`: 2e-05", "- `num_train_epochs`: 1", "- `per_device_train_batch_size`: 16",
            "- `warmup_steps`: 1",  # ceil(0.1 x 1 epoch x ceil(7 / 16) steps)
            "| 1 | 1 | 0.1250 | 55.50 (chosen) |",
            "@inproceedings{reimers-2019-sentence-bert", "@inproceedings{thakur-2021-augsbert",
            'title = "Sentence Embeddings in Various Supervision Settings"', 'author = "Reiml, Johanna"'):
        assert fact in body, fact
    assert "- `seed`:" not in body  # 42 is the trainer's default: not listed
    assert body.count("## Citation") == 1 and body.rstrip().endswith("```")  # ours replaces the template's
    assert body.index("## Training (augsbert)") < body.index("### Training data") < body.index("## Model Details")
    assert body.count("<!--") == body.count("-->")  # the template's commented-out sections stay balanced


def test_target_is_never_overwritten_without_force(experiment, tmp_path):
    out = tmp_path / "student"
    export(experiment, "student", out)
    with pytest.raises(ExportError, match="not empty; refusing to overwrite"):
        export(experiment, "student", out, seed=43)
    assert json.loads((out / MARKER).read_text())["seed"] == 42
    assert export(experiment, "student", out, seed=43, force=True)["key"] == "lee.be-4444444444"
    assert json.loads((out / MARKER).read_text())["seed"] == 43
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ExportError, match="--force replaces only a directory written by `augsbert export`"):
        export(experiment, "student", mine, force=True)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert not list(tmp_path.glob(".*partial*"))


def test_force_replaces_only_what_the_earlier_export_wrote(experiment, tmp_path):
    """Issue 41: `export --force` onto an earlier export deleted the files the user had added there. Its marker
    lists the files it wrote; a directory holding any other file, or an old marker without that list, is refused
    and left as it was."""
    out = tmp_path / "student"
    export(experiment, "student", out)
    listed = json.loads((out / MARKER).read_text())["files"]
    assert {MARKER, "README.md", "config.json", "model.safetensors"} <= set(listed)
    assert set(listed) == {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    (out / "my_notes.md").write_text("keep")
    (out / "eval").mkdir()
    (out / "eval" / "scores.csv").write_text("1,2")
    with pytest.raises(ExportError, match=r"holds 2 file\(s\) the earlier export did not write \(eval/scores.csv, "
                                          r"my_notes.md\)"):
        export(experiment, "student", out, seed=43, force=True)
    assert (out / "my_notes.md").read_text() == "keep" and (out / "eval" / "scores.csv").is_file()
    assert json.loads((out / MARKER).read_text())["seed"] == 42
    (out / "my_notes.md").unlink()
    shutil.rmtree(out / "eval")
    assert export(experiment, "student", out, seed=43, force=True)["seed"] == 43
    marker = json.loads((out / MARKER).read_text())
    del marker["files"]  # written by an earlier version: which files it wrote is unknown
    (out / MARKER).write_text(json.dumps(marker))
    with pytest.raises(ExportError, match="lists the files it wrote"):
        export(experiment, "student", out, force=True)
    assert json.loads((out / MARKER).read_text())["seed"] == 43


def test_x1_force_keeps_an_edited_readme_and_an_added_empty_folder(experiment, tmp_path, capsys):
    """Issue 49 X1: `export --force` over an earlier export dropped the README.md the user had edited, and an
    empty folder the user had added; its marker listed names, not digests."""
    from augsbert.store.manifests import file_digest

    out = tmp_path / "student"
    export(experiment, "student", out)
    marker = json.loads((out / MARKER).read_text())
    assert marker["digests"]["README.md"] == file_digest(out / "README.md", 0)
    assert set(marker["digests"]) == set(marker["files"]) - {MARKER}
    (out / "README.md").write_text((out / "README.md").read_text() + "\nMy notes.\n")
    with pytest.raises(ExportError, match=r"1 file\(s\) of the earlier export were edited since \(README.md\); "
                                          r"nothing was replaced"):
        export(experiment, "student", out, seed=43, force=True)
    assert (out / "README.md").read_text().endswith("My notes.\n")
    assert json.loads((out / MARKER).read_text())["seed"] == 42
    (out / "plots").mkdir()
    with pytest.raises(ExportError, match=r"holds 1 file\(s\) the earlier export did not write \(plots/\)"):
        export(experiment, "student", out, seed=43, force=True, discard_edits=True)
    assert (out / "plots").is_dir()
    (out / "plots").rmdir()
    assert export(experiment, "student", out, seed=43, force=True, discard_edits=True)["seed"] == 43
    assert not (out / "README.md").read_text().endswith("My notes.\n")


def test_e6_export_to_a_device(experiment, capsys):
    """Issue 49 E6: `export --to /dev/null` ended in a traceback."""
    with pytest.raises(ExportError, match="--to /dev/null: exists and is not a directory"):
        export(experiment, "student", "/dev/null")


def test_x6_export_into_the_artifacts_folder_is_refused(experiment, tmp_path):
    """Issue 56 X6: `export --to artifacts/student/<key>/model2` was accepted; verify then called the student damaged
    (a file its manifest does not list) and `--repair` would have removed it with the export."""
    student = Path(STUDENTS[42])
    before = sorted(p.relative_to(student).as_posix() for p in student.rglob("*"))
    for to in (student / "model2", Path("artifacts") / "exports" / "mine", tmp_path / "artifacts" / "x"):
        with pytest.raises(ExportError, match=r"--to .*: inside the (artifacts folder artifacts/|artifact "
                                              r".*lee.be-3333333333), which holds what the workflow writes and "
                                              r"nothing else .*; export outside it, e.g. --to "
                                              r"models/g.bm25.lee/student$"):
            export(experiment, "student", to)
        assert not to.exists()
    assert sorted(p.relative_to(student).as_posix() for p in student.rglob("*")) == before
    # an artifact of another artifacts folder (a copy elsewhere) is refused as well
    elsewhere = tmp_path / "backup" / "student" / student.name
    shutil.copytree(student, elsewhere)
    with pytest.raises(ExportError, match=f"inside the artifact {elsewhere}"):
        export(experiment, "student", elsewhere / "model2")
    export(experiment, "student", tmp_path / "models" / "s")  # outside: as before
    assert (tmp_path / "models" / "s" / "augsbert_export.json").is_file()


def test_g12_an_edited_results_file_does_not_reach_the_model_card(experiment, tmp_path):
    """Issue 49 G12: a same-size edit of a number in the results file reached the model card (model-index) and
    augsbert_export.json."""
    from augsbert.store.artifacts import DamagedArtifactError

    path = Path("results/g.bm25.lee.json")
    text = path.read_text()
    path.write_text(text.replace("60.25", "69.25", 1))
    try:
        with pytest.raises(DamagedArtifactError, match="results/g.bm25.lee.json: results file edited after "
                                                       "collect-results wrote it"):
            export(experiment, "student", tmp_path / "s")
        assert not (tmp_path / "s").exists()
    finally:
        path.write_text(text)


def test_unknown_model_seed_and_unfinished_artifact(experiment, tmp_path, capsys):
    with pytest.raises(ExportError, match=r"has no lower_bound model \(it has: student, teacher;"):
        export(experiment, "lower_bound", tmp_path / "x")
    with pytest.raises(ExportError, match=r"has no seed 7 \(seeds: \[42, 43\]\)"):
        export(experiment, "student", tmp_path / "x", seed=7)
    shutil.rmtree(f"{STUDENTS[43]}/model")
    assert main(["export", "--spec", json.dumps(experiment), "--seed", "43", "--to", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err == (
        f"augsbert export: error: {STUDENTS[43]} is not a finished artifact: train it first, e.g. "
        f"`snakemake --cores 2 {STUDENTS[43]}` (or the experiment's results file)\n")
    assert not (tmp_path / "x").exists()


def test_cross_encoder_teacher_export_reproduces_scores(experiment, tmp_path):
    from sentence_transformers import CrossEncoder

    out = tmp_path / "teacher"
    export(experiment, "teacher", out)
    artifact = ARCHITECTURES["ce"].load(Path(TEACHER["ce"]) / "model", "cpu")
    expected = ARCHITECTURES["ce"].predict(artifact, PAIRS, 8, train_params("ce", **PARAMS))  # as the stage evaluated it (sigmoid)
    np.testing.assert_allclose(CrossEncoder(str(out), device="cpu").predict(PAIRS), expected, atol=1e-6)
    card = (out / "README.md").read_text()
    assert "# augsbert g.bm25.lee: teacher (Cross-Encoder, seed 42)" in card and "| spearman | 51.50 |" in card


def test_one_seed_metrics_have_no_spread_column(experiment, tmp_path):
    """Issue 50 item 7: a one-seed model's card showed `± 0.00 (n=1)` (or a column of dashes)."""
    results = json.loads(Path("results/g.bm25.lee.json").read_text())
    results["models"]["teacher"]["summary"] = {"spearman": {"mean": 51.5, "std": 0.0, "n": 1}}
    Path("results/g.bm25.lee.json").write_text(json.dumps(seal(results)))
    export(experiment, "teacher", tmp_path / "t")
    card = (tmp_path / "t" / "README.md").read_text()
    assert "| metric | this seed |\n| --- | --- |\n| spearman | 51.50 |\n| pearson | 50.00 |\n" in card
    assert "± 0.00" not in card and "mean ± std" not in card


def test_the_card_says_a_cut_pass_and_the_data_warnings(experiment, tmp_path):
    """Issue 56 (case 5): a card said "chosen epoch 1" for a run stopped at step 60 of the epoch's 277, and left
    out the data's warnings that inflate its test score (35 pairs in both train and test)."""
    student = Path(STUDENTS[42])
    spec = json.loads((student / "spec.json").read_text())
    spec["params"]["max_steps"] = 60
    (student / "spec.json").write_text(json.dumps(spec))
    metrics = json.loads((student / "metrics.json").read_text())
    metrics.update(train_pairs=4432, dev_history=[{"epoch": 1, "step": 60, "dev_spearman": 55.5, "train_loss": 0.1}])
    (student / "metrics.json").write_text(json.dumps(metrics))
    shared = "lee: 35 pair(s) occur in both train/test (a test pair seen in training inflates its score)"
    data = json.loads((Path(DATA) / "metrics.json").read_text())
    (Path(DATA) / "metrics.json").write_text(json.dumps({**data, "warnings": [shared]}))
    labels = json.loads((Path(LABELS) / "metrics.json").read_text())
    (Path(LABELS) / "metrics.json").write_text(json.dumps({**labels, "warnings": ["only 7 silver pair(s)", shared]}))
    export(experiment, "student", tmp_path / "s")
    card = (tmp_path / "s" / "README.md").read_text()
    assert ("| chosen epoch | 1, a partial pass: stopped at step 60 (max_steps 60), 60 of the epoch's 277 steps (21 % "
            "of the 4,432 training pairs seen in it) (dev Spearman 55.50) |") in card
    warnings = card.split("### Warnings\n\n", 1)[1].split("\n### ", 1)[0]
    assert warnings.endswith(f"\n\n- {shared}\n- only 7 silver pair(s)\n")  # the data's first, each once
    assert card.index("### Warnings") < card.index("### Test metrics")
    assert json.loads((tmp_path / "s" / MARKER).read_text())["warnings"] == [shared, "only 7 silver pair(s)"]
    metrics["dev_history"] = [{"epoch": 1, "step": 277, "dev_spearman": 55.5}, {"epoch": 2, "step": 554,
                                                                                "dev_spearman": 50.0}]
    (student / "metrics.json").write_text(json.dumps(metrics))
    export(experiment, "student", tmp_path / "full")
    assert "| chosen epoch | 1, at step 277 (277 steps an epoch) (dev Spearman 55.50) |" in (
        tmp_path / "full" / "README.md").read_text()


def test_metrics_fall_back_to_the_artifact_when_the_results_file_describes_another(experiment, tmp_path):
    results = json.loads(Path("results/g.bm25.lee.json").read_text())
    results["models"]["student"]["artifacts"]["42"]["model"] = "artifacts/student/lee.be-9999999999"
    Path("results/g.bm25.lee.json").write_text(json.dumps(seal(results)))
    card = (export(experiment, "student", tmp_path / "s") and (tmp_path / "s" / "README.md").read_text())
    assert "the results file describes another artifact for this model" in card
    assert "| spearman | 60.00 |\n" in card  # one seed's metrics: no column of dashes


@pytest.fixture
def cbe(tiny_model):
    torch.manual_seed(0)
    return CrossBiEncoder.from_base(tiny_model, 48)


def test_cross_bi_encoder_round_trip_and_what_other_loaders_do(cbe, tmp_path):
    from sentence_transformers import CrossEncoder, SentenceTransformer

    before = cbe.predict(PAIRS)
    cbe.save_pretrained(tmp_path / "cbe")
    loaded = CrossBiEncoder.from_pretrained(tmp_path / "cbe")
    np.testing.assert_array_equal(loaded.predict(PAIRS), before)
    assert loaded.max_length == 48
    assert "CrossBiEncoder.from_pretrained" in (tmp_path / "cbe" / "README.md").read_text()
    # CrossEncoder would add a random head: it stops, naming the loader instead
    with pytest.raises(ImportError, match=r"CrossBiEncoder\.from_pretrained\(path\)"):
        CrossEncoder(str(tmp_path / "cbe"), device="cpu")
    # SentenceTransformer converts it like any Cross-Encoder save: the CBE's own encoder, mean pooling, no new weights
    st = SentenceTransformer(str(tmp_path / "cbe"), device="cpu")
    features = cbe.tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = cbe.encoder(**features).last_hidden_state
    mask = features["attention_mask"].unsqueeze(-1).float()
    np.testing.assert_allclose(st.encode(TEXTS), ((hidden * mask).sum(1) / mask.sum(1)).numpy(), atol=1e-5)
    # a directory written before the hub format (no sentence-transformers files) still loads
    for name in ("modules.json", "config_sentence_transformers.json", "README.md"):
        (tmp_path / "cbe" / name).unlink()
    np.testing.assert_array_equal(CrossBiEncoder.load(tmp_path / "cbe").predict(PAIRS), before)


def test_cross_bi_encoder_teacher_export(cbe, experiment, tmp_path):
    hub_base = {"model": "org/encoder", "model_identity": {"model": "hub:org/encoder@main"}}  # planned from a hub id
    teacher = _artifact(TEACHER["cbe"], {"arch": "cbe", "test": {"spearman": 40.0, "pearson": 41.0, "n_pairs": 3},
                                         "seed": 42, "train_pairs": 8},
                        {**PARAMS, **hub_base, "arch": "cbe", "symmetric": True, "max_length": 48}, {"data": DATA})
    cbe.save(teacher / "model")
    for roles in experiment["runs"].values():
        roles["teacher"] = {"key": teacher.name, "stage": "teacher", "path": str(teacher)}
    export(experiment, "teacher", tmp_path / "t", model_id="me/cbe")
    exported = CrossBiEncoder.from_pretrained(tmp_path / "t")
    np.testing.assert_array_equal(exported.predict(PAIRS), cbe.predict(PAIRS))
    card = (tmp_path / "t" / "README.md").read_text()
    assert "# augsbert g.bm25.lee: teacher (Cross-Bi-Encoder, seed 42)" in card
    assert 'CrossBiEncoder.from_pretrained("me/cbe")' in card and "| spearman | 40.00 |\n" in card
    assert "\nbase_model: org/encoder\n" in card.split("---")[1]  # the card's metadata names the hub base model
    meta, body = card_parts(tmp_path / "t" / "README.md")
    assert {m["type"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]} == {
        "pearson": 0.41, "spearman": 0.4}
    assert "datasets" not in meta and "widget" not in meta  # the Lee corpus is no hub dataset; no pipeline widget
    for fact in ("`lee`: the gold train pairs (trained in both orders); 4 pairs (gold 4).",
                 "`torch.nn.MSELoss (Hugging Face Trainer)` with these parameters:", "- `warmup_steps`: 1",
                 "@inproceedings{thakur-2021-augsbert", 'author = "Reiml, Johanna"'):
        assert fact in body, fact


class FakeHub:
    """Stands in for huggingface_hub.HfApi's network calls."""

    def __init__(self, monkeypatch, fail: Exception | None = None):
        import huggingface_hub

        self.uploads, self.fail = [], fail
        monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", self.create_repo)
        monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", self.upload_folder)

    def create_repo(self, repo_id, **kwargs):  # set on the class as a bound method: no HfApi self
        if self.fail:
            raise self.fail
        from huggingface_hub import RepoUrl

        return RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(self, repo_id, folder_path, **kwargs):
        self.uploads.append((repo_id, sorted(p.name for p in Path(folder_path).iterdir())))
        return f"https://huggingface.co/{repo_id}/commit/0"


def test_push_to_hub_uploads_the_export_and_fails_offline_with_one_message(experiment, tmp_path, monkeypatch,
                                                                           capsys, cbe):
    hub = FakeHub(monkeypatch)
    out = tmp_path / "s"
    assert main(["-q", "export", "--spec", json.dumps(experiment), "--to", str(out), "--push-to-hub", "me/s"]) == 0
    assert hub.uploads == [("me/s", sorted(p.name for p in out.iterdir()))]
    assert json.loads(capsys.readouterr().out)["hub_commit"] == "https://huggingface.co/me/s/commit/0"
    cbe.push_to_hub("me/cbe")  # the CBE's own push (huggingface_hub's mixin)
    assert hub.uploads[-1] == ("me/cbe", ["README.md", "config.json", "config_sentence_transformers.json",
                                          "cross_bi_encoder.json", "model.safetensors", "modules.json",
                                          "tokenizer.json", "tokenizer_config.json"])
    FakeHub(monkeypatch, fail=ConnectionError("Failed to resolve 'huggingface.co'\nmore"))
    with pytest.raises(ExportError) as err:
        push_to_hub(out, "me/s")
    assert str(err.value) == (
        f"could not push {out} to the Hugging Face hub repository me/s (ConnectionError: Failed to resolve "
        "'huggingface.co'). The export itself is complete; with network access and a token (`hf auth login` or "
        f"HF_TOKEN) upload it later with `hf upload me/s {out} .`")


@pytest.mark.workflow
def test_rule_exports_into_models_experiment_model(tmp_path):
    """models/<experiment>/<model>/ is one export_model job after the experiment's results file (a dry run)."""
    from workflow_helpers import checkout, keep_experiments, planned

    keep_experiments(checkout(tmp_path), "demo_cbe")  # the one experiment this dry run plans
    jobs = planned(tmp_path, "models/demo_cbe/teacher")
    assert jobs["export_model"] == 1 and jobs["collect_results"] == 1 and jobs["teacher"] == 1


def test_export_refuses_an_edited_artifact_and_names_a_truncated_model(experiment, tmp_path):
    """Issue 41: export never checked manifests (a same-size edit of metrics.json went into the card), and a
    truncated model ended in safetensors' traceback."""
    from augsbert.store.artifacts import DamagedArtifactError
    from augsbert.store.manifests import write_manifest

    student = Path(STUDENTS[42])
    write_manifest(student)
    metrics = student / "metrics.json"
    metrics.write_text(metrics.read_text().replace("60.0", "69.0"))  # same size
    with pytest.raises(DamagedArtifactError, match=f"model artifact {student} is damaged: metrics.json changed"):
        export(experiment, "student", tmp_path / "out")
    (student / "manifest.json").unlink()  # an artifact written before manifests: the model itself is cut short
    weights = student / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(ExportError, match=f"cannot load the model in {student / 'model'} .*: the artifact is damaged"):
        export(experiment, "student", tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial*"))


@pytest.mark.parametrize("name, role, seed", [("demo_cbe", "teacher", 42), ("demo.bm25.lee", "student", 43),
                                             ("demo.bm25.lee", "lower_bound", 42)])
def test_recipe_holds_what_gives_the_model_its_key(tmp_path, monkeypatch, name, role, seed):
    """Issue 50 item 7: the recipe dumped the whole effective config (~290 lines), `loss: bce` under a
    Cross-Bi-Encoder teacher and the student's `selection: null` beside a teacher among them. It now holds the
    options the key needs; read as the user will (over config/config.yaml), it plans the exported model's key.
    Issue 56 (case 5): the lower bound's recipe dropped the teacher's caps while its command (the results file)
    trained the experiment's teacher, uncapped: now every artifact the recipe's results file builds is one the
    experiment planned (its `models` cut to the exported model), so nothing is built with options it left out."""
    from augsbert.config.load import load_configs
    from augsbert.export.facts import reproduce_recipe
    from augsbert.plan import Plan
    from workflow_helpers import checkout

    monkeypatch.chdir(checkout(tmp_path, ("config",)))
    plan = Plan(load_configs(None, lazy=True))
    spec = plan.experiment_spec(name)
    node = spec["runs"][str(seed)][role]
    recipe, own, unpruned = reproduce_recipe(spec, role, seed, node, None)
    assert unpruned is None and own == {"demo_cbe": "demo_cbe-reproduced"}.get(name, "demo-bm25-lee")
    Path("reproduce.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    replan = Plan(load_configs(["reproduce.yaml"], lazy=True))
    assert replan.experiment_spec(own)["runs"][str(seed)][role]["key"] == node["key"]

    def chain(graph, key):  # the model's node and all it was built from
        return [key, *[k for _, up in graph.node(key).inputs for k in chain(graph, up)]]
    assert chain(replan, node["key"]) == chain(plan, node["key"]) and len(chain(plan, node["key"])) > 1
    experiment = recipe["experiments"][own]
    # what `snakemake results/<own>.json` builds from the recipe: only artifacts the experiment planned, by role
    built = replan.experiment_spec(own)["runs"]
    assert all(run["key"] == spec["runs"][s][r]["key"] for s, roles in built.items() for r, run in roles.items())
    assert experiment["models"] == [role] and role in built[str(seed)]
    if role == "teacher":  # the CBE teacher: no Cross-Encoder loss, no student options
        assert experiment == {"dataset": "lee", "models": ["teacher"], "description": spec["config"]["description"]}
        assert spec["config"]["teacher"]["loss"] == "bce" and spec["config"]["student"]["selection"] is None
    elif role == "lower_bound":  # no teacher, no silver pairs: nothing of them is built, so no option of them
        assert not {"teacher", "labels", "candidates"} & set(built[str(seed)]) and "teacher" not in experiment
        assert "teacher" in spec["runs"][str(seed)]  # (the experiment's own teacher: capped, built by its results)
    else:  # the demo's own options: the shipped defaults give the rest
        assert experiment["candidates"] == {"strategies": ["bm25"], "top_k": 1, "pool": "train+unlabeled"}
        assert experiment["teacher"] == {"epochs": 1, "max_length": 256}
    assert replan.experiment_spec(own)["seeds"] == spec["seeds"] and recipe["datasets"] == {"lee": spec["dataset"]}


def write_planned(plan, key: str, tiny_model: str, cbe) -> None:
    """The artifacts of node `key` and all it was built from, at their planned paths with their planned
    spec.json (made-up data, metrics and statistics; the tiny model; the `cbe` fixture for a CBE teacher)."""
    node = plan.node(key)
    root = Path(node.path)
    if (root / "spec.json").is_file():
        return
    for _, up in node.inputs:
        write_planned(plan, up, tiny_model, cbe)
    spec = plan.spec(key)
    inputs, metrics = spec["inputs"], {}
    root.mkdir(parents=True)
    if node.stage == "data":
        metrics = {"sizes": {"train": 4, "dev": 2, "test": 3}}
        pd.DataFrame(GOLD, columns=["sentence1", "sentence2", "score"]).to_parquet(root / "train.parquet")
    elif node.stage == "labels":
        teacher = Path(inputs["teacher"]).name
        (root / "sampling_stats.json").write_text(json.dumps(
            {"teacher": teacher, "teacher_arch": teacher.split("-")[0].rsplit(".", 1)[-1], "pairs": 7,
             "strategies": {"bm25": {"kept": 3, "after_dedup": 3}, "gold": {"kept": 4, "after_dedup": 4}}}))
        pd.DataFrame(SILVER, columns=["sentence1", "sentence2", "score", "strategy"]).to_parquet(root / "pairs.parquet")
    elif node.stage == "teacher":
        assert spec["params"]["arch"] == "cbe", "a CBE teacher only"
        metrics = {"arch": "cbe", "seed": 42, "train_pairs": 4, "test": {"spearman": 40.0, "pearson": 41.0}}
        cbe.save(root / "model")
    elif node.stage == "student":
        metrics = {"arch": "be", "test": {"spearman": 60.0, "pearson": 61.0}, "train_pairs": 7, "seed": 42,
                   "training_set": {"relabelled_gold": 4, "bm25": 3}, "best_epoch": 1, "dev_spearman": 55.5,
                   "dev_history": [{"epoch": 1, "step": 1, "dev_spearman": 55.5, "train_loss": 0.125}]}
        shutil.copytree(tiny_model, root / "model")
    (root / "metrics.json").write_text(json.dumps(metrics))
    (root / "spec.json").write_text(json.dumps(spec))


def test_cbe_teacher_card_says_only_what_made_it(tmp_path, monkeypatch, tiny_model, cbe):
    """Issue 50 item 7: a CBE teacher's card listed `loss: bce` (the Cross-Encoder's option) and the student's
    `selection: null` in its recipe, and ~290 lines, mostly the template's unused sections."""
    from augsbert.config.load import load_configs
    from augsbert.plan import Plan
    from workflow_helpers import checkout

    monkeypatch.chdir(checkout(tmp_path / "clone", ("config",)))
    plan = Plan(load_configs(None, lazy=True))
    spec = plan.experiment_spec("demo_cbe")
    teacher = spec["runs"]["42"]["teacher"]
    write_planned(plan, teacher["key"], tiny_model, cbe)
    export(spec, "teacher", tmp_path / "t")
    card = (tmp_path / "t" / "README.md").read_text()
    recipe = yaml.safe_load(card.split("save this as `reproduce.yaml`", 1)[1].split("```yaml\n", 1)[1].split("```")[0])
    assert recipe["experiments"] == {"demo_cbe-reproduced": {"dataset": "lee", "models": ["teacher"],
                                                             "description": spec["config"]["description"]}}
    assert f"this model (artifact key `{teacher['key']}`), what it is built from and its evaluation" in card
    assert "results/demo_cbe-reproduced.json   # trains this teacher and what it is built from, then scores it" in card
    for word in ("bce", "selection", "use_gold_labels", "sampling", "<!--", "Additional Resources"):
        assert word not in card, word  # nothing of the Cross-Encoder, the student, the silver data; no empty section
    settings = card.split("### Settings (what entered the artifact keys)", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in settings.splitlines() if line.startswith("| `")]
    assert [row.split(" | ")[:2] for row in rows] == [[f"| `{teacher['key']}`", "teacher"],
                                                      [f"| `{spec['runs']['42']['data']['key']}`", "data"]]
    assert "arch `cbe`" in rows[0] and "symmetric `true`" in rows[0] and "eval_batch_size" not in rows[0]
    facts = json.loads((tmp_path / "t" / MARKER).read_text())
    assert facts["settings"] == {k: v for k, v in plan.spec(teacher["key"])["params"].items()
                                 if k not in plan.spec(teacher["key"])["runtime"]} and "loss" not in facts["settings"]
    assert [(b["key"], b["stage"]) for b in facts["built_from"]] == [(spec["runs"]["42"]["data"]["key"], "data")]
    assert [line for line in card.splitlines() if line.startswith("## ")] == [
        "## Usage", "## Training (augsbert)", "## Citation"]  # the CBE card: usage first


@pytest.mark.parametrize("make", ["folder", "latin-1"])
def test_s9_s10_a_results_file_not_utf8_or_a_folder_is_named_not_a_traceback(experiment, tmp_path, make):
    """Issue 56 S9, S10: export read a results file holding non-UTF-8 bytes into a UnicodeDecodeError, and took a
    folder named results/<experiment>.json for no results (a card without its metrics)."""
    from augsbert.store.artifacts import DamagedArtifactError

    path = Path("results/g.bm25.lee.json")
    path.unlink()
    if make == "folder":
        path.mkdir()
        expected = "results/g.bm25.lee.json: is a directory, not a results file; remove or rename it"
    else:
        path.write_bytes(b'{"experiment": "caf\xe9"}')
        expected = ("results/g.bm25.lee.json:1: not valid utf-8 text (byte 0xe9 at byte offset 19); not as "
                    "collect-results wrote it: collect it again from the artifacts (`snakemake results/g.bm25.lee.json`"
                    " after deleting it, or `augsbert collect-results`); nothing was published")
    with pytest.raises(DamagedArtifactError) as err:
        export(experiment, "student", tmp_path / "s")
    assert str(err.value) == expected
    assert not (tmp_path / "s").exists()


def test_x4_the_cards_export_line_quotes_a_path_with_spaces(experiment, tmp_path):
    """Issue 56 X4: the card's recipe wrote `--to my models/s` unquoted, two words to a shell."""
    import shlex

    target = tmp_path / "my models" / "it's here"
    export(experiment, "student", target)
    line = next(line for line in (target / "README.md").read_text().splitlines()
                if line.startswith(".venv/bin/augsbert export "))
    words = shlex.split(line)
    assert words[words.index("--to") + 1] == str(target) and words[-1] == str(target)
