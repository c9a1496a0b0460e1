"""SimCSE with augmented encoder outputs (seed 001, 4.1.1): `OutputAugmentedSimCSELoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from .common import diagonal_targets
from .input_noise_simcse import fgsm
from .simcse_variant_base import SimCSEVariantLoss, normal_like, simcse_logits, uniform_like


# ---- output augmentation instead of the second pass (§4.1.1)
def magnitude_mask(h: Tensor, rate: float, largest: bool) -> Tensor:
    """h with the round(rate · d) dimensions of smallest (or largest) |h| zeroed, per sentence."""
    k = max(1, round(rate * h.shape[-1]))
    chosen = h.abs().topk(k, dim=-1, largest=largest).indices
    return h.scatter(-1, chosen, 0.0)


class OutputAugmentedSimCSELoss(SimCSEVariantLoss):
    """SimCSE whose positive is made from the anchor's encoder output, not a second pass (seed 001, 4.1.1; Table 2).

    One encoder pass h (dropout on); h' = aug(h), gradients flow through both.
    `output_gaussian`: h + N(0, σ_d²) with σ_d the batch's standard deviation
    of dimension d (detached: the noise is a sample); `output_bernoulli`: h ⊙
    Bernoulli mask at `rate` (no rescaling: the cosine ignores it);
    `output_mask_trivial` / `output_mask_significant`: zero the `rate` (10 %)
    of dimensions with the smallest / largest |h|; `output_fgsm`: h + ε ·
    sign(∇_{h'} L) at h' = h.

    Inputs: (anchor, positive) columns holding the same text; only the first is encoded. No labels.
    """

    KINDS = ("output_gaussian", "output_bernoulli", "output_mask_trivial", "output_mask_significant", "output_fgsm")

    def __init__(self, model, kind: str, scale: float = 20.0, rate: float = 0.1, epsilon: float = 0.001) -> None:
        super().__init__(model, scale)
        if kind not in self.KINDS:
            raise ValueError(f"unknown output augmentation {kind!r}")
        self.kind, self.rate, self.epsilon = kind, rate, epsilon
        self.cross_entropy = nn.CrossEntropyLoss()

    def augment(self, h: Tensor, generator=None) -> Tensor:
        if self.kind == "output_gaussian":
            sigma = h.detach().std(dim=0, correction=1 if len(h) > 1 else 0)
            return h + sigma * normal_like(h.shape, h, generator)
        if self.kind == "output_bernoulli":
            return h * (uniform_like(h.shape, h, generator) >= self.rate).to(h.dtype)
        if self.kind in ("output_mask_trivial", "output_mask_significant"):
            return magnitude_mask(h, self.rate, largest=self.kind == "output_mask_significant")
        with torch.enable_grad():
            point = h.detach().requires_grad_()
            logits = simcse_logits(h.detach(), point, self.scale)
            (gradient,) = torch.autograd.grad(self.cross_entropy(logits, diagonal_targets(logits)), point)
        return h + fgsm(gradient, self.epsilon)

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first = list(sentence_features)[0]
        anchors = self.embed(first)
        logits = simcse_logits(anchors, self.augment(anchors, self.generator(first)), self.scale)
        return self.cross_entropy(logits, diagonal_targets(logits))

    def get_config_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "rate": self.rate, "epsilon": self.epsilon, "scale": self.scale}
