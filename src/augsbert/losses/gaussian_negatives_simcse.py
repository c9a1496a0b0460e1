"""SimCSE with Gaussian-drawn negatives (seed 001, 4.3): `GaussianNegativesSimCSELoss`."""

from __future__ import annotations

import math
from typing import Any

from torch import Tensor

from .simcse_variant_base import ExtraNegativesSimCSELoss, normal_like


class GaussianNegativesSimCSELoss(ExtraNegativesSimCSELoss):
    """SimCSE + K sampled negatives fitted to the batch's anchors (seed 001, 4.3; Tables 5, 7; Figure 10).

    `gaussian_negatives`: K draws from N(μ_z, diag σ_z²), μ_z and σ_z the
    per-dimension mean and standard deviation of the batch's anchor embeddings
    (Table 7: the scale of the batch matters). `cov_filtering`: draws from
    N(μ_z, Σ_z) with the batch's full covariance Σ_z, sampled as μ_z +
    Z_cᵀ ε / √(N-1) (Z_c the centred anchors, ε ~ N(0, I_N)), which needs no
    factorisation of the rank-deficient Σ_z: our reading of "covariance matrix
    ... inner product with sampled noise" (`cov_sampling: gaussian`). The other
    reading, `cov_sampling: sigma_noise`, takes the words literally: μ_z + Σ_z ε,
    ε ~ N(0, I_d), the covariance matrix times white noise (covariance Σ_z², not
    Σ_z). `anchor_noise_negatives`: one
    negative per anchor, h_i + N(0, σ_z²) ("GNI to anchor encoder output").
    The statistics are detached and the samples carry no gradient.

    Inputs: (anchor, positive) columns holding the same text. No labels.
    """

    KINDS = ("gaussian_negatives", "cov_filtering", "anchor_noise_negatives")

    COV_SAMPLING = ("gaussian", "sigma_noise")

    def __init__(self, model, kind: str = "gaussian_negatives", count: int = 64, scale: float = 20.0,
                 cov_sampling: str = "gaussian") -> None:
        super().__init__(model, scale)
        if kind not in self.KINDS:
            raise ValueError(f"unknown negative sampling {kind!r}")
        if cov_sampling not in self.COV_SAMPLING:
            raise ValueError(f"unknown cov_sampling {cov_sampling!r}")
        self.kind, self.count, self.cov_sampling = kind, count, cov_sampling

    def sample(self, anchors: Tensor, generator=None) -> Tensor:
        z = anchors.detach()
        correction = 1 if len(z) > 1 else 0
        mu, sigma = z.mean(dim=0), z.std(dim=0, correction=correction)
        if self.kind == "anchor_noise_negatives":
            return z + sigma * normal_like(z.shape, z, generator)
        if self.kind == "gaussian_negatives":
            return mu + sigma * normal_like((self.count, z.shape[1]), z, generator)
        centred = (z - mu) / math.sqrt(max(len(z) - correction, 1))  # Σ_z = centredᵀ centred
        if self.cov_sampling == "sigma_noise":  # Σ_z ε without forming the d x d matrix
            return mu + (normal_like((self.count, z.shape[1]), z, generator) @ centred.T) @ centred
        return mu + normal_like((self.count, len(z)), z, generator) @ centred

    def extra(self, anchors: Tensor, positives: Tensor, features: dict[str, Tensor]) -> Tensor:
        return self.sample(anchors, self.generator(features))

    def get_config_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "count": self.count, "scale": self.scale, "cov_sampling": self.cov_sampling}
