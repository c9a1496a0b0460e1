"""SimCSE plus a weighted autoencoder on the shared f(x) (seed 000): `ContrastiveAutoEncoderLoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import Tensor, nn

from .common import WANG_2022


class ContrastiveAutoEncoderLoss(nn.Module):
    """Seed 000's multi-task learning (3.3, equation 3.6): L = L_contrastive + w · L_autoencoder on a shared f(x_i).

    The first view's embeddings f(x_i) feed both the contrastive loss (with
    the second view f(x_i+) and the in-batch negatives) and the autoencoder's
    decoder, as seed 000's Figure 3.5 shows: one encoder pass per view.
    `contrastive` must offer `compute_loss_from_embeddings` (sentence-
    transformers' MultipleNegativesRankingLoss does); `autoencoder` a
    `from_embedding(embedding, features)` (CLMAutoEncoderLoss,
    MLMAutoEncoderLoss). Returns the two terms as a dict (the trainer logs them).

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, contrastive: nn.Module, autoencoder: nn.Module, weight: float) -> None:
        super().__init__()
        self.model, self.contrastive, self.autoencoder, self.weight = model, contrastive, autoencoder, weight

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        first, second = list(sentence_features)[:2]
        shared = self.model(first)["sentence_embedding"]
        other = self.model(second)["sentence_embedding"]
        out = {"contrastive": self.contrastive.compute_loss_from_embeddings([shared, other], labels)}
        if self.weight:
            out["autoencoder"] = self.weight * self.autoencoder.from_embedding(shared, first)
        return out

    def get_config_dict(self) -> dict[str, Any]:
        return {"weight": self.weight}

    @property
    def citation(self) -> str:
        return WANG_2022
