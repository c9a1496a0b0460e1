"""SimCSE with negatives drawn from a Gaussian mixture (seed 001, 4.3): `GMMNegativesSimCSELoss`."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from .simcse_variant_base import ExtraNegativesSimCSELoss, push_rows


class GMMNegativesSimCSELoss(ExtraNegativesSimCSELoss):
    """SimCSE + K negatives sampled from a Gaussian mixture of past anchors (seed 001, 4.3; Table 5).

    Before each training step a `components`-component diagonal GMM
    (scikit-learn's GaussianMixture, EM from k-means++ centres) is fitted to
    the detached anchor embeddings of the previous `history` steps ("updated at
    each step using the encoder outputs from the previous steps"); K samples
    from it are extra negatives. The first step has no history and no extra
    negatives. The stored outputs are a buffer of the loss (checkpointed), and
    the mixture is refitted from them every step, so a resumed run draws the
    same negatives. In eval mode no negatives are drawn and nothing is stored
    (see MemoryBankSimCSELoss).

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    def __init__(self, model, count: int = 64, components: int = 4, history: int = 8, batch_size: int = 64,
                 scale: float = 20.0) -> None:
        super().__init__(model, scale)
        self.count, self.components = count, components
        dim = model.get_embedding_dimension()
        self.register_buffer("past", torch.zeros(history * batch_size, dim, device=model.device))
        self.register_buffer("past_filled", torch.zeros((), dtype=torch.long, device=model.device))

    def sample(self, like: Tensor) -> Tensor | None:
        from sklearn.mixture import GaussianMixture

        filled = int(self.past_filled)
        if filled < 2:
            return None
        data = self.past[len(self.past) - filled:].double().cpu().numpy()
        seed = int(torch.randint(0, 2**31 - 1, (1,)))  # from the global RNG, which the trainer checkpoints
        mixture = GaussianMixture(min(self.components, filled), covariance_type="diag", max_iter=20,
                                  random_state=seed).fit(data)
        samples, _ = mixture.sample(self.count)
        return torch.from_numpy(samples).to(like.device, like.dtype)

    def extra(self, anchors: Tensor, positives: Tensor, features: dict[str, Tensor]) -> Tensor | None:
        if not self.model.training:
            return None
        samples = self.sample(anchors)
        push_rows(self.past, self.past_filled, anchors)
        return samples

    def get_config_dict(self) -> dict[str, Any]:
        return {"count": self.count, "components": self.components, "history_rows": len(self.past),
                "scale": self.scale}
