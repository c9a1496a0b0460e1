"""The graph path of the pair trainers (augsbert.training.cuda_graphs, `cuda_graphs`), exercised on CPU: fixed-width
buckets, the static step (one forward for all columns of a Bi-Encoder batch) against the trainers' eager step,
and a capture that fails. The capture itself needs a GPU (benchmarks/bench_overhead.py --cuda-graphs)."""

import logging

import pytest
import torch

from augsbert.models.padding import batch_width, bucket_width
from augsbert.training import cuda_graphs
from conftest import plan_shipped, theme_pairs, train_params

NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
TRAINERS = ["be-cosine", "be-cosent", "be-angle", "be-mnrl", "be-margin_mse", "ce", "cbe"]
LOSS_OPTIONS = {"cosent": {"scale": 20.0}, "angle": {"scale": 20.0},
                "mnrl": {"scale": 20.0, "positive_threshold": 0.5}}


def test_bucket_widths():
    assert [bucket_width(w) for w in (1, 8, 9, 17, 63, 64, 65, 100, 128, 129, 200, 257, 500)] == \
        [8, 8, 16, 24, 64, 64, 80, 112, 128, 160, 224, 320, 512]
    assert [bucket_width(w, 50) for w in (45, 49, 50, 60)] == [48, 50, 50, 64]  # capped; a wider batch keeps its own
    widths = {bucket_width(w, 512) for w in range(1, 513)}
    assert len(widths) == 20 and all(w % 8 == 0 for w in widths)
    assert batch_width(13) == 13 and batch_width(13, 8) == 16 and batch_width(13, 8, 256) == 16
    assert batch_width(70, 8) == 72 and batch_width(70, 8, 256) == 80


def train_20_steps(trainer: str, tiny_model: str, work):
    """20 optimizer steps of `trainer` on the tiny model without dropout: the loss of every step, the weights."""
    from augsbert.training.pairs import fit

    arch, _, loss = trainer.partition("-")
    options = {"loss": loss, **LOSS_OPTIONS.get(loss, {})} if loss else {}
    pairs = theme_pairs(96, 3, words=(2, 14))
    result = fit(arch, tiny_model, pairs, None,
                 train_params(arch, epochs=1, max_steps=20, batch_size=8, max_length=24, config_kwargs=NO_DROPOUT,
                              **options), work, "cpu", "fp32")
    return ([entry["loss"] for entry in result.metrics["loss_log"]],
            {k: v.detach().clone() for k, v in result.model.state_dict().items()})


@pytest.fixture
def every_step_logged(monkeypatch):
    """The trainers log the loss of every step (not only every few)."""
    import augsbert.training.pairs as pairs

    original = pairs.training_args
    monkeypatch.setattr(pairs, "training_args", lambda *a, **k: {**original(*a, **k), "logging_steps": 1})


@pytest.fixture
def widths(monkeypatch):
    """(row width, padded width) of every batch padded to a bucket."""
    import augsbert.models.padding as padding

    seen, original = [], padding.bucket_width
    monkeypatch.setattr(padding, "bucket_width", lambda w, m=None: seen.append((w, original(w, m))) or seen[-1][1])
    return seen


@pytest.mark.parametrize("trainer", TRAINERS)
def test_bucketed_padding_changes_no_loss(trainer, tiny_model, tmp_path, monkeypatch, every_step_logged, widths):
    """Issue 37's acceptance: batches padded to their buckets give every one of 20 steps' loss within 1e-5 of
    exact-width batches (padding is masked; float summation order is all that changes)."""
    exact, _ = train_20_steps(trainer, tiny_model, tmp_path / "exact")
    assert not widths
    monkeypatch.setattr(cuda_graphs, "buckets", lambda device, max_length, torch_compile=False: max_length)  # as on CUDA with cuda_graphs: auto
    bucketed, _ = train_20_steps(trainer, tiny_model, tmp_path / "bucketed")
    assert any(padded > width for width, padded in widths)  # the batches really were wider
    assert len(exact) == len(bucketed) == 20
    assert max(abs(a - b) for a, b in zip(exact, bucketed)) <= 1e-5, (exact, bucketed)


@pytest.mark.parametrize("trainer", ["be-cosine", "be-mnrl", "be-margin_mse", "cbe"])
def test_the_static_step_trains_the_weights_of_the_eager_step(trainer, tiny_model, tmp_path, monkeypatch,
                                                              every_step_logged):
    """The graph path as it runs on CUDA, less the capture (CPU tensors are not replayed): buckets, the loss as a
    function of the batch's tensors and, for a Bi-Encoder, one forward for all columns. 20 steps: every loss within
    1e-5 and every weight within 1e-5 of the eager trainers'."""
    eager_losses, eager = train_20_steps(trainer, tiny_model, tmp_path / "eager")
    calls = []
    original = cuda_graphs.GraphedLoss.__call__
    monkeypatch.setattr(cuda_graphs.GraphedLoss, "__call__", lambda self, *a: calls.append(1) or original(self, *a))
    monkeypatch.setattr(cuda_graphs, "active", lambda device, torch_compile=False: True)
    static_losses, static = train_20_steps(trainer, tiny_model, tmp_path / "static")
    assert len(calls) == 20  # every step went through the static step
    assert max(abs(a - b) for a, b in zip(eager_losses, static_losses)) <= 1e-5
    for key in eager:
        torch.testing.assert_close(static[key], eager[key], rtol=0, atol=1e-5, msg=key)


@pytest.mark.parametrize("trainer", ["be-cosine", "cbe"])
def test_a_capture_that_fails_in_a_trainer_warns_once_and_trains_eagerly(trainer, tiny_model, tmp_path, monkeypatch,
                                                                         every_step_logged, caplog):
    """A user's GPU refuses the capture (simulated: CPU batches count as replayable, the capture raises): the
    job warns once, trains on eagerly and ends with the weights of the eager trainer."""
    eager_losses, eager = train_20_steps(trainer, tiny_model, tmp_path / "eager")
    attempts = []

    def refuse(module, sample, state):
        attempts.append(1)
        raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    monkeypatch.setattr(cuda_graphs, "active", lambda device, torch_compile=False: True)
    monkeypatch.setattr(cuda_graphs, "on_cuda", lambda tensors: True)
    monkeypatch.setattr(cuda_graphs, "capture", refuse)
    with caplog.at_level(logging.WARNING, logger="augsbert.training.cuda_graphs"):
        losses, weights = train_20_steps(trainer, tiny_model, tmp_path / "refused")
    assert len(attempts) == 1
    assert [r.getMessage() for r in caplog.records if r.name == "augsbert.training.cuda_graphs"] == [
        "cuda_graphs: capturing the training step failed (RuntimeError: CUDA error: operation not permitted when "
        "stream is capturing); this job trains eagerly (set cuda_graphs: off to skip the attempt)"]
    assert max(abs(a - b) for a, b in zip(eager_losses, losses)) <= 1e-5
    for key in eager:
        torch.testing.assert_close(weights[key], eager[key], rtol=0, atol=1e-5, msg=key)


@pytest.fixture(scope="module")
def encoder(tiny_model):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(tiny_model, device="cpu", config_kwargs=NO_DROPOUT)
    model.max_seq_length = 24
    return model


@pytest.mark.parametrize("loss", ["cosine", "cosent", "angle", "mnrl", "margin_mse"])
def test_one_forward_gives_the_loss_and_gradients_of_one_forward_per_column(loss, encoder):
    """Item 2 of issue 37: the columns of a batch padded to one width, encoded together and split, against the
    library's loss with one forward per column: the loss and every gradient within 1e-6."""
    from sentence_transformers.base.losses.merged_forward import column_merging_disabled

    from augsbert.models.student_losses import student_loss

    library = student_loss(encoder, train_params(loss=loss, **LOSS_OPTIONS.get(loss, {})))
    pairs = theme_pairs(8, 5, words=(2, 14))
    columns = [pairs["sentence1"].tolist(), pairs["sentence2"].tolist()]
    if loss in ("mnrl", "margin_mse"):
        columns.append(list(reversed(columns[1])))  # a third column (negatives): three forwards against one
    features = [encoder.preprocess(texts) for texts in columns]
    assert len({f["input_ids"].shape[1] for f in features}) > 1  # the columns' widths differ
    labels = torch.tensor(pairs["score"].tolist(), dtype=torch.float32) if loss != "mnrl" else None

    def run(compute):
        encoder.zero_grad()
        value = compute()
        value.backward()
        return value.detach(), {n: p.grad.clone() for n, p in encoder.named_parameters() if p.grad is not None}

    with column_merging_disabled():  # one forward per column, whatever the library would merge
        want, want_grads = run(lambda: library(features, labels))
    tensors, layout = cuda_graphs._flatten(features, labels)
    got, got_grads = run(lambda: cuda_graphs.TensorLoss(library, layout)(*tensors))
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert got_grads.keys() == want_grads.keys()
    for name in want_grads:
        torch.testing.assert_close(got_grads[name], want_grads[name], rtol=0, atol=1e-6, msg=name)


class Doubling(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(2.0))

    @property
    def trains(self):
        return self.training

    def forward(self, x):
        return (self.weight * x).sum()


def test_a_failed_capture_trains_on_eagerly_with_one_warning(caplog):
    def fail(module, sample, state):
        raise RuntimeError("operation not permitted when stream is capturing")

    static = cuda_graphs.GraphedLoss(lambda layout: Doubling(), fail)
    static.replayable = lambda tensors: True  # as CUDA tensors would be
    with caplog.at_level(logging.WARNING, logger="augsbert.training.cuda_graphs"):
        results = [static((torch.ones(n),), "layout").item() for n in (2, 3, 2)]
    assert results == [4.0, 6.0, 4.0]  # the eager module's values
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["cuda_graphs: capturing the training step failed (RuntimeError: operation not permitted "
                        "when stream is capturing); this job trains eagerly (set cuda_graphs: off to skip the attempt)"]
    assert static.failed and not static.graphs


def test_one_capture_per_shape_and_none_past_the_limit():
    captured = []

    def fake(module, sample, state):  # stands for the replay of what was captured
        captured.append(tuple(sample[0].shape))
        return module

    static = cuda_graphs.GraphedLoss(lambda layout: Doubling(), fake, max_graphs=2)
    static.replayable = lambda tensors: True
    values = [static((torch.ones(n),), "layout").item() for n in (2, 2, 3, 2, 4, 3)]
    assert values == [4.0, 4.0, 6.0, 4.0, 8.0, 6.0]
    assert captured == [(2,), (3,)]  # width 4 came after the limit: eager
    with torch.no_grad():  # evaluation: never captured
        static((torch.ones(5),), "layout")
    assert captured == [(2,), (3,)]


def test_cuda_graphs_is_a_runtime_choice_outside_every_key(monkeypatch):
    """`cuda_graphs` (schema, with a description) leaves every key of the shipped config as it is."""
    from augsbert.config.load import ConfigError

    base = plan_shipped({})
    for value in ("off", False):  # False: how YAML reads a bare `off`
        off = plan_shipped({"cuda_graphs": value})
        for experiment in ("demo_zeroshot", "demo_augsbert_cbe"):
            assert off.experiment(experiment).runs[42] == base.experiment(experiment).runs[42]
    with pytest.raises(ConfigError, match="cuda_graphs"):
        plan_shipped({"cuda_graphs": "on"})
    monkeypatch.delenv("AUGSBERT_CUDA_GRAPHS", raising=False)
    assert not cuda_graphs.active("cuda")  # off by default until measured on a GPU (docs/performance.md)
    monkeypatch.setenv("AUGSBERT_CUDA_GRAPHS", "off")
    assert not cuda_graphs.active("cuda") and cuda_graphs.buckets("cuda", 256) is None
    monkeypatch.setenv("AUGSBERT_CUDA_GRAPHS", "auto")
    assert cuda_graphs.active("cuda") and cuda_graphs.buckets("cuda", 256) == 256
    assert not cuda_graphs.active("cpu") and cuda_graphs.buckets("cpu", 256) is None  # eager stays the CPU path
    assert not cuda_graphs.active("cuda", torch_compile=True)  # a compiled model makes its own graphs
    monkeypatch.setenv("WORLD_SIZE", "2")  # DDP averages gradients in hooks a graph of the bare model would skip
    assert not cuda_graphs.active("cuda") and cuda_graphs.buckets("cuda", 256) is None
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.setenv("AUGSBERT_CUDA_GRAPHS", "yes")
    with pytest.raises(ConfigError, match="auto, off"):
        cuda_graphs.active("cuda")
