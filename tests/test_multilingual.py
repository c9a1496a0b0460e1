"""Multilingual knowledge distillation (issue 67; docs/methods/multilingual.md): the parallel loaders, the pairs that
may train, the teacher's cached embeddings, the loss, the per-language figures and the planning of the chain."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from augsbert.errors import ConfigError, DataError
from conftest import plan_shipped
from test_loaders import load, options

LANGS = ("en", "de", "fr")


def write_rows(root: Path, rows: dict[str, dict[str, list[tuple]]]) -> Path:
    """stsb-<language>-<split>.csv files (comma-separated, no header) of `rows`: language -> split -> rows."""
    root.mkdir(parents=True, exist_ok=True)
    for language, splits in rows.items():
        for split, table in splits.items():
            with open(root / f"stsb-{language}-{split}.csv", "w", newline="", encoding="utf-8") as handle:
                csv.writer(handle, lineterminator="\n").writerows(table)
    return root


def parallel_rows(n: int = 4, languages=LANGS) -> dict[str, dict[str, list[tuple]]]:
    """Row-parallel STS rows: row i of every language says the same thing (`<language> <split> a <i>`), a comma in
    every other sentence (quoted in the file), scores 0-5."""
    return {language: {split: [(f"{language} {split} a{i}" + (", quoted" if i % 2 else ""), f"{language} {split} b{i}",
                                f"{i % 6}.0") for i in range(n)] for split in ("train", "dev", "test")}
            for language in languages}


def rows_dataset(tmp_path: Path, rows=None, **extra):
    write_rows(tmp_path / "raw" / "stsb-multi-mt", rows or parallel_rows())
    return load("parallel_rows", tmp_path / "raw", languages=["de", "fr"], **extra)[0]


# ------------------------------------------------------------------ the loaders

def test_row_parallel_files_give_the_source_pairs_their_translations_and_the_parallel_sentences(tmp_path):
    prepared = rows_dataset(tmp_path)
    assert prepared.splits["test"]["sentence1"].tolist()[:2] == ["en test a0", "en test a1, quoted"]
    assert prepared.splits["test"]["score"].tolist() == [0.0, 0.2, 0.4, 0.6]  # 0-5 rescaled
    translated = prepared.translated
    de = translated[(translated["split"] == "test") & (translated["language"] == "de")]
    assert de["row"].tolist() == [0, 1, 2, 3] and de["sentence2"].tolist()[3] == "de test b3"
    parallel = prepared.parallel
    train_fr = parallel[(parallel["split"] == "train") & (parallel["language"] == "fr")]
    assert list(zip(train_fr["source"], train_fr["target"]))[:3] == [
        ("en train a0", "fr train a0"), ("en train b0", "fr train b0"), ("en train a1, quoted", "fr train a1, quoted")]
    assert len(parallel) == 3 * 2 * 2 * 4  # splits x languages x (sentence1, sentence2) x rows
    assert prepared.info["languages"] == ["de", "fr"] and prepared.info["source_language"] == "en"


@pytest.mark.parametrize("damage, where", [
    ("shorter", "stsb-en-train.csv:4: row 4 has no partner in"),
    ("longer", "stsb-de-train.csv:5: row 5 has no partner in"),
    ("empty", "stsb-fr-dev.csv:3: empty sentence2"),
    ("fields", "stsb-de-test.csv:2: expected 3 fields"),
])
def test_misaligned_row_parallel_files_stop_with_one_line_naming_file_and_line(tmp_path, damage, where):
    """Different row counts, an untranslated (empty) sentence or a broken row: one line with the file and line, also
    under on_bad_rows: skip (a row skipped in one file would pair every later row with another's translation)."""
    rows = parallel_rows()
    if damage == "shorter":
        rows["de"]["train"].pop()
    elif damage == "longer":
        rows["de"]["train"].append(("de extra", "de extra b", "1.0"))
    elif damage == "empty":
        rows["fr"]["dev"][2] = ("fr dev a2", "  ", "2.0")
    else:
        rows["de"]["test"][1] = ("de test a1", "3.0")
    with pytest.raises(DataError) as err:
        rows_dataset(tmp_path, rows, on_bad_rows="skip")
    message = str(err.value)
    assert "\n" not in message and where in message, message
    assert str(tmp_path / "raw" / "stsb-multi-mt") in message


def test_the_bundled_sample_is_row_parallel_and_licensed(tmp_path):
    from augsbert.data.parallel_loaders import SAMPLE

    prepared = load("parallel_rows", tmp_path, bundled=True, languages=["de", "es", "fr", "zh"])[0]
    assert {k: len(v) for k, v in prepared.splits.items()} == {"train": 300, "dev": 100, "test": 100}
    assert set(prepared.translated["language"]) == {"de", "es", "fr", "zh"}
    assert "CC BY-SA" in (SAMPLE / "NOTICE.md").read_text()
    from augsbert.data import MissingDataError, get_loader

    with pytest.raises(MissingDataError, match="has no 'it' .stsb-it-train.csv.; it holds de, en, es, fr, zh"):
        get_loader("parallel_rows").inputs("x", options("parallel_rows", bundled=True, languages=["it"]), tmp_path)


@pytest.mark.parametrize("suffix, delimiter", [(".tsv", "\t"), (".csv", ",")])
def test_a_parallel_file_of_your_own_tab_or_comma(tmp_path, suffix, delimiter):
    (tmp_path / f"de-en{suffix}").write_text(delimiter.join(["source", "target"]) + "\n"
                                             + delimiter.join(["Hello world", "Hallo Welt"]) + "\n"
                                             + delimiter.join(["A test sentence", "Ein Testsatz"]) + "\n",
                                             encoding="utf-8")
    (tmp_path / f"test{suffix}").write_text(f"source{delimiter}target\nGood night{delimiter}Gute Nacht\n",
                                            encoding="utf-8")
    prepared = load("parallel_file", tmp_path, path=f"de-en{suffix}", test=f"test{suffix}", language="de")[0]
    assert prepared.splits == {} and prepared.info["languages"] == ["de"]
    assert prepared.parallel.values.tolist() == [["train", "de", "Hello world", "Hallo Welt"],
                                                 ["train", "de", "A test sentence", "Ein Testsatz"],
                                                 ["test", "de", "Good night", "Gute Nacht"]]
    with pytest.raises(DataError, match="datasets.x.language: name the translations' language"):
        load("parallel_file", tmp_path, path=f"de-en{suffix}")


# ------------------------------------------------------------------ no dev or test sentence trains

def data_artifact(tmp_path: Path, rows=None, name="parallel") -> Path:
    from augsbert.jobs import data as data_job

    write_rows(tmp_path / "raw" / "stsb-multi-mt", rows or parallel_rows())
    out = tmp_path / name
    data_job.run({"params": {**options("parallel_rows", languages=["de", "fr"]), "dataset": "x",
                             "data_dir": str(tmp_path / "raw")}}, out)
    return out


def test_no_dev_or_test_sentence_trains_and_the_warning_says_how_many(tmp_path, tiny_model):
    """A train row whose original is a test sentence, one whose translation is a dev translation, and one whose
    original is a test sentence of the experiment's own data: their parallel pairs are dropped (3 pairs: the
    original's sentence with each language's, and the translation's pair), the job says how many."""
    from augsbert.data.parallel import held_out_sentences
    from augsbert.jobs import source_embeddings
    from augsbert.training.multilingual import read_targets

    rows = parallel_rows()
    rows["en"]["train"][0] = ("en test a2", "en train b0", "1.0")  # an original that is a test sentence
    rows["fr"]["train"][1] = ("fr dev a3, quoted", "fr train b1", "1.0")  # a translation that is a dev translation
    rows["en"]["train"][2] = ("target test sentence", "en train b2", "1.0")  # the experiment's own test sentence
    parallel = data_artifact(tmp_path, rows)
    target = tmp_path / "target"
    target.mkdir()
    pd.DataFrame({"sentence1": ["target test sentence"], "sentence2": ["other"], "score": [0.5]}).to_parquet(
        target / "test.parquet")
    held_out = held_out_sentences(parallel, target)
    spec = {"params": {"model": tiny_model, "max_per_language": None, "eval_batch_size": 8},
            "inputs": {"parallel": str(parallel), "data": str(target)}}
    metrics = source_embeddings.run(spec, tmp_path / "targets", device="cpu")
    pairs, _ = read_targets(tmp_path / "targets")
    assert not (set(pairs["source"]) | set(pairs["target"])) & held_out
    assert metrics["dropped"] == 5 and len(pairs) == 2 * 2 * 4 - 5  # de and fr of rows 0 and 2; fr of row 1
    assert metrics["warnings"] == ["5 parallel train pair(s) hold a dev or test sentence (of the parallel dataset or "
                                   "the experiment's data): dropped, never trained on"]
    # without the held-out sentences in train, nothing is dropped and nothing is said
    metrics = source_embeddings.run({**spec, "inputs": {"parallel": str(data_artifact(tmp_path, name="clean"))}},
                                    tmp_path / "clean-targets", device="cpu")
    assert metrics["dropped"] == 0 and metrics["warnings"] == []


def test_the_cached_embeddings_are_the_teacher_artifacts_and_its_key_holds_it(tmp_path, tiny_model, minilm_path):
    """The embeddings are the teacher model's own `encode` of each original (row `source_id`), read from the teacher
    artifact; the node's key changes with the teacher's artifact."""
    import conftest
    from sentence_transformers import SentenceTransformer

    from augsbert.jobs import source_embeddings
    from augsbert.training.multilingual import read_targets

    parallel = data_artifact(tmp_path)
    teacher = tmp_path / "teacher"
    conftest.save_tiny_model(teacher / "model", minilm_path, seed=7)  # another teacher than `tiny_model`
    spec = {"params": {"max_per_language": None, "eval_batch_size": 4},
            "inputs": {"parallel": str(parallel), "teacher": str(teacher)}}
    metrics = source_embeddings.run(spec, tmp_path / "targets", device="cpu")
    pairs, embeddings = read_targets(tmp_path / "targets")
    expected = SentenceTransformer(str(teacher / "model"), device="cpu").encode(pairs["source"].tolist())
    np.testing.assert_allclose(embeddings[pairs["source_id"].to_numpy()], expected, atol=1e-6)
    other = SentenceTransformer(tiny_model, device="cpu").encode(pairs["source"].tolist())
    assert not np.allclose(embeddings[pairs["source_id"].to_numpy()], other, atol=1e-3)
    assert metrics["sources"] == len(set(pairs["source"])) == len(embeddings) < len(pairs)
    # planned: the teacher artifact is an input of the key; another teacher row, another key
    runs = {row: planned_runs(multilingual={"teacher": row}) for row in ("student", "lower_bound")}
    for row, runs_ in runs.items():
        plan, keys = runs_
        node = plan.node(keys["source_embeddings"])
        assert dict(node.inputs)["teacher"] == keys[row]
    assert runs["student"][1]["source_embeddings"] != runs["lower_bound"][1]["source_embeddings"]


# ------------------------------------------------------------------ the loss

def test_the_loss_is_a_literal_mse_of_both_terms(tmp_path, tiny_model):
    """The trainer's loss on a batch equals the paper's two terms computed by hand: the mean over the batch and
    the dimensions of (M(s) - M^(s))^2 and of (M(s) - M^(t))^2, halved (MSELoss averages its two columns)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from augsbert.stages.multilingual import MultilingualParams
    from augsbert.training.multilingual import training_rows
    from augsbert.training.trainers import multilingual_trainer

    model = SentenceTransformer(tiny_model, device="cpu")
    model.eval()
    pairs = pd.DataFrame({"language": ["de", "fr", "de"], "source": ["a cat", "a cat", "two dogs run"],
                          "target": ["eine Katze", "un chat", "zwei Hunde rennen"], "source_id": [1, 1, 0]})
    teacher = np.random.default_rng(0).normal(size=(2, model.get_embedding_dimension())).astype(np.float32)
    rows = training_rows(pairs, teacher)
    params = MultilingualParams.from_json({"model": tiny_model, "seed": 1, "max_steps": 1}, "t")
    trainer = multilingual_trainer(model, rows, params, tmp_path / "work", "cpu")
    batch = trainer.data_collator([rows[i] for i in range(len(rows))])
    with torch.no_grad():
        loss = float(trainer.compute_loss(model, batch))
    student_s = model.encode(pairs["source"].tolist())
    student_t = model.encode(pairs["target"].tolist())
    target = teacher[pairs["source_id"].to_numpy()]
    literal = sum(((target[j] - student_s[j]) ** 2).sum() + ((target[j] - student_t[j]) ** 2).sum()
                  for j in range(len(pairs))) / (2 * len(pairs) * target.shape[1])
    assert loss == pytest.approx(float(literal), rel=1e-5)
    one_term = ((target - student_t) ** 2).mean()
    assert loss != pytest.approx(float(one_term), rel=1e-3)  # the source's own term counts


def test_a_student_of_another_size_gets_a_linear_layer_to_the_teachers(tmp_path, tiny_model):
    from sentence_transformers import SentenceTransformer

    from augsbert.training.multilingual import match_dimension

    model = SentenceTransformer(tiny_model, device="cpu")
    assert not match_dimension(model, 16)
    assert match_dimension(model, 8) and model.get_embedding_dimension() == 8
    assert [type(m).__name__ for m in model] == ["Transformer", "Pooling", "Dense", "Normalize"]
    model.save(str(tmp_path / "saved"))
    assert SentenceTransformer(str(tmp_path / "saved"), device="cpu").encode(["a"]).shape == (1, 8)


# ------------------------------------------------------------------ the per-language figures

class Vectors:
    """An Encoder of fixed vectors (normalised) per text: the figures are computable by hand."""

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors = {t: np.asarray(v, dtype=np.float64) / np.linalg.norm(v) for t, v in vectors.items()}

    def __call__(self, texts):
        return np.stack([self.vectors[t] for t in texts])

    def cosine(self, pairs):
        return np.array([self.vectors[a] @ self.vectors[b] for a, b in pairs])


def test_cross_lingual_sts_of_a_constructed_case_is_the_hand_computation(tmp_path):
    """en-l pairs are (the original's sentence1, the translation's sentence2) with the original's score. Four test
    rows with 2-d vectors at angles chosen so that the cosines rank as computed here; Spearman by its formula."""
    from augsbert.evaluation.multilingual import language_figures

    rows = parallel_rows(4, ("en", "de"))
    rows["de"]["test"] = [(f"de a{i}", f"de b{i}", s) for i, s in enumerate(("0.0", "5.0", "1.0", "4.0"))]
    rows["en"]["test"] = [(f"en a{i}", f"en b{i}", s) for i, s in enumerate(("1.0", "2.0", "3.0", "4.0"))]
    write_rows(tmp_path / "raw" / "stsb-multi-mt", rows)
    from augsbert.jobs import data as data_job

    data_job.run({"params": {**options("parallel_rows", languages=["de"]), "dataset": "x",
                             "data_dir": str(tmp_path / "raw")}}, tmp_path / "data")
    angle = {"en a0": 0, "de b0": 80, "en a1": 0, "de b1": 10, "en a2": 0, "de b2": 60, "en a3": 0, "de b3": 30,
             "de a0": 0, "en b0": 40, "de a1": 0, "en b1": 50, "de a2": 0, "en b2": 20, "de a3": 0, "en b3": 70}
    vectors = {t: [np.cos(np.radians(a)), np.sin(np.radians(a))] for t, a in angle.items()}
    for i in range(4):  # the l-l pairs' sentences: any vectors
        vectors.setdefault(f"de a{i}", [1, 0])
    figures, details, skipped = language_figures(Vectors({**extra_vectors(tmp_path), **vectors}), None,
                                                 tmp_path / "data", "de")
    # en-l: cosines cos 80, cos 10, cos 60, cos 30 -> ranks 1, 4, 2, 3 against gold 1, 2, 3, 4 (the original's)
    d = np.array([1, 4, 2, 3]) - np.array([1, 2, 3, 4])
    assert figures["sts_en_l"] == pytest.approx(100 * (1 - 6 * (d ** 2).sum() / (4 * (16 - 1)))) == 40.0
    # l-en: cos 40, 50, 20, 70 -> ranks 3, 2, 4, 1 against 1, 2, 3, 4
    d = np.array([3, 2, 4, 1]) - np.array([1, 2, 3, 4])
    assert figures["sts_l_en"] == pytest.approx(100 * (1 - 6 * (d ** 2).sum() / (4 * 15))) == -40.0
    assert details["sts_en_l"]["n_pairs"] == 4 and "translation_acc" in figures
    assert skipped == {"unk_share": "no test sentences, or the tokenizer has no unknown token"}  # no tokenizer here


def extra_vectors(tmp_path: Path) -> dict[str, list[float]]:
    """Vectors for the other sentences the figures read (the held-out translations), distinct per text."""
    table = pd.read_parquet(tmp_path / "data" / "parallel.parquet")
    texts = sorted(set(table["source"]) | set(table["target"]))
    return {t: [1.0, 0.1 * (i + 1)] for i, t in enumerate(texts)}


def test_translation_accuracy_is_the_brute_force_nearest_translation():
    from augsbert.evaluation.multilingual import translation_accuracy

    rng = np.random.default_rng(3)
    sources, targets = rng.normal(size=(40, 5)), rng.normal(size=(30, 5))
    gold = rng.integers(0, 30, 40)
    targets[gold[:25]] = sources[:25] + 0.05 * rng.normal(size=(25, 5))  # most have their translation near

    def cos(a, b):
        return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))

    right = 0
    for i in range(40):
        best = max(range(30), key=lambda j: cos(sources[i], targets[j]))
        right += best == gold[i]
    assert translation_accuracy(sources, targets, gold) == pytest.approx(100 * right / 40)
    assert 0 < right < 40


def test_the_unk_share_counts_the_tokenizers_unknown_token(minilm_path):
    from transformers import AutoTokenizer

    from augsbert.evaluation.multilingual import unk_share

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    texts = ["a cat", "\U0001f9ec \U0001f9ec cat"]  # MiniLM's vocabulary has no DNA emoji
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    unknown = sum(row.count(tokenizer.unk_token_id) for row in ids)
    assert unknown == 2 and unk_share(tokenizer, texts) == pytest.approx(100 * 2 / sum(map(len, ids)))
    assert unk_share(tokenizer, ["a cat"]) == 0.0


# ------------------------------------------------------------------ planning

def planned_runs(**experiment):
    exp = {"dataset": "stsb_multi_mt_sample", "models": ["zero_shot", "lower_bound", "student", "multilingual"],
           **experiment}
    plan = plan_shipped({"experiments": {"m": exp}}, grids=False, plan=())
    return plan, plan.experiment("m").runs[42]


def test_the_chain_plans_the_teacher_the_targets_the_student_and_a_language_suite_per_row():
    plan, runs = planned_runs()
    assert {"source_embeddings", "multilingual", "zero_shot_language_suite", "student_language_suite",
            "multilingual_language_suite"} <= set(runs) and "lower_bound_language_suite" not in runs
    targets = plan.node(runs["source_embeddings"])
    assert dict(targets.inputs) == {"parallel": runs["data"], "data": runs["data"], "teacher": runs["student"]}
    student = plan.node(runs["multilingual"])
    assert dict(student.inputs) == {"source_embeddings": runs["source_embeddings"], "data": runs["data"]}
    assert student.settings["model"] == "minilm-l6"  # the teacher's own base
    assert {k: student.params[k] for k in ("max_length", "batch_size", "lr", "warmup_ratio", "epochs")} == {
        "max_length": 128, "batch_size": 64, "lr": 2e-5, "warmup_ratio": 0.1, "epochs": 5}
    suite = plan.node(runs["multilingual_language_suite"])
    assert dict(suite.inputs) == {"parallel": runs["data"], "model": runs["multilingual"]}
    assert suite.params["language"] is None
    # the base as it is teaches: no teacher input, the base model's identity in the key
    plan, runs = planned_runs(multilingual={"teacher": "zero_shot", "language": "de"})
    targets = plan.node(runs["source_embeddings"])
    assert "teacher" not in dict(targets.inputs) and targets.settings["model"] == "minilm-l6"
    assert plan.node(runs["zero_shot_language_suite"]).params["language"] == "de"
    # evaluation only: the reported language changes no trained node
    assert runs["multilingual"] == planned_runs(multilingual={"teacher": "zero_shot"})[1]["multilingual"]


@pytest.mark.parametrize("experiment, message", [
    ({"dataset": "lee"}, "experiments.m.dataset: 'lee' (loader lee) holds no parallel sentences"),
    ({"multilingual": {"dataset": "nope"}}, "experiments.m.multilingual.dataset: no dataset 'nope'"),
    ({"multilingual": {"language": "it"}}, "multilingual.language: 'it' is not a language of dataset"),
    ({"models": ["multilingual"], "multilingual": {"teacher": "student"}},
     "multilingual.teacher: student, but `models` lacks student"),
])
def test_a_chain_that_cannot_be_planned_says_why_in_one_line(experiment, message):
    with pytest.raises(ConfigError) as err:
        planned_runs(**experiment)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_grids_columns_are_languages_sharing_one_student():
    from augsbert.reporting.layout import grid_spec

    plan = plan_shipped({}, plan=())
    students = {plan.experiment(f"demo_multilingual.{language}").runs[42]["multilingual"]
                for language in ("de", "es", "fr", "zh")}
    assert len(students) == 1
    suites = {plan.experiment(f"demo_multilingual.{language}").runs[42]["multilingual_language_suite"]
              for language in ("de", "es", "fr", "zh")}
    assert len(suites) == 4
    spec = grid_spec(plan, "multilingual")
    assert [row["label"] for row in spec["rows"]] == ["Zero-shot base model", "Teacher: AugSBERT",
                                                      "Multilingual student"]
    assert spec["columns"] == ["de", "es", "fr", "it", "nl", "pl", "pt", "ru", "zh", "ja"]


# ------------------------------------------------------------------ the demo, CI-sized, to its table and card

@pytest.mark.workflow
def test_demo_multilingual_runs_to_its_table_and_the_students_card(tmp_path, tiny_model):
    """A CI-sized cut of the shipped `demo_multilingual` (two of its language columns, the tiny model, a few steps):
    the grid's table has the rows zero-shot / teacher / student and a column per language, and the exported
    student's card names its languages with the figures of the column's language."""
    import yaml

    from workflow_helpers import checkout, keep_experiments, run

    root = checkout(tmp_path / "project")
    grid = yaml.safe_load((root / "config" / "grids" / "demo_multilingual.yaml").read_text())
    keep_experiments(root, "demo_zeroshot")
    grid["columns"] = {k: v for k, v in grid["columns"].items() if k in ("de", "zh")}
    grid["options"].update(base_model=tiny_model, teacher={"epochs": 1, "max_length": 48, "batch_size": 32},
                           student={"epochs": 1, "max_length": 32, "batch_size": 32},
                           multilingual={"max_steps": 3, "max_length": 32, "batch_size": 32},
                           suite={"max_length": 32, "suites": []})
    (root / "config" / "grids").mkdir()
    (root / "config" / "grids" / "demo_multilingual.yaml").write_text(yaml.safe_dump(grid, sort_keys=False))
    jobs = run(root, "results/tables/demo_multilingual.md", "models/demo_multilingual.de/multilingual")
    assert jobs["multilingual"] == jobs["source_embeddings"] == 1 and jobs["language_suite"] == 3 * 2
    table = pd.read_csv(root / "results" / "tables" / "demo_multilingual.csv")
    assert table["method"].unique().tolist() == ["Zero-shot base model", "Teacher: AugSBERT", "Multilingual student"]
    assert sorted(table["column"].unique()) == ["de", "zh"]
    assert table["mean"].notna().all(), table[table["mean"].isna()]
    text = (root / "results" / "tables" / "demo_multilingual.md").read_text()
    assert "| Method | de | zh | Avg. |" in text and "Translation retrieval accuracy" in text
    results = json.loads((root / "results" / "demo_multilingual.de.json").read_text())
    student = results["models"]["multilingual"]["per_seed"]["42"]
    assert {"sts_l_l", "sts_en_l", "sts_l_en", "translation_acc", "unk_share", "spearman"} <= set(student)
    assert any("dev or test sentence" in w for w in results["warnings"])  # the sample's STS-B repeats a few
    card = (root / "models" / "demo_multilingual.de" / "multilingual" / "README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["language"] == ["en", "de", "es", "fr", "zh"]
    assert "### Languages and their figures" in card and "Making Monolingual Sentence Embeddings" in card
    row = next(line for line in card.splitlines() if line.startswith("| de |"))
    assert f"{student['translation_acc']:.2f}" in row and "| es | – | – | – | – | – |" in card
