"""Noise Matching (Reiml 2023, thesis 4.2.3): `NoiseMatchingLoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from ..models.topic_classifier import REIML_2023
from .common import scaled_cosine_logits


class NoiseMatchingLoss(nn.Module):
    """Noise Matching (Reiml 2023, thesis 4.2.3): SimCSE with x+ = T(x) and a stop-gradient on f(x).

    For a batch of clean sentences x_i and their deletion-noised copies T(x_i):
    logits_ij = scale * cos(sg(f(x_i)), f(T(x_j))), loss = cross-entropy with
    target i (SimCSE's orientation: rows are the anchors x_i, columns the
    positives x+_j). Only the noised side receives gradient, so T(x) is pulled
    towards x and never x towards T(x): a subsequence should be like its
    sentence, not the reverse. The clean pass runs under `no_grad` and is
    detached (no activations kept for it); dropout is on in both passes as in
    SimCSE.

    Inputs: (clean, noised) text pairs; the noised column is made by
    `augsbert.training.noise` (60 % deletion). No labels.
    """

    def __init__(self, model, scale: float = 20.0) -> None:
        super().__init__()
        self.model = model
        self.scale = scale
        self.cross_entropy = nn.CrossEntropyLoss()

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        clean_features, noised_features = list(sentence_features)[:2]
        with torch.no_grad():  # sg(f(x)); detach too, for an encoder that hands back a leaf tensor
            clean = self.model(clean_features)["sentence_embedding"].detach()
        noised = self.model(noised_features)["sentence_embedding"]
        logits = scaled_cosine_logits(clean, noised, self.scale)
        return self.cross_entropy(logits, torch.arange(len(logits), device=logits.device))

    def get_config_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}

    @property
    def citation(self) -> str:
        return REIML_2023
