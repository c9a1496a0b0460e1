"""What active learning asks of a round's teacher about unlabelled pairs (stage `active_select`; the strategies are
augsbert.sampling.active): its score, each ensemble member's score, its scores over MC dropout passes, and a
vector per pair for clustering.

MC dropout (Gal & Ghahramani 2016) keeps the trained model as it is and turns its dropout on while it predicts:
every `torch.nn.Dropout` module, and the attention modules, whose attention-probability dropout transformers
applies only while the module itself is in training mode, are put in training mode just before each forward
pass (a forward pre-hook: the libraries' `predict` switch the whole model to eval mode first), and every module's
mode is restored afterwards. Nothing else changes (no gradients, the same batches, the same activation); the
passes are seeded (`torch.manual_seed`), so a rerun draws the same masks on the same device.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import numpy as np

from ..store.artifacts import read_json
from .architectures import load_bi_encoder
from .ensemble import combine
from .inference import Encoder
from .teacher import TrainedPairModel

log = logging.getLogger(__name__)


def dropout_modules(model) -> list:
    """The modules MC dropout switches on: every Dropout, and every attention module (its probabilities' dropout
    reads the module's own training flag)."""
    import torch

    return [m for m in model.modules()
            if isinstance(m, torch.nn.Dropout) or type(m).__name__.endswith("Attention")]


@contextlib.contextmanager
def dropout_on(model):
    """Inside, every forward pass of `model` runs with its dropout on (and nothing else in training mode); every
    module's mode is as before afterwards."""
    modes = {m: m.training for m in model.modules()}

    def on(module, args):
        module.training = True

    hooks = [m.register_forward_pre_hook(on) for m in dropout_modules(model)]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
        for module, mode in modes.items():
            module.training = mode


def dropout_passes(arch, model, pairs: list[tuple[str, str]], passes: int, seed: int, batch_size: int,
                   params) -> np.ndarray:
    """(passes, pairs): the scores of `pairs` by `model` (architecture `arch`) in `passes` passes with its dropout
    on, the masks drawn from torch's generator seeded with `seed`."""
    import torch

    torch.manual_seed(seed)
    with dropout_on(model), torch.no_grad():
        return np.stack([np.asarray(arch.predict(model, pairs, batch_size, params), dtype=np.float64)
                         for _ in range(passes)])


def pair_vectors(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """One vector per pair, the same for (a, b) and (b, a): [u + v, |u - v|] of the two embeddings, L2-normalised
    (SBERT's classification features without the order-dependent part)."""
    vectors = np.concatenate([first + second, np.abs(first - second)], axis=1).astype(np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


class TeacherScorer:
    """The round's teacher artifact (a single teacher, or a `teacher_ensemble` artifact with its members) as an
    augsbert.sampling.active.Scorer; `encoder` (a model directory) and `max_length` (its tokens per text, planned with
    it): the Bi-Encoder whose embeddings make the pair vectors (diverse)."""

    def __init__(self, teacher: str | Path, members: list[str | Path], device: str, batch_size: int,
                 encoder: str | None = None, max_length: int | None = None):
        teacher = Path(teacher)
        self.ensemble = read_json(teacher / "ensemble.json") if (teacher / "ensemble.json").is_file() else None
        self.models = [TrainedPairModel(d, device) for d in (members if self.ensemble else [teacher])]
        self.device, self.batch_size, self.encoder, self.max_length = device, batch_size, encoder, max_length
        self._scores: dict[int, np.ndarray] = {}

    def members(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        key = hash(tuple(pairs))
        if key not in self._scores:
            self._scores[key] = np.stack([m.score(pairs, self.batch_size) for m in self.models])
            log.info("scored %d pairs with %d teacher model(s)", len(pairs), len(self.models))
        return self._scores[key]

    def teacher(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        scores = self.members(pairs)
        if not self.ensemble:
            return scores[0]
        return combine(scores, self.ensemble["combine"], self.ensemble.get("statistics"))

    def passes(self, pairs: list[tuple[str, str]], passes: int, seed: int) -> np.ndarray:
        if len(self.models) != 1:
            raise ValueError("MC dropout scores with one teacher, not an ensemble")
        model = self.models[0]
        scores = dropout_passes(model.arch, model.model, pairs, passes, seed, self.batch_size, model.params)
        log.info("scored %d pairs in %d MC dropout passes", len(pairs), passes)
        return scores

    def embed(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        if self.encoder is None or self.max_length is None:
            raise ValueError("no encoder (with its max_length) for pair vectors")
        encode = Encoder(load_bi_encoder(self.encoder, self.device, self.max_length), self.batch_size, False)
        return pair_vectors(encode([a for a, _ in pairs]), encode([b for _, b in pairs]))
