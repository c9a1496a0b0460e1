"""Length-grouped batches: each example once per epoch, homogeneous batches, one order per (seed, epoch)."""

import numpy as np
import pandas as pd
import pytest

from augsbert.training.batching import (LengthGroupedBatchSampler, LengthGroupedSampler, length_grouped_batches,
                               padding_share)
from conftest import train_params


def synthetic_lengths(n=3200, seed=0, low=20, high=400):
    return np.random.default_rng(seed).integers(low, high + 1, n)


def random_batches(n, batch_size, seed=0):
    order = np.random.default_rng(seed).permutation(n)
    return [order[i : i + batch_size] for i in range(0, n, batch_size)]


@pytest.mark.parametrize("n,batch_size,megabatch", [(3200, 16, 50), (1601, 16, 50), (1000, 16, 7), (5, 16, 50)])
@pytest.mark.parametrize("two_d", [False, True])
def test_every_example_exactly_once_per_epoch(n, batch_size, megabatch, two_d):
    lengths = np.random.default_rng(1).integers(3, 90, (n, 2) if two_d else n)
    for epoch in range(3):
        batches = length_grouped_batches(lengths, batch_size, megabatch, seed=42, epoch=epoch)
        assert sorted(np.concatenate(batches).tolist()) == list(range(n))
        sizes = [len(b) for b in batches]
        assert all(s == batch_size for s in sizes[:-1]) and 0 < sizes[-1] <= batch_size  # only the last may be short
        assert len(batches) == -(-n // batch_size)
    dropped = length_grouped_batches(lengths, batch_size, megabatch, seed=42, drop_last=True)
    assert [len(b) for b in dropped] == [batch_size] * (n // batch_size)


def test_batches_are_length_homogeneous():
    lengths = synthetic_lengths()
    grouped = length_grouped_batches(lengths, 16, 50, seed=42)
    ratio = np.array([lengths[b].max() / lengths[b].min() for b in grouped])
    random_ratio = np.array([lengths[b].max() / lengths[b].min() for b in random_batches(len(lengths), 16)])
    assert ratio.max() <= 1.5 and np.median(ratio) <= 1.05, (ratio.max(), np.median(ratio))
    assert np.median(random_ratio) > 5
    assert padding_share(grouped, lengths) < 0.03 < 0.3 < padding_share(random_batches(len(lengths), 16), lengths)


def test_longest_batch_comes_first_even_from_a_short_last_megabatch():
    lengths = synthetic_lengths(1601)
    for seed in range(5):
        batches = length_grouped_batches(lengths, 16, 50, seed=seed)
        assert lengths[batches[0]].max() == lengths.max()
    lengths = np.full(801, 10)
    lengths[800] = 99  # alone in the last mega-batch, i.e. in the incomplete last batch
    for seed in range(5):
        batches = length_grouped_batches(lengths, 16, 50, seed=seed)
        assert 800 in batches[0] and len(batches[-1]) == 1


def test_one_order_per_seed_and_epoch():
    lengths = synthetic_lengths()
    run = lambda seed, epoch: np.concatenate(length_grouped_batches(lengths, 16, 50, seed, epoch)).tolist()
    assert run(42, 0) == run(42, 0) and run(42, 3) == run(42, 3)
    assert run(42, 0) != run(42, 1) and run(42, 0) != run(43, 0)


def test_megabatches_keep_batches_random():
    """Batch composition changes between epochs, and batches from all over the epoch are interleaved."""
    lengths = synthetic_lengths()
    first, second = (length_grouped_batches(lengths, 16, 50, 42, e) for e in (0, 1))
    assert len({frozenset(b.tolist()) for b in first} & {frozenset(b.tolist()) for b in second}) < 5
    maxima = np.array([lengths[b].max() for b in first[1:]])
    assert abs(np.corrcoef(np.arange(len(maxima)), maxima)[0, 1]) < 0.2  # no long-to-short sweep


def test_two_lengths_group_both_sides():
    """Bi-Encoder pairs (longer, shorter): both separately padded columns become homogeneous."""
    rng = np.random.default_rng(2)
    pairs = np.sort(rng.integers(5, 80, (6400, 2)), axis=1)[:, ::-1]
    grouped = length_grouped_batches(pairs, 16, 200, seed=42)
    assert padding_share(grouped, pairs) < 0.06 < 0.3 < padding_share(random_batches(len(pairs), 16), pairs)
    # only sorting by the sum of the two lengths pads far more
    by_sum = length_grouped_batches(pairs.sum(1), 16, 200, seed=42)
    assert padding_share(by_sum, pairs) > 2 * padding_share(grouped, pairs)


def test_samplers_follow_the_epoch():
    lengths = synthetic_lengths(100)
    sampler = LengthGroupedSampler(lengths, 16, 2, seed=7)
    assert len(sampler) == 100 and sorted(sampler) == list(range(100))
    sampler.set_epoch(2)
    assert list(sampler) == np.concatenate(length_grouped_batches(lengths, 16, 2, 7, 2)).tolist()
    batch_sampler = LengthGroupedBatchSampler(list(range(100)), 16, False, seed=7, lengths=lengths, megabatch=2)
    batch_sampler.set_epoch(2)
    assert len(batch_sampler) == 7 and [b for b in batch_sampler] == [
        b.tolist() for b in length_grouped_batches(lengths, 16, 2, 7, 2)]


LONG = "the quick brown fox jumps over the lazy dog and keeps running far away " * 4
PAIRS = pd.DataFrame({"sentence1": ["a cat", "short one here", LONG, "x y z", LONG],
                      "sentence2": [LONG, "x", "hello world", "x y z", LONG], "score": [0.1, 0.5, 0.9, 1.0, 0.3]})


@pytest.mark.parametrize("arch", ["ce", "cbe", "be"])
def test_lengths_are_the_tokens_the_model_sees(arch, tiny_model, tmp_path):
    """Counted lengths equal the real (unpadded) tokens of each input after truncation."""
    from augsbert.models.architectures import ARCHITECTURES
    from augsbert.training.pairs import _dataset, training_args
    from augsbert.training.trainers import pair_trainer

    params = train_params(arch, max_length=24, group_by_length=True, megabatch=2)
    adapter = ARCHITECTURES[arch]
    model = adapter.build(tiny_model, params, "cpu")
    trainer = pair_trainer(arch, model, training_args(params, tmp_path, 42, "cpu", "fp32", len(PAIRS)),
                           _dataset(PAIRS), [], params)
    data = trainer.train_dataset
    rows = [data[i] for i in range(len(data))]
    if arch == "ce":
        lengths = trainer.args.batch_sampler.keywords["lengths"]
        seen = model.preprocess([(r["sentence1"], r["sentence2"]) for r in rows])["attention_mask"].sum(1)
    elif arch == "cbe":
        lengths = np.array(data["length"])
        seen = trainer.data_collator(rows)["attention_mask"].sum(1)
    else:
        lengths = trainer.args.batch_sampler.keywords["lengths"]
        batch = trainer.data_collator(rows)
        seen = np.stack([batch["sentence1_attention_mask"].sum(1), batch["sentence2_attention_mask"].sum(1)], 1)
        assert (lengths[:, 0] >= lengths[:, 1]).all()  # longer sentence first
        assert sorted(zip(data["sentence1"], data["sentence2"])) != sorted(zip(PAIRS.sentence1, PAIRS.sentence2))
        assert {frozenset(p) for p in zip(data["sentence1"], data["sentence2"])} == {
            frozenset(p) for p in zip(PAIRS.sentence1, PAIRS.sentence2)}
        assert data["score"] == PAIRS.score.tolist()
    np.testing.assert_array_equal(np.asarray(seen), lengths)
    assert np.max(lengths) == 24  # truncated like the model truncates


def test_mlm_lengths_are_the_tokens_the_model_sees(tiny_model):
    from transformers import AutoTokenizer

    from augsbert.training.batching import pair_lengths
    from augsbert.models.cross_bi_encoder import SPECIALS_PER_PAIR, PairTokenizer
    from augsbert.models.mlm import MLMPairCollator

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    collator = MLMPairCollator(PairTokenizer(tokenizer, 24, True), 0.2, seed=0)
    seen = collator(PAIRS[["sentence1", "sentence2"]].to_dict("records"))["attention_mask"].sum(1)
    np.testing.assert_array_equal(seen.numpy(), pair_lengths(tokenizer, PAIRS.sentence1, PAIRS.sentence2, 24,
                                                             SPECIALS_PER_PAIR))


@pytest.mark.parametrize("arch", ["cbe", "be"])
def test_trainers_consume_the_grouped_order_of_each_epoch(arch, tiny_model, tmp_path):
    """The trainer's batches are exactly `length_grouped_batches` of epoch 0, then of epoch 1 (set_epoch arrives)."""
    from augsbert.models.architectures import ARCHITECTURES
    from augsbert.training.pairs import _dataset, training_args
    from augsbert.training.trainers import pair_trainer

    rng = np.random.default_rng(3)
    words = "cat dog bird fish horse sheep cow goat".split()
    table = pd.DataFrame({"sentence1": [" ".join(rng.choice(words, rng.integers(1, 15))) + f" n{i}" for i in range(40)],
                          "sentence2": [" ".join(rng.choice(words, rng.integers(1, 15))) for _ in range(40)],
                          "score": rng.random(40)})
    params = train_params(arch, epochs=2, batch_size=8, megabatch=2)
    adapter = ARCHITECTURES[arch]
    trainer = pair_trainer(arch, adapter.build(tiny_model, params, "cpu"),
                           training_args(params, tmp_path, 42, "cpu", "fp32", len(table)), _dataset(table), [], params)
    seen = []

    class Recorder:  # the trainer's own collator, noting each batch
        def __init__(self, collate):
            self.collate = collate

        def __getattr__(self, name):
            return getattr(self.collate, name)

        def __call__(self, rows):
            seen.append([r["sentence1"] + r["sentence2"] for r in rows])
            return self.collate(rows)

    trainer.data_collator = Recorder(trainer.data_collator)
    trainer.train()
    data = trainer.train_dataset
    lengths = np.array(data["length"]) if arch == "cbe" else trainer.args.batch_sampler.keywords["lengths"]
    texts = [a + b for a, b in zip(data["sentence1"], data["sentence2"])]
    expected = [[texts[i] for i in b] for epoch in (0, 1) for b in length_grouped_batches(lengths, 8, 2, 42, epoch)]
    assert seen == expected and seen[:5] != seen[5:]
