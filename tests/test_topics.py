"""Topic prompts (thesis 4.4): exact token layouts, the prompt never masked, prompts through the stages."""

from __future__ import annotations

import json
import pandas as pd
import pytest

from augsbert.data.prompts import (
    ensure_delimiter,
    prompt,
    prompt_pairs,
    prompt_positions,
    single_token_id,
    topic_map,
)
from augsbert.models.cross_bi_encoder import PairTokenizer
from augsbert.models.mlm import IGNORE, MLMPairCollator
from augsbert.stages.data import data_node


def tokens(tokenizer, ids) -> list[str]:
    return tokenizer.convert_ids_to_tokens(list(ids))


def test_prompt_text_and_bert_layout(bert_tokenizer):
    assert prompt("the child is a person", "Abortion") == "Abortion ¥ the child is a person"
    assert prompt("no topic", "") == "no topic"
    assert single_token_id(bert_tokenizer, "¥") == bert_tokenizer.convert_tokens_to_ids("¥")
    ids = bert_tokenizer(prompt("the child is a person", "Abortion"))["input_ids"]
    assert tokens(bert_tokenizer, ids) == ["[CLS]", "abortion", "¥", "the", "child", "is", "a", "person", "[SEP]"]


def test_roberta_layout_adds_a_delimiter_only_when_split(roberta_tokenizer):
    tok = roberta_tokenizer
    plain = tokens(tok, tok("hello world")["input_ids"])
    assert single_token_id(tok, "¥") is None  # byte-level BPE splits it into bytes here
    delimiter = ensure_delimiter(tok, "¥")
    assert single_token_id(tok, "¥") == delimiter
    ids = tok(prompt("hello world", "Abortion"))["input_ids"]
    topic = tokens(tok, tok("Abortion", add_special_tokens=False)["input_ids"])
    assert tokens(tok, ids) == ["<s>", *topic, tokens(tok, [delimiter])[0], *plain[1:]]
    assert ensure_delimiter(tok, "¥") == delimiter  # idempotent: nothing added twice


def test_cbe_pair_layout_with_prompts(bert_tokenizer):
    pair = PairTokenizer(bert_tokenizer, 64, True)
    feats = pair([prompt("science is wrong", "Nuclear energy")], [prompt("guns kill", "Gun control")])
    assert tokens(bert_tokenizer, feats["input_ids"][0]) == [
        "[CLS]", "nuclear", "energy", "¥", "science", "is", "wrong", "[SEP]",
        "[CLS]", "gun", "control", "¥", "guns", "kill", "[SEP]"]
    assert feats["segment1_mask"][0].tolist() == [1] * 8 + [0] * 7


def test_prompt_positions_exact_mask(bert_tokenizer):
    pair = PairTokenizer(bert_tokenizer, 64, True)
    feats = pair([prompt("science is wrong", "Nuclear energy"), "plain text here"],
                 [prompt("guns kill", "Gun control"), prompt("a b", "Abortion")])
    delimiter = bert_tokenizer.convert_tokens_to_ids("¥")
    mask = prompt_positions(feats["input_ids"], bert_tokenizer.cls_token_id, delimiter)
    assert mask[0].tolist() == [0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0]
    # row 2: the unprompted first text has no prompt positions; padding never counts
    row2 = tokens(bert_tokenizer, feats["input_ids"][1])
    assert row2[:10] == ["[CLS]", "plain", "text", "here", "[SEP]", "[CLS]", "abortion", "¥", "a", "b"]
    assert mask[1].tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0]


def test_mlm_never_masks_the_prompt(bert_tokenizer):
    pair = PairTokenizer(bert_tokenizer, 64, True)
    delimiter = bert_tokenizer.convert_tokens_to_ids("¥")
    rows = [{"sentence1": prompt("science is wrong", "Nuclear energy"), "sentence2": prompt("guns kill", "Gun control")}]
    batch = MLMPairCollator(pair, probability=1.0, seed=0, delimiter_id=delimiter)(rows)
    masked = tokens(bert_tokenizer, batch["input_ids"][0])
    # every content token is masked (p = 1), no prompt token is, and prompt labels are ignored
    assert masked == ["[CLS]", "nuclear", "energy", "¥", "[MASK]", "[MASK]", "[MASK]", "[SEP]",
                      "[CLS]", "gun", "control", "¥", "[MASK]", "[MASK]", "[SEP]"]
    assert (batch["labels"][0] != IGNORE).tolist() == [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 0]
    unprotected = MLMPairCollator(pair, probability=1.0, seed=0)(rows)
    assert tokens(bert_tokenizer, unprotected["input_ids"][0])[1] == "[MASK]"  # without a delimiter: masked


def test_prompt_pairs_uses_pair_topics_then_the_map():
    pairs = pd.DataFrame({"sentence1": ["a", "b", "c"], "sentence2": ["d", "e", "f"],
                          "topic1": ["T1", "", ""], "topic2": ["T2", "", ""]})
    out = prompt_pairs(pairs, "¥", {"b": "Tb", "f": "Tf"})
    assert out["sentence1"].tolist() == ["T1 ¥ a", "Tb ¥ b", "c"]
    assert out["sentence2"].tolist() == ["T2 ¥ d", "e", "Tf ¥ f"]
    shared = prompt_pairs(pd.DataFrame({"sentence1": ["x"], "sentence2": ["y"], "topic": ["T"]}), "|")
    assert (shared["sentence1"][0], shared["sentence2"][0]) == ("T | x", "T | y")
    assert pairs["sentence1"].tolist() == ["a", "b", "c"]  # input untouched


def test_topic_map_majority_and_sources(tmp_path):
    pd.DataFrame({"sentence1": ["s1", "s1", "s2"], "sentence2": ["s3", "s4", "s1"], "score": [0.1, 0.2, 0.3],
                  "topic": ["A", "A", "B"]}).to_parquet(tmp_path / "train.parquet")
    pd.DataFrame({"text": ["u1", "s4"], "topic": ["C", "D"]}).to_parquet(tmp_path / "unlabeled.parquet")
    found = topic_map(tmp_path)
    assert found == {"s1": "A", "s2": "B", "s3": "A", "s4": "A", "u1": "C"}  # s4: A and D once each -> A


@pytest.mark.workflow
def test_topics_grid_plans_with_the_bws_file(tmp_path):
    import shutil

    from conftest import write_bws
    from test_workflow import REPO, planned

    for item in ("workflow", "config", "profiles"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / item)
    write_bws(tmp_path / "data" / "raw" / "bws" / "BWS_Argument_Similarity_Corpus.csv", per_topic=12)
    jobs = planned(tmp_path, "results/tables/topics.md")
    seeds = 3
    # MLM adaptation: plain pairs and prompted pairs (prompted and hidden share it); teachers likewise
    assert jobs["adapt"] == 2 * seeds and jobs["teacher"] == 2 * seeds
    # labels: one per teacher; students: 2 variants x 3 prompt settings; classifiers: plain and prompted
    assert jobs["labels"] == 2 * seeds and jobs["student"] == 6 * seeds
    assert jobs["classifier"] == 2 * seeds and jobs["candidates"] == seeds
    assert jobs["suite"] == 6 * seeds + 2 * seeds + 1  # students, classifiers, the zero-shot model
    assert jobs["collect_results"] == 6 and jobs["grid_table"] == 1


class Captured(Exception):
    pass


def write_topic_data(root, n_per_topic: int = 12):
    """A tiny data artifact: two clearly separable topics, pairs inside one topic, topic per pair."""
    root.mkdir(parents=True, exist_ok=True)
    words = {"Sport": ["football match goal team", "tennis player serve court", "runner race track medal"],
             "Cooking": ["bake bread oven flour", "boil pasta salt water", "fry onions garlic pan"]}
    rows = []
    for topic, stems in words.items():
        for i in range(n_per_topic):
            a, b = stems[i % 3], stems[(i + 1) % 3]
            rows.append({"sentence1": f"{a} {i}", "sentence2": f"{b} {i}", "score": (i % 5) / 4, "topic": topic})
    table = pd.DataFrame(rows)
    table.iloc[::3].to_parquet(root / "test.parquet", index=False)
    table.iloc[1::3].to_parquet(root / "dev.parquet", index=False)
    table.iloc[2::3].to_parquet(root / "train.parquet", index=False)
    return table


def student_spec(tmp_path, prompt_on: bool) -> dict:
    data = tmp_path / "data"
    write_topic_data(data)
    labels = tmp_path / "labels"
    labels.mkdir(exist_ok=True)
    pd.DataFrame({"sentence1": ["bake bread", "tennis serve"], "sentence2": ["boil pasta", "cook onions"],
                  "score": [0.7, 0.1], "strategy": ["random", "gold"], "topic1": ["Cooking", "Sport"],
                  "topic2": ["Cooking", "Cooking"]}).to_parquet(labels / "pairs.parquet", index=False)
    from conftest import train_params

    params = {**train_params().to_json(), "use_gold_labels": True, "selection": "target_dev", "model": "minilm-l6"}
    if prompt_on:
        params["topic_prompt"] = "¥"
    return {"stage": "student", "params": params, "inputs": {"data": str(data), "labels": str(labels)}}


@pytest.mark.parametrize("mode", ["hidden", "prompted"])
def test_student_training_texts_follow_the_prompt_setting(tmp_path, monkeypatch, mode):
    from augsbert.jobs import student
    from augsbert.training import pair_job

    seen = {}

    def fake_fit(arch, base, train, dev, params, *args, **kwargs):
        seen.update(train=train, dev=dev)
        raise Captured

    monkeypatch.setattr(pair_job, "fit", fake_fit)
    with pytest.raises(Captured):
        student.run(student_spec(tmp_path, mode == "prompted"), tmp_path / "out", device="cpu")
    texts = seen["train"]["sentence1"].tolist() + seen["train"]["sentence2"].tolist()
    if mode == "hidden":  # the same teacher scores, plain texts
        assert not any("¥" in t for t in texts + seen["dev"]["sentence1"].tolist())
        assert "tennis serve" in texts and "cook onions" in texts
    else:
        assert all(" ¥ " in t for t in texts)
        assert "Sport ¥ tennis serve" in texts and "Cooking ¥ cook onions" in texts  # each side its own topic
        assert all(t.startswith(("Sport ¥ ", "Cooking ¥ ")) for t in seen["dev"]["sentence2"])
    assert not (tmp_path / "out").exists()


def test_labels_score_prompted_pairs_and_keep_plain_text(tmp_path, monkeypatch):
    from augsbert.models.architectures import ARCHITECTURES
    from augsbert.jobs import labels as stage

    data = tmp_path / "data"
    write_topic_data(data)
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    from conftest import teacher_spec_params

    (teacher / "spec.json").write_text(json.dumps({"params": teacher_spec_params()}))
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    pd.DataFrame({"sentence1": ["bake bread oven flour 2"], "sentence2": ["football match goal team 2"],
                  "strategy": ["random"]}).to_parquet(candidates / "candidates.parquet", index=False)
    (candidates / "metrics.json").write_text('{"excluded": {}, "pool_sentences": 2}')
    scored = []

    class FakeTeacher:
        def load(self, path, device):
            return None

        def predict(self, model, pairs, batch, params):
            scored.extend(pairs)
            return [0.1 * (len(scored) + i) % 1 for i in range(len(pairs))]  # spread: the density plot needs it

    monkeypatch.setitem(ARCHITECTURES, "cbe", FakeTeacher())
    spec = {"params": {"relabel_gold": True, "kde_reference": "teacher", "seed": 1, "batch_size": 8,
                       "topic_prompt": "¥"},
            "inputs": {"teacher": str(teacher), "gold": str(data), "candidates": str(candidates), "topics": str(data)}}
    stage.run(spec, tmp_path / "out", device="cpu")
    assert ("Cooking ¥ bake bread oven flour 2", "Sport ¥ football match goal team 2") in scored
    assert all(" ¥ " in a and " ¥ " in b for a, b in scored)
    pairs = pd.read_parquet(tmp_path / "out" / "pairs.parquet")
    row = pairs[pairs["strategy"] == "random"].iloc[0]
    assert (row["sentence1"], row["topic1"], row["topic2"]) == ("bake bread oven flour 2", "Cooking", "Sport")


def test_classifier_beats_chance_on_separable_topics(tmp_path, tiny_minilm):
    # MiniLM's real weights (one layer): held-out accuracy needs word embeddings that already place "football"
    # near "goal". The random tiny BERT (4 initialisations) reached 50-88% on train and 0.47-0.81 held out
    # here; at lr 5e-3 it learns the train sentences (100%) but stays at 0.75 held out for three of the four.
    from augsbert.training import classifier

    data = tmp_path / "data"
    write_topic_data(data, n_per_topic=12)
    texts, topics = classifier.training_sentences(data, exclude_eval=True)
    assert set(topics) == {"Sport", "Cooking"} and len(texts) == 16  # train-split sentences only
    from augsbert.stages.classifier import ClassifierParams

    params = ClassifierParams(model=tiny_minilm, epochs=3, batch_size=8, lr=5e-4, warmup_ratio=0.0, max_length=32,
                              checkpoint_steps=100, seed=0, exclude_eval_sentences=True)
    model, loss, classes, metrics = classifier.fit(tiny_minilm, texts, topics, params, tmp_path / "work", "cpu")
    assert classes == ["Cooking", "Sport"] and metrics["steps"] == 6
    assert metrics["train_accuracy"] > 75  # chance is 50
    from augsbert.training.classifier import training_sentences as again

    held = [t for t in again(data, exclude_eval=False)[0] if t not in texts]  # dev/test sentences, never trained on
    truth = [topic_map(data)[t] for t in held]
    predicted = loss.predict(model.encode(held, convert_to_tensor=True)).tolist()
    accuracy = sum(classes[p] == t for p, t in zip(predicted, truth)) / len(held)
    assert accuracy > 0.75


def test_suite_reports_raw_and_prompted_figures(tmp_path, tiny_minilm):
    # MiniLM's real weights (one layer): the probe's perfect prompted F1 needs embeddings that carry the topic
    # word; with the random tiny BERT it was 100 for 3 of 8 initialisations (50-83 for the others).
    from augsbert.jobs import suite

    data = tmp_path / "data"
    write_topic_data(data)
    params = {"sts": {}, "useb": {}, "skipped": {}, "batch_size": 8, "max_length": 32, "model": tiny_minilm,
              "topic": {"epochs": 5, "lr": 1e-2, "batch_size": 8, "test_fraction": 0.25, "seed": 0, "prompted": "¥"}}
    metrics = suite.run({"params": params, "inputs": {"data": str(data)}}, tmp_path / "out", device="cpu")
    summary = metrics["summary"]
    assert {"topic_macro_f1", "prompted_topic_macro_f1", "prompted_spearman"} <= set(summary)
    # the prompt carries the label: a linear probe separates prompted sentences perfectly
    assert summary["prompted_topic_macro_f1"] == 100.0
    assert metrics["prompted"]["test"]["n_pairs"] == 8


NEWS_POST = """From: someone@example.com
Subject: Re: engines
Organization: Nowhere

In article <1@x> other@example.com writes:
> quoted text that must go
The {word} engine needs oil.
It runs {n} miles.

--
signature line
"""


def write_newsgroups(root, per_group: int = 5):
    groups = ["rec.autos", "sci.space", "comp.graphics"]
    for part in ("20news-bydate-train", "20news-bydate-test"):
        for g, group in enumerate(groups):
            folder = root / part / group
            folder.mkdir(parents=True)
            for i in range(per_group):
                (folder / str(1000 + i)).write_bytes(NEWS_POST.format(word=group.split(".")[1], n=i)
                                                     .encode("latin-1"))
    return groups


def load_dataset(tmp_path, definition: dict):
    from augsbert.config.load import load_config
    from augsbert.jobs import data as data_job

    cfg = tmp_path / "config.yaml"
    tmp_path.mkdir(parents=True, exist_ok=True)
    import yaml

    cfg.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "raw"), "datasets": {"corpus": definition},
                                   "experiments": {"x": {"dataset": "corpus", "models": ["zero_shot"]}}}))
    from augsbert.plan import Plan

    plan = Plan(load_config(str(cfg)))
    node = data_node(plan, "corpus")
    out = tmp_path / "data_artifact"
    data_job.run(plan.spec(node.key), out)
    return out, node


def test_newsgroups_directory_and_tar_give_the_same_table(tmp_path):
    import tarfile

    root = tmp_path / "raw" / "20news_home"
    write_newsgroups(root)
    lee = {"loader": "lee", "topic_corpus": {"format": "newsgroups", "path": "20news_home"}}
    out, node = load_dataset(tmp_path, lee)
    table = pd.read_parquet(out / "unlabeled.parquet")
    assert list(table.columns) == ["text", "topic", "fine_topic", "split"]
    assert len(table) == 30 and table["split"].value_counts().to_dict() == {"test": 15, "train": 13, "dev": 2}  # round(0.1 x 15)
    assert set(table["topic"]) == {"Recreational", "Science", "Computer"}  # thesis Table 3.9 parents
    assert set(table["fine_topic"]) == {"rec.autos", "sci.space", "comp.graphics"}
    text = table["text"].iloc[0]
    assert text.startswith("The ") and "quoted" not in text and "signature" not in text and "From:" not in text
    # the .tar.gz release reads to the same rows
    with tarfile.open(tmp_path / "raw" / "20news-bydate.tar.gz", "w:gz") as tar:
        for part in ("20news-bydate-train", "20news-bydate-test"):
            tar.add(root / part, arcname=part)
    shutil_tree = tmp_path / "tar_only"
    (shutil_tree / "raw").mkdir(parents=True)
    (tmp_path / "raw" / "20news-bydate.tar.gz").rename(shutil_tree / "raw" / "20news-bydate.tar.gz")
    out2, _ = load_dataset(shutil_tree, {"loader": "lee", "topic_corpus": {"format": "newsgroups",
                                                                         "path": "20news-bydate.tar.gz"}})
    pd.testing.assert_frame_equal(pd.read_parquet(out2 / "unlabeled.parquet"), table)


def test_ukp_sentential_as_released(tmp_path):
    root = tmp_path / "raw" / "ukp"
    root.mkdir(parents=True)
    header = "topic\tretrievedUrl\tarchivedUrl\tsentenceHash\tsentence\tannotation\tset\n"
    for topic in ("abortion", "school uniforms"):
        rows = [f"{topic}\thttp://a\thttp://b\th{i}\t\"Quoted\" sentence {i} on {topic}\tNoArgument\t{s}\n"
                for i, s in enumerate(["train", "train", "val", "test"])]
        (root / f"{topic.replace(' ', '_')}.tsv").write_text(header + "".join(rows))
    out, node = load_dataset(tmp_path, {"loader": "lee", "topic_corpus": {"format": "ukp_sentential",
                                                                          "path": "ukp"}})
    table = pd.read_parquet(out / "unlabeled.parquet")
    assert table["split"].tolist() == ["train", "train", "dev", "test"] * 2
    assert table["text"].iloc[0] == '"Quoted" sentence 0 on abortion'
    assert set(table["topic"]) == {"abortion", "school uniforms"}
    # the pool of silver sentences is the corpus' train part only
    from augsbert.data.pool import target_pool

    pool, _, _ = target_pool(out, "unlabeled", exclude_eval=True)
    assert pool == sorted(t for t, s in zip(table["text"], table["split"]) if s == "train")
    from augsbert.training.classifier import training_sentences

    assert training_sentences(out, exclude_eval=True)[0] == pool  # the classifier never sees val / test either
    # and the plan sees its topics: prompting is allowed
    from augsbert.stages.data import has_topics

    assert has_topics({"loader": "lee", "topic_corpus": {"format": "ukp_sentential"}})



def test_topic_grids_share_what_the_prompt_does_not_change():
    """A teacher whose gold pairs have no topics (STS-B) gets no prompt option (it differs between Original
    and Prompted only through its MLM-adapted start); prompted and hidden share the MLM adaptation, the
    teacher and the labels; only the prompted student has a prompt."""
    from conftest import plan_shipped

    plan = plan_shipped(plan=())  # lazy: the three experiments looked up below are validated and planned

    def node(prompt: str, role: str):
        runs = plan.experiment(f"topics_20ng.domain_{prompt}.newsgroups").runs[42]
        if role == "teacher":  # not a reported model here: the labels' input
            return plan.nodes[dict(plan.nodes[runs["labels"]].inputs)["teacher"]]
        return plan.nodes[runs[role]]

    assert node("prompted", "teacher").key == node("hidden", "teacher").key
    assert "topic_prompt" not in node("prompted", "teacher").settings
    assert node("original", "teacher").settings == node("prompted", "teacher").settings
    assert node("prompted", "adapt").key == node("hidden", "adapt").key != node("original", "adapt").key
    assert node("prompted", "adapt").settings["topic_prompt"] == "¥"
    assert node("prompted", "labels").key == node("hidden", "labels").key
    assert "topics" in dict(node("prompted", "labels").inputs) and "topics" not in dict(node("original", "labels").inputs)
    assert node("prompted", "student").settings.get("topic_prompt") == "¥"
    assert "topic_prompt" not in node("hidden", "student").settings
    assert node("prompted", "classifier").key != node("hidden", "classifier").key == node("original", "classifier").key


def test_text_file_table_and_own_topic_corpus(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "corpus.tsv").write_text("text\tlabel\nfirst  sentence\tA\nsecond one\tB\n\tA\n")
    out, _ = load_dataset(tmp_path, {"loader": "text_file", "path": "corpus.tsv", "columns": {"topic": "label"},
                                     "on_bad_rows": "skip"})
    table = pd.read_parquet(out / "unlabeled.parquet")
    assert table.values.tolist() == [["first sentence", "A"], ["second one", "B"]]  # the empty row skipped
    (raw / "lines.txt").write_text("just a line\n")
    plain, _ = load_dataset(tmp_path / "p", {"loader": "text_file", "path": str(raw / "lines.txt")})
    assert list(pd.read_parquet(plain / "unlabeled.parquet").columns) == ["text"]
    (raw / "own.jsonl").write_text('{"text": "x one", "topic": "T1", "split": "test"}\n'
                                   '{"text": "y two", "topic": "T2", "split": ""}\n')
    own, _ = load_dataset(tmp_path / "o", {"loader": "lee",
                                           "topic_corpus": {"format": "table", "path": str(raw / "own.jsonl")}})
    corpus = pd.read_parquet(own / "unlabeled.parquet")
    assert corpus.values.tolist() == [["x one", "T1", "T1", "test"], ["y two", "T2", "T2", "train"]]
    from augsbert.data import DataError

    with pytest.raises(DataError, match="not both"):
        load_dataset(tmp_path / "b", {"loader": "text_file", "path": str(raw / "lines.txt"),
                                      "topic_corpus": {"format": "table", "path": str(raw / "own.jsonl")}})
