"""Forward-only batches (augsbert.models.inference): rows by free memory on CUDA (given numbers), CPU results exactly as
before, results in input order whatever the batch size (tiny model)."""

import contextlib

import numpy as np
import pytest
import torch

from augsbert.models import inference
from augsbert.evaluation.similarity import Encoder
from augsbert.models.gpu_memory import CONTEXT_MB
from augsbert.scheduling.gpus import JOB_CLAIM_ENV, JOB_GPU_MEM_ENV, JobClaim
from augsbert.models.architectures import ARCHITECTURES
from augsbert.models.device import PRECISION_ENV
from conftest import theme_pairs, train_params

MINILM = {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12, "intermediate_size": 1536,
          "vocab_size": 30522, "max_position_embeddings": 512}


def test_rows_for_memory_within_the_stage_batch_and_the_cap():
    assert inference.rows_for_memory(80_000, 10.0, 64) == 1024  # 4,000 fit: capped
    assert inference.rows_for_memory(3_000, 10.0, 64) == 150  # half of 3,000 MB at 10 MB a row
    assert inference.rows_for_memory(1_000, 10.0, 64) == 64  # 50 fit: never below the stage's batch size
    assert inference.rows_for_memory(-5, 10.0, 16) == 16
    assert inference.rows_for_memory(80_000, 10.0, 2048) == 2048  # a larger stage batch is kept
    with pytest.raises(ValueError, match="row_mb"):
        inference.rows_for_memory(1_000, 0.0, 64)


def test_row_mb_is_the_forward_figure_of_gpu_memory():
    # 1.25 x 256 tokens x (20 h + 4 a s) bytes = 1.25 x 256 x (7,680 + 12,288)
    assert inference.row_mb(MINILM, 256) == pytest.approx(1.25 * 256 * 19_968 / 1e6)
    assert inference.row_mb(MINILM, 4096) == inference.row_mb(MINILM, 512)  # no longer than the positions


def test_longest_row_counts_tokens_of_texts_and_pairs(bert_tokenizer):
    count = {t: len(bert_tokenizer(t, add_special_tokens=False)["input_ids"])
             for t in ("a cat", "the stock market fell sharply", "rain")}
    assert inference.longest_row(bert_tokenizer, ["a cat", "rain"]) == count["a cat"] + inference.SPECIAL_TOKENS
    pairs = [("a cat", "rain"), ("the stock market fell sharply", "a cat")]
    longest = count["the stock market fell sharply"] + count["a cat"]
    assert inference.longest_row(bert_tokenizer, pairs) == longest + inference.SPECIAL_TOKENS
    # never below what the tokenizer makes of the pair with its special tokens (BERT: 3)
    assert len(bert_tokenizer(*pairs[1])["input_ids"]) <= inference.longest_row(bert_tokenizer, pairs)


@pytest.fixture(scope="module")
def models(tiny_model):
    torch.manual_seed(0)
    return {arch: ARCHITECTURES[arch].build(tiny_model, train_params(arch, max_length=32), "cpu")
            for arch in ("be", "ce", "cbe")}


@pytest.mark.parametrize("arch", ["be", "ce", "cbe"])
def test_batch_size_on_cuda_from_the_memory_given(models, monkeypatch, arch):
    model = models[arch]
    dims, max_length = inference.model_shape(model)
    assert (dims["hidden_size"], dims["num_attention_heads"], max_length) == (16, 2, 32)
    assert inference.batch_size(model, 16, ["a text"]) == 16  # CPU: the stage's own
    monkeypatch.setattr(inference, "model_device", lambda m: "cuda:0")
    monkeypatch.setattr(inference, "usable_mb", lambda device: 1.0)
    per_row = inference.row_mb(dims, max_length)
    assert inference.batch_size(model, 16) == max(16, int(0.5 // per_row))
    monkeypatch.setattr(inference, "usable_mb", lambda device: 80_000.0)
    assert inference.batch_size(model, 16) == inference.MAX_ROWS
    # rows sized for the longest of the call's texts / pairs (here 1 or 2 words + specials), not max_length
    monkeypatch.setattr(inference, "usable_mb", lambda device: 0.5)
    rows = [("cat", "dog")] if arch != "be" else ["cat"]
    length = inference.longest_row(inference.tokenizer_of(model), rows)
    assert length < max_length
    assert inference.batch_size(model, 16, rows) == max(16, int(0.25 // inference.row_mb(dims, length)))
    assert inference.batch_size(model, 16, rows) > inference.batch_size(model, 16)


def test_usable_memory_within_the_job_claim(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (70_000e6, 80_000e6))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 400e6)
    monkeypatch.delenv(JOB_GPU_MEM_ENV, raising=False)
    assert inference.usable_mb("cuda:0") == pytest.approx(70_000)  # a GPU of its own: its free memory
    monkeypatch.setenv(JOB_GPU_MEM_ENV, "2250")  # a packed run: what its claim leaves
    assert inference.usable_mb("cuda:0") == pytest.approx(2250 - CONTEXT_MB - 400)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1_000e6, 80_000e6))
    assert inference.usable_mb("cuda:0") == pytest.approx(1_000)  # the GPU fuller than the claim assumed
    # the claim as the stage rules write it now (one word, augsbert.scheduling.gpus.JobClaim), per GPU of the job
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (70_000e6, 80_000e6))
    monkeypatch.delenv(JOB_GPU_MEM_ENV)
    monkeypatch.setenv(JOB_CLAIM_ENV, str(JobClaim(1, 2250)).partition("=")[2])
    assert inference.usable_mb("cuda:0") == pytest.approx(2250 - CONTEXT_MB - 400)
    monkeypatch.setenv(JOB_CLAIM_ENV, "2:4500")
    assert inference.usable_mb("cuda:0") == pytest.approx(2250 - CONTEXT_MB - 400)


def test_autocast_only_on_cuda(models, monkeypatch):
    assert isinstance(inference.autocast(models["be"]), contextlib.nullcontext)
    monkeypatch.setattr(inference, "model_device", lambda m: "cuda")
    for precision, dtype in (("auto", torch.float16), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
        monkeypatch.setenv(PRECISION_ENV, precision)
        with pytest.warns(UserWarning) if not torch.cuda.is_available() else contextlib.nullcontext():
            ctx = inference.autocast(models["be"])
        assert (ctx.device, ctx.fast_dtype) == ("cuda", dtype)
    monkeypatch.setenv(PRECISION_ENV, "fp32")
    assert isinstance(inference.autocast(models["be"]), contextlib.nullcontext)


TEXTS = [" ".join(["word"] * n) + f" {i}" for i, n in enumerate([3, 30, 1, 12, 7, 30, 2, 18, 5, 9, 25, 4])]


def test_cpu_scores_exactly_as_the_library_calls(models):
    """CPU: the very calls of before (the stage's batch size, no autocast), compared bit for bit."""
    be, ce, cbe = models["be"], models["ce"], models["cbe"]
    expected = be.encode(TEXTS, batch_size=8, convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_array_equal(Encoder(be, 8)(TEXTS), expected)
    pairs = list(zip(TEXTS, reversed(TEXTS)))
    params = train_params("ce", max_length=32)
    np.testing.assert_array_equal(ARCHITECTURES["ce"].predict(ce, pairs, 4, params),
                                  ce.predict(pairs, batch_size=4, activation_fn=torch.nn.Sigmoid(),
                                             show_progress_bar=False, convert_to_numpy=True).astype(np.float64))
    np.testing.assert_array_equal(ARCHITECTURES["cbe"].predict(cbe, pairs, 4, params),
                                  cbe.predict(pairs, batch_size=4).astype(np.float64))


@pytest.mark.parametrize("arch", ["be", "ce", "cbe"])
def test_large_batches_give_each_pair_its_score_in_input_order(models, monkeypatch, arch):
    """Rows per batch as on a large GPU (all 40 pairs in one): each pair keeps the score the stage's batches of 4
    give it, at its own position. Not bit for bit: a batch of other width sums in another order (6e-8 here), so
    within 1e-6, below the differences between the pairs' scores."""
    pairs = list(zip(theme_pairs(40, seed=3, words=(1, 12))["sentence1"],
                     theme_pairs(40, seed=4, words=(1, 12))["sentence2"]))
    params = train_params(arch, max_length=32)
    before = ARCHITECTURES[arch].predict(models[arch], pairs, 4, params)
    monkeypatch.setattr(inference, "batch_size", lambda model, requested, rows=None: 1024)
    after = ARCHITECTURES[arch].predict(models[arch], pairs, 4, params)
    np.testing.assert_allclose(after, before, rtol=0, atol=1e-6)
    assert not np.allclose(np.roll(before, 1), before, rtol=0, atol=1e-6)  # pairs out of place would show
    alone = np.array([ARCHITECTURES[arch].predict(models[arch], [p], 4, params)[0] for p in pairs[:5]])
    np.testing.assert_allclose(after[:5], alone, rtol=0, atol=1e-6)  # pair i's own score at position i
