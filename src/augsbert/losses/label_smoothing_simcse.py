"""SimCSE with label smoothing (seed 001, 4.2): `LabelSmoothingSimCSELoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import Tensor, nn

from .common import diagonal_targets
from .simcse_variant_base import SimCSEVariantLoss, simcse_logits


# ---- stability (§4.2)
class LabelSmoothingSimCSELoss(SimCSEVariantLoss):
    """SimCSE with label-smoothed cross-entropy (Szegedy et al. 2016; seed 001, 4.2: smoothing 0.1).

    Target distribution (1 - s) · onehot(i) + s / N over the N in-batch
    candidates, i.e. torch's `cross_entropy(label_smoothing=s)`.

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, scale: float = 20.0, smoothing: float = 0.1) -> None:
        super().__init__(model, scale)
        self.smoothing = smoothing

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        logits = simcse_logits(self.embed(first), self.embed(second), self.scale)
        return nn.functional.cross_entropy(logits, diagonal_targets(logits), label_smoothing=self.smoothing)

    def get_config_dict(self) -> dict[str, Any]:
        return {"smoothing": self.smoothing, "scale": self.scale}
