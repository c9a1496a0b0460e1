"""What seed 001's (Park) SimCSE variants share: the logits, the random draws, the base classes.

Random draws come from the global torch RNG in training (the trainer
checkpoints it) and from a generator fixed by the batch in eval mode, so the
held-out losses of different checkpoints compare (as ConSERTLoss does).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from .common import diagonal_targets


PARK_CITATION = """
@mastersthesis{park2023data,
    title={Data Augmentation, Stabilization and Negative Sample Generation Methods for Improving Sentence Embeddings of SimCSE},
    author={Park, Jinwoo},
    school={Seoul National University},
    year={2023}
}
"""


def simcse_logits(anchors: Tensor, positives: Tensor, scale: float, extra: Tensor | None = None) -> Tensor:
    """N x (N + K) logits: scale * cos(anchor_i, [positives; extra]_j); `extra` = K additional negatives."""
    candidates = positives if extra is None or len(extra) == 0 else torch.cat([positives, extra.to(positives.dtype)])
    return scale * nn.functional.normalize(anchors, dim=-1) @ nn.functional.normalize(candidates, dim=-1).T


def normal_like(shape, like: Tensor, generator: torch.Generator | None) -> Tensor:
    """N(0, 1) of `shape` on `like`'s device; a CPU `generator` (eval mode) draws on the CPU first."""
    if generator is None:
        return torch.randn(shape, device=like.device, dtype=like.dtype)
    return torch.randn(shape, generator=generator, dtype=like.dtype).to(like.device)


def uniform_like(shape, like: Tensor, generator: torch.Generator | None) -> Tensor:
    if generator is None:
        return torch.rand(shape, device=like.device, dtype=like.dtype)
    return torch.rand(shape, generator=generator, dtype=like.dtype).to(like.device)


class SimCSEVariantLoss(nn.Module):
    """Shared parts: the encoder call, eval-mode generators, the config dict, the citation."""

    def __init__(self, model, scale: float = 20.0) -> None:
        super().__init__()
        self.model, self.scale = model, scale

    def generator(self, features: dict[str, Tensor], salt: int = 0) -> torch.Generator | None:
        """None in training (global RNG); in eval a generator fixed by the batch's ids."""
        if self.model.training:
            return None
        ids = features["input_ids"]
        return torch.Generator().manual_seed(int(ids.sum()) + ids.numel() + salt)

    def embed(self, features: dict[str, Tensor]) -> Tensor:
        return self.model(features)["sentence_embedding"]

    def get_config_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}

    @property
    def citation(self) -> str:
        return PARK_CITATION


# ---- additional negatives (§4.3)
class ExtraNegativesSimCSELoss(SimCSEVariantLoss):
    """SimCSE whose denominator also holds K extra negatives: N x (N + K) logits, no gradient into them."""

    def __init__(self, model, scale: float = 20.0) -> None:
        super().__init__(model, scale)
        self.cross_entropy = nn.CrossEntropyLoss()

    def extra(self, anchors: Tensor, positives: Tensor, features: dict[str, Tensor]) -> Tensor | None:
        """The K extra negatives of this batch; each subclass draws its own (none here: plain SimCSE)."""
        return None

    def loss_from_embeddings(self, anchors: Tensor, positives: Tensor, extra: Tensor | None) -> Tensor:
        logits = simcse_logits(anchors, positives, self.scale, None if extra is None else extra.detach())
        return self.cross_entropy(logits, diagonal_targets(logits))

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        first, second = list(sentence_features)[:2]
        anchors, positives = self.embed(first), self.embed(second)
        return self.loss_from_embeddings(anchors, positives, self.extra(anchors, positives, first))


def push_rows(buffer: Tensor, filled: Tensor, rows: Tensor) -> None:
    """Queue `rows` (detached) into `buffer` in place, oldest first out; `filled` counts the valid rows at its end."""
    capacity = len(buffer)
    rows = rows.detach().to(buffer.dtype)[-capacity:]
    buffer.copy_(torch.cat([buffer[len(rows):], rows]))
    filled.fill_(min(int(filled) + len(rows), capacity))
