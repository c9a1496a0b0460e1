"""Texts tokenised once (augsbert.training.tokenized): every batch equals what the trainer's own tokenising call gives,
and training with them ends with the very weights of training without them (CPU)."""

import numpy as np
import pytest
import torch

from augsbert.training.tokenized import PretokenizedPreprocess, TokenIds
from conftest import theme_pairs, train_params

TEXTS = ["a", "The cat sat on the mat.", "hello world " * 20, "Ünïcödé text, with punctuation!", "x y", "",
         "the cat", "A man is playing a flute.", "Someone plays an instrument on a stage tonight."]


def batches(items, seed=0, n=12):
    rng = np.random.default_rng(seed)
    return [[items[i] for i in rng.integers(0, len(items), rng.integers(1, 9))] for _ in range(n)]


def assert_same(got: dict, want: dict):
    assert list(got) == list(want)
    for key in want:
        if isinstance(want[key], torch.Tensor):
            assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), key
        else:
            assert got[key] == want[key], key


@pytest.fixture(scope="module")
def encoder(tiny_model):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(tiny_model, device="cpu")
    model.max_seq_length = 12  # long texts are truncated
    return model


@pytest.mark.parametrize("side", ["right", "left"])
def test_a_batch_equals_the_models_own_preprocess(encoder, side):
    encoder.tokenizer.padding_side = side
    try:
        cached = PretokenizedPreprocess(encoder.preprocess, encoder.tokenizer, TEXTS * 2, chunk=4)
        assert cached.enabled and len(cached) == len(TEXTS)
        for batch in batches(TEXTS):
            assert_same(cached(batch), encoder.preprocess(batch))
    finally:
        encoder.tokenizer.padding_side = "right"


def test_unknown_texts_and_prompts_go_to_the_models_preprocess(encoder):
    calls = []

    def counting(inputs, **kwargs):
        calls.append((list(inputs), kwargs))
        return encoder.preprocess(inputs, **kwargs)

    cached = PretokenizedPreprocess(counting, encoder.tokenizer, TEXTS)
    calls.clear()
    assert_same(cached(["a", "x y"]), encoder.preprocess(["a", "x y"]))
    assert calls == []
    assert_same(cached(["a", "not seen"]), encoder.preprocess(["a", "not seen"]))
    assert_same(cached(["a"], prompt="query: "), encoder.preprocess(["a"], prompt="query: "))
    assert calls == [(["a", "not seen"], {}), (["a"], {"prompt": "query: ", "task": None})]


def test_a_preprocess_with_other_outputs_is_not_cached(encoder):
    def with_prompt_length(inputs, **kwargs):
        return {**encoder.preprocess(inputs), "prompt_length": torch.ones(len(inputs), dtype=torch.long)}

    cached = PretokenizedPreprocess(with_prompt_length, encoder.tokenizer, TEXTS)
    assert not cached.enabled
    assert "prompt_length" in cached(["a", "x y"])


def test_padding_to_a_multiple_keeps_every_row(encoder):
    cached = PretokenizedPreprocess(encoder.preprocess, encoder.tokenizer, TEXTS, pad_to_multiple_of=8)
    for batch in batches(TEXTS, seed=1):
        got, want = cached(batch), encoder.preprocess(batch)
        width = want["input_ids"].shape[1]
        assert got["input_ids"].shape[1] == -(-width // 8) * 8
        for key in ("input_ids", "attention_mask", "token_type_ids"):
            assert torch.equal(got[key][:, :width], want[key])
            assert not got[key][:, width:].any()  # pad id 0, mask 0, token type 0 (BERT)


def test_cross_encoder_pairs_equal_its_preprocess(tiny_model):
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(tiny_model, num_labels=1, max_length=16, device="cpu")
    pairs = [(a, b) for a in TEXTS[:5] for b in TEXTS[3:]]
    cached = PretokenizedPreprocess(model.preprocess, model.tokenizer, pairs, chunk=7)
    assert cached.enabled
    for batch in batches(pairs, seed=2):
        assert_same(cached(batch), model.preprocess(batch))


def test_token_ids_equal_the_tokenizer_and_count_as_token_counts(bert_tokenizer):
    from augsbert.training.batching import token_counts

    ids = TokenIds(bert_tokenizer, TEXTS[:4], chunk=3)
    texts = TEXTS + ["unseen text here"]
    assert ids(texts) == bert_tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    np.testing.assert_array_equal(token_counts(bert_tokenizer, texts, ids=ids), token_counts(bert_tokenizer, texts))


def test_pair_tokenizer_with_token_ids_builds_the_same_pairs(bert_tokenizer):
    from augsbert.models.cross_bi_encoder import PairTokenizer

    plain = PairTokenizer(bert_tokenizer, 24, True)
    cached = PairTokenizer(bert_tokenizer, 24, True, ids=TokenIds(bert_tokenizer, TEXTS))
    for a, b in zip(batches(TEXTS, 3), batches(TEXTS, 4)):
        n = min(len(a), len(b))
        assert_same(cached(a[:n], b[:n]), plain(a[:n], b[:n]))
    padded = PairTokenizer(bert_tokenizer, 24, True, pad_to_multiple_of=8)(["a"], ["b"])
    assert padded["input_ids"].shape == (1, 8) and padded["attention_mask"].tolist() == [[1] * 6 + [0] * 2]


def train_briefly(trainer: str, tiny_model: str, work):
    """Four steps of `trainer` on the tiny model; its weights."""
    if trainer in ("be", "ce", "cbe"):
        from augsbert.training.pairs import fit

        model = fit(trainer, tiny_model, theme_pairs(64, 3, words=(2, 9)), None,
                    train_params(trainer, epochs=1, batch_size=16, max_length=16), work, "cpu", "fp32").model
    elif trainer == "mlm":
        from augsbert.stages.adapt import AdaptParams
        from augsbert.training.mlm import adapt

        params = AdaptParams(model=tiny_model, max_steps=4, batch_size=16, lr=1e-3, warmup_ratio=0.1,
                             weight_decay=0.01, max_length=24, mask_probability=0.2, masking="uniform", seed=42,
                             group_by_length=True, held_out=0.1, pool="train", exclude_eval_sentences=True)
        model = adapt(tiny_model, theme_pairs(64, 3, words=(2, 9))[["sentence1", "sentence2"]], params, work, "cpu",
                      "fp32")[0]
    else:
        from augsbert.objectives import resolved
        from augsbert.stages.pretrain import PretrainParams
        from augsbert.training.pretrain import fit

        options = resolved({"objective": trainer, "preset": "thesis", "pooling": None, "batch_size": 16, "max_steps": 4,
                            "lr": 1e-3, "warmup_ratio": 0.0, "weight_decay": 0.0, "scheduler": "constant",
                            "max_length": 24, "temperature": 0.05, "deletion_ratio": 0.6, "deletion_unit": "word",
                            "eval_steps": 2, "selection": "last", "group_by_length": None, "megabatch": 50, "seed": 3})
        params = PretrainParams.from_json({"model": "tiny", "exclude_eval_sentences": True, "held_out": 0.1, **options})
        texts = sorted(set(theme_pairs(64, 3, words=(2, 9))["sentence1"]))
        model = fit(tiny_model, texts, texts[:16], None, params, work, "cpu", "fp32")[0]
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("trainer", ["be", "ce", "cbe", "mlm", "simcse", "tsdae"])
def test_training_ends_with_the_weights_of_per_batch_tokenisation(trainer, tiny_model, tmp_path, monkeypatch):
    """Four steps with the training texts tokenised once, then with every batch tokenised by the library's call
    (the former computation): the same weights, exactly. TSDAE's word-deleted copies are tokenised per batch in
    both."""
    import augsbert.training.tokenized as tokenized

    cached = train_briefly(trainer, tiny_model, tmp_path / "cached")
    # the former computation: the model's own preprocess, PairTokenizer without ids
    monkeypatch.setattr(tokenized, "PretokenizedPreprocess", lambda preprocess, *args, **kwargs: preprocess)
    monkeypatch.setattr(tokenized, "TokenIds", lambda *args, **kwargs: None)
    plain = train_briefly(trainer, tiny_model, tmp_path / "plain")
    assert cached.keys() == plain.keys()
    for key in cached:
        assert torch.equal(cached[key], plain[key]), key
