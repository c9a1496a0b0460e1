"""Cross-Bi-Encoder: exact token layout and segment masks, truncation, score, save/load."""

import json

import numpy as np
import pytest
import torch

from augsbert.models.cross_bi_encoder import CrossBiEncoder, PairTokenizer, truncate_lengths


def test_bert_layout_and_segment_masks(bert_tokenizer):
    feats = PairTokenizer(bert_tokenizer, 64, use_token_types=True)(["hello world", "a"], ["good day to you", "b"])
    # [CLS]=101 hello world [SEP]=102 [CLS] good day to you [SEP]; second row padded with 0
    assert feats["input_ids"].tolist() == [[101, 7592, 2088, 102, 101, 2204, 2154, 2000, 2017, 102],
                                           [101, 1037, 102, 101, 1038, 102, 0, 0, 0, 0]]
    assert feats["attention_mask"].tolist() == [[1] * 10, [1] * 6 + [0] * 4]
    assert feats["segment1_mask"].tolist() == [[1, 1, 1, 1, 0, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]]
    assert feats["segment2_mask"].tolist() == [[0, 0, 0, 0, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]]
    assert feats["token_type_ids"].tolist() == feats["segment2_mask"].tolist()


def test_roberta_layout_has_no_token_types(roberta_tokenizer):
    tok = roberta_tokenizer
    feats = PairTokenizer(tok, 64, use_token_types=False)(["hello world"], ["the cat"])
    s, e = tok.convert_tokens_to_ids("<s>"), tok.convert_tokens_to_ids("</s>")
    a = tok("hello world", add_special_tokens=False)["input_ids"]
    b = tok("the cat", add_special_tokens=False)["input_ids"]
    assert feats["input_ids"][0].tolist() == [s, *a, e, s, *b, e]
    assert feats["segment1_mask"][0].tolist() == [1] * (len(a) + 2) + [0] * (len(b) + 2)
    assert feats["segment2_mask"][0].tolist() == [0] * (len(a) + 2) + [1] * (len(b) + 2)
    assert "token_type_ids" not in feats


def test_truncation_keeps_both_segments_special_tokens(bert_tokenizer):
    long_text = " ".join(["word"] * 100)
    feats = PairTokenizer(bert_tokenizer, 16, use_token_types=True)([long_text], ["good day"])
    ids = feats["input_ids"][0].tolist()
    word = bert_tokenizer.convert_tokens_to_ids("word")
    assert ids == [101] + [word] * 10 + [102, 101, 2204, 2154, 102]  # 16 tokens: the long text gave way
    assert feats["segment1_mask"][0].tolist() == [1] * 12 + [0] * 4
    assert feats["segment2_mask"][0].tolist() == [0] * 12 + [1] * 4


@pytest.mark.parametrize("la,lb,budget,expected", [
    (3, 4, 10, (3, 4)), (10, 3, 8, (5, 3)), (3, 10, 8, (3, 5)), (10, 10, 8, (4, 4)),
    (10, 6, 9, (5, 4)), (6, 10, 9, (5, 4)), (100, 0, 5, (5, 0)),
])
def test_truncate_lengths(la, lb, budget, expected):
    assert truncate_lengths(la, lb, budget) == expected
    assert sum(truncate_lengths(la, lb, budget)) == min(la + lb, budget)


@pytest.fixture(scope="module")
def cbe(tiny_model):
    # the tiny random BERT: these tests compare the model with itself (segment means, padding, a reload)
    torch.manual_seed(0)
    return CrossBiEncoder.from_base(tiny_model, 64)


def test_score_is_cosine_of_segment_means(cbe):
    pairs = [("a cat sat on the mat", "a dog lay on the rug"), ("stock prices fell", "it rained"), ("x", "x")]
    scores = cbe.predict(pairs, batch_size=2)
    assert np.all(scores >= -1) and np.all(scores <= 1)
    feats = cbe.pair_tokenizer([pairs[0][0]], [pairs[0][1]])
    with torch.no_grad():
        hidden = cbe.encoder(input_ids=feats["input_ids"], attention_mask=feats["attention_mask"],
                             token_type_ids=feats["token_type_ids"]).last_hidden_state[0]
    n1 = int(feats["segment1_mask"].sum())
    u, v = hidden[:n1].mean(0), hidden[n1:].mean(0)
    assert scores[0] == pytest.approx(float(torch.nn.functional.cosine_similarity(u, v, dim=0)), abs=1e-5)


def test_padding_does_not_change_scores(cbe):
    short, long_ = ("a b", "c d"), ("a much longer first sentence here", "and a long second one too")
    alone = cbe.predict([short])
    batched = cbe.predict([short, long_], batch_size=2)
    assert batched[0] == pytest.approx(alone[0], abs=1e-5)


def test_save_load_round_trip(cbe, tmp_path):
    pairs = [("hello world", "good day"), ("a cat", "a dog"), ("rain", "snow")]
    before = cbe.predict(pairs)
    cbe.save(tmp_path / "cbe")
    meta = json.loads((tmp_path / "cbe" / "cross_bi_encoder.json").read_text())
    assert meta["architecture"] == "CrossBiEncoder" and meta["max_length"] == 64
    assert (tmp_path / "cbe" / "model.safetensors").is_file()
    loaded = CrossBiEncoder.load(tmp_path / "cbe")
    np.testing.assert_allclose(loaded.predict(pairs), before, atol=1e-6)
    with pytest.raises(ValueError, match="not a saved Cross-Bi-Encoder"):
        CrossBiEncoder.load(tmp_path)
