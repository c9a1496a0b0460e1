"""SimCSE with input word-embedding noise (seed 001, 4.1.2): `InputNoiseSimCSELoss`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import Tensor, nn

from .common import diagonal_targets
from .simcse_variant_base import SimCSEVariantLoss, normal_like, simcse_logits, uniform_like


# ---- input-embedding noise (§4.1.2): applied to the word-embedding matrix, before positions are added
def gaussian_noise(e: Tensor, sigma: float, generator=None) -> Tensor:
    """GNI: e + N(0, σ²) elementwise (seed 001: σ 0.001)."""
    return e + sigma * normal_like(e.shape, e, generator)


def gaussian_dropout(e: Tensor, sigma: float, generator=None) -> Tensor:
    """Gaussian dropout (Srivastava et al. 2014): e ⊙ N(1, σ²) elementwise (seed 001: σ 0.001)."""
    return e * (1.0 + sigma * normal_like(e.shape, e, generator))


def bernoulli_dropout(e: Tensor, rate: float, generator=None) -> Tensor:
    """Element dropout at `rate`, rescaled by 1/(1 - rate) as conventional (inverted) dropout is."""
    return e * (uniform_like(e.shape, e, generator) >= rate).to(e.dtype) / (1.0 - rate)


def feature_dropout(e: Tensor, rate: float, generator=None) -> Tensor:
    """Whole embedding dimensions dropped at `rate`, per sentence and at every position (rescaled as dropout)."""
    keep = (uniform_like((e.shape[0], 1, e.shape[-1]), e, generator) >= rate).to(e.dtype)
    return e * keep / (1.0 - rate)


def fgsm(gradient: Tensor, epsilon: float) -> Tensor:
    """FGSM (Goodfellow et al. 2015): δ = ε · sign(∇L), the first-order loss ascent within ‖δ‖∞ ≤ ε."""
    return epsilon * gradient.sign()


INPUT_NOISE = {"gni": gaussian_noise, "gaussian_dropout": gaussian_dropout, "bernoulli": bernoulli_dropout,
               "feature_bernoulli": feature_dropout}


class InputNoiseSimCSELoss(SimCSEVariantLoss):
    """SimCSE with noise on the input word embeddings (seed 001, 4.1.2; Table 3).

    The noise acts on the output of the encoder's word-embedding layer, before
    position and token-type embeddings are added and before BERT's embedding
    dropout (seed 001, 7.1: "the original BERT's dropout is applied after the
    summation"). `gni` e + N(0, σ²); `gaussian_dropout` e ⊙ N(1, σ²);
    `bernoulli` element dropout at `rate`; `feature_bernoulli` whole
    dimensions dropped at `rate`; `fgsm` e + ε · sign(∇_e L): the gradient of
    the SimCSE loss with respect to the positive view's word embeddings, from
    an extra pass whose anchors are detached; the loss is then computed with
    the perturbed positive. The encoder's dropout stays on (the noise is on
    top of SimCSE's two dropout views). `views`: `positive` (the second pass
    only; seed 001 augments "the anchor to generate positive samples") or
    `both` (random noises only; FGSM perturbs the positive).

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, noise: str, scale: float = 20.0, sigma: float = 0.001, rate: float = 0.1,
                 epsilon: float = 0.001, views: str = "positive") -> None:
        super().__init__(model, scale)
        if noise not in (*INPUT_NOISE, "fgsm"):
            raise ValueError(f"unknown input noise {noise!r}")
        self.noise, self.sigma, self.rate, self.epsilon, self.views = noise, sigma, rate, epsilon, views
        self.cross_entropy = nn.CrossEntropyLoss()
        self._transform: Callable[[Tensor], Tensor] | None = None
        model[0].auto_model.get_input_embeddings().register_forward_hook(self._hook)

    def _hook(self, module, args, output):
        return output if self._transform is None else self._transform(output)

    def embed_with(self, features: dict[str, Tensor], transform: Callable[[Tensor], Tensor] | None) -> Tensor:
        """Sentence embeddings with `transform` applied to the word embeddings of this pass only."""
        self._transform = transform
        try:
            return self.embed(features)
        finally:
            self._transform = None

    def random_noise(self, features: dict[str, Tensor], salt: int) -> Callable[[Tensor], Tensor]:
        function, generator = INPUT_NOISE[self.noise], self.generator(features, salt)
        amount = self.rate if self.noise in ("bernoulli", "feature_bernoulli") else self.sigma
        return lambda e: function(e, amount, generator)

    def fgsm_delta(self, anchors: Tensor, features: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """(δ = ε · sign(g), g) with g = ∇ of the SimCSE loss w.r.t. the positive view's word embeddings."""
        seen = {}

        def leaf(e: Tensor) -> Tensor:
            seen["e"] = e.detach().requires_grad_()
            return seen["e"]

        with torch.enable_grad():  # also in evaluation, which runs under no_grad
            positives = self.embed_with(features, leaf)
            logits = simcse_logits(anchors.detach(), positives, self.scale)
            (gradient,) = torch.autograd.grad(self.cross_entropy(logits, diagonal_targets(logits)), seen["e"])
        return fgsm(gradient, self.epsilon), gradient

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        if self.noise == "fgsm":
            anchors = self.embed(first)
            delta, _ = self.fgsm_delta(anchors, second)
            positives = self.embed_with(second, lambda e: e + delta)
        else:
            anchors = self.embed_with(first, self.random_noise(first, 1) if self.views == "both" else None)
            positives = self.embed_with(second, self.random_noise(second, 2))
        logits = simcse_logits(anchors, positives, self.scale)
        return self.cross_entropy(logits, diagonal_targets(logits))

    def get_config_dict(self) -> dict[str, Any]:
        return {"noise": self.noise, "sigma": self.sigma, "rate": self.rate, "epsilon": self.epsilon,
                "views": self.views, "scale": self.scale}
