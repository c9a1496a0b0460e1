"""Query generation (stage `queries`): a tiny T5 built from a config (no download), the offline inverse cloze."""

import pandas as pd
import pytest

from augsbert.data import DataError
from augsbert.jobs import queries, query_shard
from augsbert.models import query_generation
from augsbert.stages.queries import sizing

PASSAGES = ["Cats purr when they are content. They also purr when hurt.", "Dogs bark at strangers.",
            "Fish live in water. Some fish live in salt water. Others in rivers."]


@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory, minilm_path):
    """A random T5 (2 layers, d_model 32) over MiniLM's WordPiece tokenizer, saved as a local seq2seq model."""
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    config = T5Config(vocab_size=tokenizer.vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.sep_token_id,
                      decoder_start_token_id=tokenizer.pad_token_id)
    import torch

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("t5") / "tiny-t5"
    T5ForConditionalGeneration(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir(exist_ok=True)
    pd.DataFrame({"text": PASSAGES}).to_parquet(folder / "unlabeled.parquet", index=False)
    return folder


def spec(tmp_path, generator, **extra):
    params = {"generator": generator, "mode": "query", "queries_per_passage": 2, "total": 250000, "top_k": 25,
              "top_p": 0.95, "max_length": 8, "input_max_length": 32, "prefix": "", "batch_size": 2, "seed": 3,
              **extra}
    return {"params": params, "inputs": {"data": str(data_dir(tmp_path))}}


def generated(out):
    return pd.read_parquet(out / "beir" / "queries.parquet")["text"].tolist()


def test_t5_sampling_is_seeded_and_the_artifact_is_the_cache(tmp_path, tiny_t5):
    first = queries.run(spec(tmp_path, tiny_t5), tmp_path / "a", device="cpu")
    assert first["queries_per_passage"] == 2 and first["passages"] == 3
    again = queries.run(spec(tmp_path, tiny_t5), tmp_path / "b", device="cpu")
    assert generated(tmp_path / "a") == generated(tmp_path / "b") and len(generated(tmp_path / "a")) >= 1
    other = queries.run(spec(tmp_path, tiny_t5, seed=4), tmp_path / "c", device="cpu")
    assert generated(tmp_path / "c") != generated(tmp_path / "a")
    assert first == again and other["queries"] >= 1
    with pytest.raises(Exception, match="exists"):  # a finished artifact is never regenerated
        queries.run(spec(tmp_path, tiny_t5), tmp_path / "a", device="cpu")
    qrels = pd.read_parquet(tmp_path / "a" / "beir" / "qrels_train.parquet")
    assert set(qrels["corpus_id"]) <= {"p0", "p1", "p2"} and set(qrels["score"]) == {1}


def test_a_model_that_is_not_seq2seq_is_refused_with_one_message(tmp_path, tiny_model):
    with pytest.raises(DataError, match=r"is not a seq2seq \(encoder-decoder\) model \(BertModel\)"):
        queries.run(spec(tmp_path, tiny_model), tmp_path / "x", device="cpu")


def test_inverse_cloze_takes_a_sentence_of_its_passage_and_paraphrase_mode(tmp_path):
    queries.run(spec(tmp_path, "inverse_cloze", queries_per_passage=3), tmp_path / "ic")
    texts = generated(tmp_path / "ic")
    qrels = pd.read_parquet(tmp_path / "ic" / "beir" / "qrels_train.parquet")
    corpus = dict(zip(*pd.read_parquet(tmp_path / "ic" / "beir" / "corpus.parquet")[["id", "passage"]].T.values))
    for text, pid in zip(texts, qrels["corpus_id"]):
        assert text in corpus[pid] and text != corpus[pid] or pid == "p1"
    assert all(t in PASSAGES[1] and len(t.split()) >= 2 for t, p in zip(texts, qrels["corpus_id"]) if p == "p1")
    queries.run(spec(tmp_path, "inverse_cloze", queries_per_passage=3), tmp_path / "ic2")
    assert generated(tmp_path / "ic2") == texts  # seeded


def test_gpl_automatic_sizing():
    assert sizing(1000, None, 250_000) == (250, 1000)
    assert sizing(100_000, None, 250_000) == (3, 83_334)  # ceil(250K / 3), as gpl/train.py
    assert sizing(83_333, None, 250_000) == (4, 83_333)  # 3 x 83,333 < 250K: ceil(250K / 83,333) = 4
    assert sizing(100_000, 5, 250_000) == (5, 100_000)


def test_paraphrase_mode_prefixes_the_generator_input(tmp_path, tiny_t5):
    from conftest import plan_shipped

    plan = plan_shipped({}, plan=("gpl_symmetric.gpl.stsb",))
    node = plan.node(plan.experiment("gpl_symmetric.gpl.stsb").runs[42]["queries"])
    assert node.params["mode"] == "paraphrase" and node.params["prefix"] == "paraphrase: "
    queries.run(spec(tmp_path, tiny_t5), tmp_path / "q", device="cpu")
    queries.run(spec(tmp_path, tiny_t5, mode="paraphrase", prefix="paraphrase: "), tmp_path / "p", device="cpu")
    assert generated(tmp_path / "p") != generated(tmp_path / "q")  # the same seed, another input


def test_duplicate_queries_of_a_passage_are_removed_and_the_resized_corpus_is_the_one_mined(tmp_path):
    rows, empty, duplicates = query_generation.passage_queries(["p0", "p1"], [["a  b", "a b", " ", "c"], ["a b", "a b"]])
    # BEIR's generator keeps a set per passage (beir/generation/generate.py); the same text of another passage stays
    assert rows == [("p0-q0", "a b", "p0"), ("p0-q3", "c", "p0"), ("p1-q0", "a b", "p1")]
    assert (empty, duplicates) == (1, 2)
    # GPL's automatic sizing with a total of 6 over 3 passages: 3 per passage over 2 of them (`new_size -1`),
    # and that resized corpus is the artifact's corpus, the one `negatives` mines and `margins` labels
    metrics = queries.run(spec(tmp_path, "inverse_cloze", queries_per_passage=None, total=6), tmp_path / "r")
    corpus = pd.read_parquet(tmp_path / "r" / "beir" / "corpus.parquet")
    qrels = pd.read_parquet(tmp_path / "r" / "beir" / "qrels_train.parquet")
    assert metrics["passages"] == metrics["mined_corpus"] == len(corpus) == 2 and metrics["corpus"] == 3
    assert set(qrels["corpus_id"]) == set(corpus["id"])
    assert metrics["queries"] + metrics["duplicates_dropped"] + metrics["empty_dropped"] == 6


def test_a_grid_column_without_a_corpus_is_refused_while_planning_and_gpl_symmetric_reads_its_sentences(tmp_path):
    """A column whose dataset has no corpus stops the plan with one line naming experiment, dataset and the
    ways out; `gpl_symmetric` generates from its targets' train sentences and plans."""
    from augsbert.errors import ConfigError
    from conftest import plan_shipped

    grid = {"options": {"models": ["zero_shot", "teacher", "gpl"], "teacher": {"arch": "ce", "pretrained": "trained"},
                        "queries": {"generator": "inverse_cloze", "queries_per_passage": 3},
                        "negatives": {"retrievers": ["bm25"], "range_max": 5},
                        "student": {"loss": "margin_mse", "max_steps": 2}},
            "columns": {"stsb": {"dataset": "stsb"}}, "axes": {"method": {"gpl": {}}}}
    with pytest.raises(ConfigError) as caught:
        plan_shipped({"grids": {"nocorpus": grid}}, plan=("nocorpus.gpl.stsb",))
    assert str(caught.value).count("\n") == 0 and str(caught.value).startswith(
        "experiments.nocorpus.gpl.stsb.queries: dataset 'stsb' (loader stsb) has no corpus")
    plan = plan_shipped({}, plan=("gpl_symmetric.gpl.stsb", "gpl_symmetric.gpl.bws"))
    for name in ("gpl_symmetric.gpl.stsb", "gpl_symmetric.gpl.bws"):
        assert plan.node(plan.experiment(name).runs[42]["queries"]).params["source"] == "sentences"
    # the job: the train split's distinct sentences, dev/test sentences left out
    data = tmp_path / "pairs"
    data.mkdir()
    pd.DataFrame({"sentence1": ["a cat sits", "a dog runs"], "sentence2": ["a cat sat", "the test one"],
                  "score": [0.9, 0.1]}).to_parquet(data / "train.parquet", index=False)
    pd.DataFrame({"sentence1": ["the test one"], "sentence2": ["another"], "score": [0.5]}).to_parquet(
        data / "test.parquet", index=False)
    assert sorted(query_generation.target_corpus(data, "sentences")["passage"]) == ["a cat sat", "a cat sits", "a dog runs"]


def test_the_queries_stage_reads_which_loaders_bring_a_corpus_from_the_loaders(monkeypatch):
    """Which loaders bring a passage corpus is each loader's `own_corpus` (Lee's background documents, a text
    file's lines, BEIR's passages): the planning check reads it, so a loader declaring one plans without
    `unlabeled`, and one that does not is refused."""
    from augsbert.data.loaders import LOADERS, StsbLoader
    from augsbert.errors import ConfigError
    from conftest import plan_shipped

    assert sorted(name for name, loader in LOADERS.items() if loader.own_corpus) == ["beir", "lee", "text_file"]
    corpus = {"models": ["zero_shot", "teacher", "gpl"], "teacher": {"arch": "ce", "pretrained": "trained"},
              "queries": {"generator": "inverse_cloze"}, "negatives": {"retrievers": ["bm25"], "range_max": 5},
              "student": {"loss": "margin_mse", "max_steps": 2}}
    own, none = ({"experiments": {"e": {"dataset": dataset, **corpus}}} for dataset in ("lee", "stsb"))
    assert plan_shipped(own, grids=False).experiment("e").runs[42]["queries"]
    with pytest.raises(ConfigError, match="dataset 'stsb' .loader stsb. has no corpus"):
        plan_shipped(none, grids=False)

    class CorpusStsb(StsbLoader):
        own_corpus = True

    monkeypatch.setitem(LOADERS, "stsb", CorpusStsb())
    assert plan_shipped(none, grids=False).experiment("e").runs[42]["queries"]


@pytest.mark.parametrize("generator", ["inverse_cloze", "t5"])
def test_sharded_generation_equals_one_job_and_plans_content_keyed_shards(tmp_path, tiny_t5, generator):
    """`queries.shards`: N query_shard jobs over passage ranges cut at batch boundaries write, once merged, the
    very queries one job writes (the sampling is seeded per batch by its global first row)."""
    model = tiny_t5 if generator == "t5" else "inverse_cloze"
    seven = tmp_path / "seven"
    seven.mkdir()
    pd.DataFrame({"text": [f"Passage {i} about topic {i % 4}. It has two sentences." for i in range(7)]}).to_parquet(
        seven / "unlabeled.parquet", index=False)

    def on_seven(**extra):
        return {**spec(tmp_path, model, **extra), "inputs": {"data": str(seven)}}

    whole = queries.run(on_seven(), tmp_path / "one", device="cpu")
    shards = {}
    for shard in range(3):
        one = on_seven(shards=3, shard=shard)
        shards[f"shard_{shard}"] = str(tmp_path / f"s{shard}")
        assert query_shard.run(one, tmp_path / f"s{shard}", device="cpu")["rows"] == [
            [0, 4], [4, 7], [7, 7]][shard]  # batch_size 2: cut at even rows (7 passages, 4 batches)
    merged = on_seven(shards=3)
    merged["inputs"].update(shards)
    metrics = queries.run(merged, tmp_path / "merged", device="cpu")
    assert generated(tmp_path / "merged") == generated(tmp_path / "one")
    assert metrics["queries"] == whole["queries"]
