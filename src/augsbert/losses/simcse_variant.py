"""Park et al. (seed 001, section 4) variants of unsupervised SimCSE, chosen by `pretrain.simcse_variant`.

Every variant keeps SimCSE's core: the anchor is the sentence's first dropout
pass h_i, logits_ij = scale * cos(h_i, h'_j) over the batch's positives h'_j
(one direction, as `MultipleNegativesRankingLoss`), target i. What changes:

| variant | seed 001 | class |
| --- | --- | --- |
| `gni`, `gaussian_dropout`, `bernoulli`, `feature_bernoulli`, `fgsm` | §4.1.2, Tab. 3 | InputNoiseSimCSELoss |
| `output_gaussian`, `output_bernoulli`, `output_mask_trivial`, `output_mask_significant`, `output_fgsm` | §4.1.1, Tab. 2 | OutputAugmentedSimCSELoss |
| `label_smoothing` | §4.2, Tab. 4 | LabelSmoothingSimCSELoss |
| `sam`, `awp` | §4.2, Tab. 4 | WeightPerturbation (a trainer hook) + plain SimCSE |
| `awp+gni`, `awp+fgsm` | §4.2, Tab. 4 | WeightPerturbation + InputNoiseSimCSELoss |
| `memory_bank` | §4.3, Tab. 5 | MemoryBankSimCSELoss |
| `gaussian_negatives`, `cov_filtering`, `anchor_noise_negatives` | §4.3, Tab. 5 | GaussianNegativesSimCSELoss |
| `gmm` | §4.3, Tab. 5 | GMMNegativesSimCSELoss |
| `vae` | §4.3, Tab. 5 | VAENegativesSimCSELoss (GaussianVAE, Kingma & Welling 2014) |

`variant_loss` builds the loss of a variant; SAM / AWP are a trainer hook (augsbert.training.weight_perturbation).
"""

from __future__ import annotations

from .gaussian_negatives_simcse import GaussianNegativesSimCSELoss
from .gmm_negatives_simcse import GMMNegativesSimCSELoss
from .input_noise_simcse import INPUT_NOISE, InputNoiseSimCSELoss
from .label_smoothing_simcse import LabelSmoothingSimCSELoss
from .memory_bank_simcse import MemoryBankSimCSELoss
from .output_augmented_simcse import OutputAugmentedSimCSELoss
from .vae_negatives_simcse import VAENegativesSimCSELoss


def variant_loss(model, params, scale: float):
    """The loss of `simcse` with `params.simcse_variant` (the `pretrain` stage's params; SAM / AWP add a trainer
    hook, augsbert.training.weight_perturbation)."""
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    variant = params.simcse_variant
    noise = variant.split("+")[-1]  # awp+gni -> gni
    if variant in ("none", "sam", "awp"):
        return MultipleNegativesRankingLoss(model, scale=scale)
    if noise in (*INPUT_NOISE, "fgsm"):
        return InputNoiseSimCSELoss(model, noise, scale, sigma=params.noise_sigma,
                                    rate=params.noise_rate, epsilon=params.fgsm_epsilon,
                                    views=params.noise_views)
    if variant in OutputAugmentedSimCSELoss.KINDS:
        return OutputAugmentedSimCSELoss(model, variant, scale, rate=params.noise_rate,
                                         epsilon=params.fgsm_epsilon)
    if variant == "label_smoothing":
        return LabelSmoothingSimCSELoss(model, scale, params.label_smoothing)
    count = params.extra_negatives or params.batch_size
    if variant == "memory_bank":
        return MemoryBankSimCSELoss(model, params.batch_size, scale)
    if variant in GaussianNegativesSimCSELoss.KINDS:
        return GaussianNegativesSimCSELoss(model, variant, count, scale, params.cov_sampling)
    if variant == "gmm":
        return GMMNegativesSimCSELoss(model, count, params.gmm_components, params.gmm_history,
                                      params.batch_size, scale)
    if variant == "vae":
        return VAENegativesSimCSELoss(model, count, params.vae_history, params.batch_size, params.vae_hidden,
                                      params.vae_latent, params.vae_lr, params.vae_updates, params.vae_sampling,
                                      scale)
    raise ValueError(f"unknown pretrain.simcse_variant {variant!r}")
