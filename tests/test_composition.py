"""What the student learns from: gold, re-labelled gold and silver pairs, counted per source."""

import json

import pandas as pd
import pytest

from augsbert.data import DataError
from augsbert.jobs import labels
from augsbert.training.pair_job import student_training_set

GOLD = pd.DataFrame({"sentence1": ["a", "b", "c"], "sentence2": ["x", "y", "z"], "score": [0.1, 0.5, 0.9]})


def write_labels(path, rows):
    path.mkdir()
    pd.DataFrame(rows, columns=["sentence1", "sentence2", "score", "strategy"]).to_parquet(path / "pairs.parquet")
    return path


@pytest.fixture
def inputs(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    GOLD.to_parquet(data / "train.parquet")
    silver = write_labels(tmp_path / "labels", [
        ("a", "x", 0.2, "gold"), ("b", "y", 0.4, "gold"), ("c", "z", 0.8, "gold"),
        ("a", "b", 0.3, "bm25"), ("a", "c", 0.6, "bm25"), ("x", "y", 0.7, "kde")])
    return {"data": str(data), "labels": str(silver)}


def counts(table):
    return table["source"].value_counts().to_dict()


def test_thesis_default_each_gold_pair_once_with_the_teachers_score(inputs):
    table = student_training_set(inputs, False)
    assert counts(table) == {"relabelled_gold": 3, "bm25": 2, "kde": 1}
    assert table.loc[table["source"] == "relabelled_gold", "score"].tolist() == [0.2, 0.4, 0.8]


def test_gold_labels_and_relabelled_gold_give_each_gold_pair_twice(inputs):
    table = student_training_set(inputs, True)
    assert counts(table) == {"gold": 3, "relabelled_gold": 3, "bm25": 2, "kde": 1}
    gold = table[table["source"] == "gold"]
    assert gold[["sentence1", "sentence2", "score"]].reset_index(drop=True).equals(GOLD)


def test_gold_only_and_nothing(inputs):
    table = student_training_set({"data": inputs["data"]}, True)
    assert counts(table) == {"gold": 3}
    with pytest.raises(DataError, match="no training pairs"):
        student_training_set({"data": inputs["data"]}, False)


def test_labels_deduplicate_across_strategies_and_honour_relabel_gold(tmp_path, tiny_model):
    from augsbert.models.architectures import ARCHITECTURES

    teacher = tmp_path / "teacher"
    from augsbert.stages.teacher import TeacherParams
    from conftest import teacher_spec_params

    params = teacher_spec_params(max_length=32)
    # which pairs are kept and how they are counted, not their scores: the random tiny BERT as teacher
    ARCHITECTURES["cbe"].save(ARCHITECTURES["cbe"].build(tiny_model, TeacherParams.from_json(params), "cpu"),
                              teacher / "model")
    (teacher / "spec.json").write_text(json.dumps({"params": params}))
    gold = tmp_path / "gold"
    gold.mkdir()
    GOLD.to_parquet(gold / "train.parquet")
    cands = tmp_path / "candidates"
    cands.mkdir()
    pd.DataFrame({"sentence1": ["a", "b", "y", "b"], "sentence2": ["b", "c", "x", "a"],
                  "strategy": ["bm25", "bm25", "random", "random"]}).to_parquet(cands / "candidates.parquet")
    (cands / "metrics.json").write_text(json.dumps({"excluded": {}, "pool_sentences": 6}))

    def label(relabel_gold, out):
        spec = {"stage": "labels", "key": "t-0000000000",
                "params": {"relabel_gold": relabel_gold, "batch_size": 8, "kde_reference": "teacher", "seed": 1},
                "inputs": {"teacher": str(teacher), "gold": str(gold), "candidates": str(cands)}}
        stats = labels.run(spec, tmp_path / out, device="cpu")
        return stats, pd.read_parquet(tmp_path / out / "pairs.parquet")

    stats, pairs = label(True, "with_gold")
    # random's (b, a) repeats bm25's (a, b) in the other order: the first strategy keeps it
    assert pairs["strategy"].value_counts().to_dict() == {"gold": 3, "bm25": 2, "random": 1}
    assert stats["duplicates_across_strategies"] == 1 and stats["strategies"]["random"]["after_dedup"] == 1
    stats, pairs = label(False, "without_gold")
    assert pairs["strategy"].value_counts().to_dict() == {"bm25": 2, "random": 1}
    inputs = {"data": str(gold), "labels": str(tmp_path / "without_gold")}
    assert counts(student_training_set(inputs, False)) == {"bm25": 2, "random": 1}
