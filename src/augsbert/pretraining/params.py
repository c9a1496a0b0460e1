"""The `pretrain` stage's typed params (augsbert.params), shared by its planning, its trainer and the losses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..params import TrainingParams


@dataclass(frozen=True, kw_only=True)
class PretrainParams(TrainingParams):
    """The `pretrain` stage's params: the `pretrain` section as `pretraining.objectives.resolved` leaves it: the schedule filled from the
    preset, and only the options the objective (and SimCSE variant) reads; the rest are None here.

    `eval_batch_size` / `eval_max_length` encode the target's dev split (checkpoint selection and the
    results row), as the zero-shot row does; `regulators` is set by the job (RCL: its entropy inputs).
    """

    objective: str
    preset: str | None = None  # the preset the plan filled the schedule from (the job reads the schedule)
    max_steps: int
    scheduler: str
    warmup_steps: int | None = None  # set: the warm-up in steps (seed 000's 910), in place of warmup_ratio
    optimizer: Literal["adamw", "rmsprop"] = "adamw"  # rmsprop: the `ct` preset (TSDAE App. B)
    pooling: Literal["cls", "mean"]
    pool: Literal["all", "train", "unlabeled", "train+unlabeled"] = "all"
    exclude_eval_sentences: bool
    held_out: float
    eval_steps: int
    eval_max_length: int | None = None  # None: the trained max_length
    selection: Literal["target_dev", "held_out_loss", "last"]
    triples: str | list[str] | None = None
    triples_digest: str | list[str] | None = None
    triples_format: Literal["triples", "nli"] | None = None
    # objective options (pretraining.objectives.OBJECTIVE_OPTIONS), present when the objective reads them;
    # the defaults of those the losses read optionally are the schema's
    temperature: float | None = None
    deletion_ratio: float | None = None
    deletion_unit: Literal["word", "token"] | None = None
    aux_weight: float | None = None
    aux_weight_on: Literal["contrastive", "main"] = "contrastive"  # which term of mlm+simcse / mlm+nm / tsdae+nm λ weights
    mlp_head: Literal["none", "train_only"] = "none"  # simcse: SimCSE's MLP head in training only (losses.TrainOnlyMLPHeadLoss)
    mask_probability: float | None = None
    masking: Literal["uniform", "bert"] | None = None
    decoder_layers: int | None = None
    ae_mask_probability: float | None = None
    consert_views: list[str] | None = None
    cutoff_rate: float = 0.2
    dropout_rate: float = 0.2
    ct_negatives: int = 7
    rcl_phis: list[float] = field(default_factory=list)
    phi: float | None = None  # objective rcl_entropy (the rcl_entropy stage's trainer): equation 2's weight
    regulators: list[str] = field(default_factory=list)
    # seed 001's SimCSE variants (pretraining.objectives.SIMCSE_VARIANTS says which option each reads)
    simcse_variant: str = "none"
    noise_sigma: float = 0.001
    noise_rate: float = 0.1
    noise_views: Literal["positive", "both"] = "positive"
    fgsm_epsilon: float = 0.001
    label_smoothing: float = 0.1
    sam_rho: float | None = None
    awp_gamma: float | None = None
    extra_negatives: int | None = None
    gmm_components: int = 4
    gmm_history: int = 8
    vae_history: int = 8
    vae_hidden: int = 500
    vae_latent: int = 20
    vae_lr: float = 1e-3
    vae_updates: int = 1
    vae_sampling: Literal["posterior", "prior"] = "posterior"
    cov_sampling: Literal["gaussian", "sigma_noise"] = "gaussian"  # cov_filtering: N(μ, Σ) or μ + Σ ε
