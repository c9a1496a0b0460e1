"""SimCSE with a memory bank of negatives (seed 001, 4.3): `MemoryBankSimCSELoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from .simcse_variant_base import ExtraNegativesSimCSELoss, push_rows


class MemoryBankSimCSELoss(ExtraNegativesSimCSELoss):
    """SimCSE + a memory bank of the previous step's positives as negatives (seed 001, 4.3; Table 5).

    A queue of `size` (= the batch size, seed 001) detached positive
    embeddings h' from the previous training step(s), appended to the
    denominator; it is updated after the loss of a step is computed, so step t
    sees the outputs of step t-1 (no momentum encoder: seed 001 wants "the
    impact of representation of the past"). The queue is a buffer of the loss:
    checkpoints save it and a resumed run continues with it. In eval mode the
    bank is neither used nor updated: a held-out loss with a bank filled by
    training would not compare with one of an untrained model.

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, size: int, scale: float = 20.0) -> None:
        super().__init__(model, scale)
        dim = model.get_embedding_dimension()
        self.register_buffer("bank", torch.zeros(size, dim, device=model.device))
        self.register_buffer("bank_filled", torch.zeros((), dtype=torch.long, device=model.device))

    def entries(self) -> Tensor:
        return self.bank[len(self.bank) - int(self.bank_filled):]

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        anchors, positives = self.embed(first), self.embed(second)
        if not self.model.training:
            return self.loss_from_embeddings(anchors, positives, None)
        loss = self.loss_from_embeddings(anchors, positives, self.entries().clone())
        push_rows(self.bank, self.bank_filled, positives)
        return loss

    def get_config_dict(self) -> dict[str, Any]:
        return {"size": len(self.bank), "scale": self.scale}
