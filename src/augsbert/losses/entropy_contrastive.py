"""RCL's entropy models (seed 002, equation 2): `EntropyContrastiveLoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from .common import cosine_logits, diagonal_targets, sentence_embeddings
from .regularized_contrastive import RCL_CITATION


class EntropyContrastiveLoss(nn.Module):
    """Equation 2 of RCL: J_i = l_i - φ Σ_j p_ij log p_ij, with p_ij = softmax_j cos(q_i, d_j).

    l_i is equation 1, -log softmax_j cos(q_i, d_j) at j = i, over the batch's
    documents (and NLI contradictions, if the rows have them). The entropy
    term is φ·H(p_i) over the same distribution, every j included: the
    paper's "i ≠ j" beside the definition of score_train is read as a remark,
    because excluding the diagonal would leave p unnormalised. φ > 0 sharpens
    p_i (the query becomes more certain of its document), φ < 0 flattens it;
    φ = 0 is equation 1. Reduction: mean over the batch.

    Inputs: (anchor, positive[, negative]) texts; a `label` column is ignored.
    """

    def __init__(self, model, phi: float) -> None:
        super().__init__()
        self.model = model
        self.phi = phi

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        queries, *docs = sentence_embeddings(self.model, sentence_features)
        logits = cosine_logits(queries, torch.cat(docs))
        log_p = torch.log_softmax(logits, dim=1)
        contrastive = nn.functional.nll_loss(log_p, diagonal_targets(logits))
        entropy = -(log_p.exp() * log_p).sum(dim=1).mean()
        return contrastive + self.phi * entropy

    def get_config_dict(self) -> dict[str, Any]:
        return {"phi": self.phi}

    @property
    def citation(self) -> str:
        return RCL_CITATION
