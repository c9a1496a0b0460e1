"""What each `pretrain.objective` trains on and with which loss.

| objective | dataset columns | loss |
| --- | --- | --- |
| `simcse` | anchor, positive (= the same text) | MultipleNegativesRankingLoss, scale 1/τ (two dropout views); `mlp_head: train_only` wraps it (and a variant) in TrainOnlyMLPHeadLoss |
| `simcse_sup` | anchor, positive, negative (NLI triples) | MultipleNegativesRankingLoss (N x 2N logits) |
| `ct` | sentence_A, sentence_B, label (1 positive : K negatives) | ContrastiveTensionLoss (two encoders, dot product, BCE) |
| `ct_in_batch` | sentence | ContrastiveTensionLossInBatchNegatives |
| `tsdae` | noised, original | DenoisingAutoEncoderLoss (tied decoder, memory = one vector) |
| `nm` | clean, noised | NoiseMatchingLoss |
| `mlm+simcse` | anchor, positive | MaskedLMLoss + λ·SimCSE |
| `mlm+nm` | clean, noised | MaskedLMLoss + λ·NoiseMatchingLoss |
| `tsdae+nm` | noised, original | DenoisingAutoEncoderLoss + λ·NoiseMatchingLoss |
| `consert` | anchor, positive (= the same text) | ConSERTLoss (augmented embedding matrices, symmetric NT-Xent) |
| `clm_ae`, `mlm_ae` | sentence | CLMAutoEncoderLoss / MLMAutoEncoderLoss (seed 000 autoencoders) |
| `simcse+clm_ae`, `simcse+mlm_ae` | anchor, positive | ContrastiveAutoEncoderLoss (SimCSE + w·autoencoder, shared f(x)) |
| `simcse` + `simcse_variant` | anchor, positive | seed 001 (Park) variants: `augsbert.pretraining.variants` |
| `rcl` | anchor, positive[, negative], label (= row id) | RegularizedContrastiveLoss (seed 002 Eq. 3) |
| `rcl_entropy` (stage `rcl_entropy`) | anchor, positive[, negative], label | EntropyContrastiveLoss (seed 002 Eq. 2) |

A column named `noised` holds the clean text in the dataset and is noised per
batch by the deletion collator (`augsbert.pretraining.noise`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .params import PretrainParams


@dataclass(frozen=True)
class Objective:
    """One `pretrain.objective`: its dataset columns, the source paper's pooling, whether its batches
    hold in-batch negatives, the objective-specific options it reads (the others leave its artifact
    key) and `build(model, params, head_source, scale)`, which makes its loss module."""

    columns: tuple[str, ...]
    pooling: str  # the source paper's pooling, used when `pretrain.pooling` is null
    in_batch_negatives: bool  # length-grouped batches would change its negatives (grouping off by default)
    options: tuple[str, ...]  # of OBJECTIVE_OPTIONS
    build: Callable[..., Any]
    choice: bool = True  # offered as `pretrain.objective` (rcl_entropy is the rcl_entropy stage's own)
    # its positive is a second dropout pass of the same text: in eval mode the two views are equal, so its
    # held-out loss is measured with the encoder in train mode under a fixed seed (training.pretrain.dropout_views)
    dropout_views: bool = False

    @property
    def noised(self) -> bool:
        return "noised" in self.columns


# -- loss builders: sentence-transformers' losses and ours (augsbert.pretraining.losses), imported when built
def _mnrl(model, params, head_source, scale):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    return MultipleNegativesRankingLoss(model, scale=scale)


def _simcse(model, params, head_source, scale):
    if params.simcse_variant != "none":  # seed 001 (Park) variants
        from .variants import variant_loss

        loss = variant_loss(model, params, scale)
    else:
        loss = _mnrl(model, params, head_source, scale)
    if params.mlp_head == "train_only":  # SimCSE's MLP over the pooled output, in training only
        from .losses import TrainOnlyMLPHeadLoss

        return TrainOnlyMLPHeadLoss(model, loss)
    return loss


def _ct(model, params, head_source, scale):
    from sentence_transformers.sentence_transformer.losses import ContrastiveTensionLoss

    return ContrastiveTensionLoss(model)


def _ct_in_batch(model, params, head_source, scale):
    from sentence_transformers.sentence_transformer.losses import ContrastiveTensionLossInBatchNegatives

    return ContrastiveTensionLossInBatchNegatives(model, scale=scale)


def _tsdae(model, params, head_source, scale):
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss

    return DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)


def _nm(model, params, head_source, scale):
    from .losses import NoiseMatchingLoss

    return NoiseMatchingLoss(model, scale=scale)


def _mlm(model, params, head_source):
    from .losses import MaskedLMLoss

    return MaskedLMLoss(model, head_source, params.mask_probability, params.masking, params.config_kwargs)


def _multi_task(main, aux, **kwargs):
    def build(model, params, head_source, scale):
        from .losses import MultiTaskLoss

        first = _mlm(model, params, head_source) if main == "mlm" else _tsdae(model, params, head_source, scale)
        return MultiTaskLoss(first, aux(model, params, head_source, scale), params.aux_weight,
                             weight_on=params.aux_weight_on, **kwargs)

    return build


def _autoencoder(model, params, head_source, kind: str):
    from .losses import CLMAutoEncoderLoss, MLMAutoEncoderLoss

    if kind == "clm_ae":
        return CLMAutoEncoderLoss(model, head_source, params.decoder_layers, params.config_kwargs)
    return MLMAutoEncoderLoss(model, head_source, params.decoder_layers, params.ae_mask_probability,
                              params.config_kwargs)


def _ae(kind: str, contrastive: bool = False):
    def build(model, params, head_source, scale):
        if not contrastive:
            return _autoencoder(model, params, head_source, kind)
        from .losses import ContrastiveAutoEncoderLoss

        return ContrastiveAutoEncoderLoss(model, _mnrl(model, params, head_source, scale),
                                          _autoencoder(model, params, head_source, kind), params.aux_weight)

    return build


def _consert(model, params, head_source, scale):
    from .losses import ConSERTLoss

    return ConSERTLoss(model, tuple(params.consert_views), params.cutoff_rate,
                       params.dropout_rate, scale)


def _rcl(model, params, head_source, scale):
    from .rcl import RegularizedContrastiveLoss, load_regulators

    paths = params.regulators  # the entropy artifacts, added by the stage (not a keyed option)
    if len(paths) != len(params.rcl_phis):
        raise ValueError(f"rcl: {len(params.rcl_phis)} φ value(s) but {len(paths)} entropy model(s)")
    return RegularizedContrastiveLoss(model, load_regulators(paths))


def _rcl_entropy(model, params, head_source, scale):
    from .rcl import EntropyContrastiveLoss

    return EntropyContrastiveLoss(model, params.phi)


RCL_KEYS = ("rcl_phis", "rcl_patience", "rcl_eval_steps", "rcl_entropy_max_steps")  # `rcl` options
_T, _DELETION, _MLM, _AUX = ("temperature",), ("deletion_ratio", "deletion_unit"), ("mask_probability", "masking"), \
    ("aux_weight",)
_LAMBDA = _AUX + ("aux_weight_on",)  # the thesis' multi-task rows: which term λ weights
_AE, _CONSERT = ("decoder_layers",), ("consert_views", "cutoff_rate", "dropout_rate")
_PAIR, _SENTENCE = ("anchor", "positive"), ("sentence",)
_RCL_ROWS = ("anchor", "positive", "negative", "label")  # seed 002: (anchor, positive[, negative]) + row id

OBJECTIVES = {
    "simcse": Objective(_PAIR, "cls", True, _T + ("mlp_head",), _simcse, dropout_views=True),
    "simcse_sup": Objective(("anchor", "positive", "negative"), "cls", True, _T, _mnrl),
    "ct": Objective(("sentence_A", "sentence_B", "label"), "mean", False, ("ct_negatives",), _ct),
    "ct_in_batch": Objective(_SENTENCE, "mean", True, _T, _ct_in_batch),
    "tsdae": Objective(("noised", "original"), "cls", False, _T + _DELETION, _tsdae),
    "nm": Objective(("clean", "noised"), "cls", True, _T + _DELETION, _nm),
    "mlm+simcse": Objective(_PAIR, "cls", True, _T + _MLM + _LAMBDA, _multi_task("mlm", _mnrl), dropout_views=True),
    "mlm+nm": Objective(("clean", "noised"), "cls", True, _T + _DELETION + _MLM + _LAMBDA, _multi_task("mlm", _nm)),
    "tsdae+nm": Objective(("noised", "original"), "cls", True, _T + _DELETION + _LAMBDA,
                          _multi_task("tsdae", _nm, aux_columns=(1, 0))),
    "consert": Objective(_PAIR, "mean", True, _T + _CONSERT, _consert),
    "clm_ae": Objective(_SENTENCE, "mean", False, _T + _AE, _ae("clm_ae")),
    "mlm_ae": Objective(_SENTENCE, "mean", False, _T + _AE + ("ae_mask_probability",), _ae("mlm_ae")),
    "simcse+clm_ae": Objective(_PAIR, "mean", True, _T + _AE + _AUX, _ae("clm_ae", contrastive=True),
                               dropout_views=True),
    "simcse+mlm_ae": Objective(_PAIR, "mean", True, _T + _AE + _AUX + ("ae_mask_probability",),
                               _ae("mlm_ae", contrastive=True), dropout_views=True),
    "rcl": Objective(_RCL_ROWS, "mean", True, RCL_KEYS, _rcl),
    "rcl_entropy": Objective(_RCL_ROWS, "mean", True, RCL_KEYS, _rcl_entropy, choice=False),  # stage rcl_entropy
}
# the objective-specific options: an objective's artifact key holds those of its `options` only
OBJECTIVE_OPTIONS = tuple(sorted({key for objective in OBJECTIVES.values() for key in objective.options}))
# seed 001 (Park) variants of `simcse` (augsbert.pretraining.variants) and the options each reads; resolved()
# drops the others, so an option a variant ignores does not change the artifact key
_NOISE, _RATE = ("noise_sigma", "noise_views"), ("noise_rate", "noise_views")
SIMCSE_VARIANTS = {
    "none": (), "gni": _NOISE, "gaussian_dropout": _NOISE, "bernoulli": _RATE, "feature_bernoulli": _RATE,
    "fgsm": ("fgsm_epsilon",), "output_gaussian": (), "output_bernoulli": ("noise_rate",),
    "output_mask_trivial": ("noise_rate",), "output_mask_significant": ("noise_rate",),
    "output_fgsm": ("fgsm_epsilon",), "label_smoothing": ("label_smoothing",), "sam": ("sam_rho",),
    "awp": ("awp_gamma",), "awp+gni": ("awp_gamma", *_NOISE), "awp+fgsm": ("awp_gamma", "fgsm_epsilon"),
    "memory_bank": (), "gaussian_negatives": ("extra_negatives",), "cov_filtering": ("extra_negatives", "cov_sampling"),
    "anchor_noise_negatives": (), "gmm": ("extra_negatives", "gmm_components", "gmm_history"),
    "vae": ("extra_negatives", "vae_history", "vae_hidden", "vae_latent", "vae_lr", "vae_updates", "vae_sampling"),
}
SIMCSE_VARIANT_KEYS = ("simcse_variant", *sorted({k for keys in SIMCSE_VARIANTS.values() for k in keys}))

# Presets fill the schedule keys left null (thesis 5.4.2 vs TSDAE's own App. B / thesis 5.4.1; CT as TSDAE App. B
# trained it: RMSProp, 1e-5 for steps 1-500, 8e-6, 6e-6, 4e-6 for each next 500, then 2e-6; batch 8, 100K steps).
PRESETS = {
    "thesis": {"batch_size": 64, "lr": 3e-5, "max_steps": 12500, "warmup_ratio": 0.1, "weight_decay": 0.01,
               "scheduler": "linear", "optimizer": "adamw"},
    "tsdae": {"batch_size": 8, "lr": 3e-5, "max_steps": 100000, "warmup_ratio": 0.0, "weight_decay": 0.0,
              "scheduler": "constant", "optimizer": "adamw"},
    "ct": {"batch_size": 8, "lr": 1e-5, "max_steps": 100000, "warmup_ratio": 0.0, "weight_decay": 0.0,
           "scheduler": "ct_stepped", "optimizer": "rmsprop"},
}
SCHEDULE_KEYS = tuple(PRESETS["thesis"])
# `ct_stepped`: the factor of the base lr after `step` optimizer steps (TSDAE App. B: 1e-5 for steps 1 to 500,
# 8e-6 for 501 to 1000, 6e-6 for 1001 to 1500, 4e-6 for 1501 to 2000, 2e-6 for the others)
CT_STEPS = ((500, 1.0), (1000, 0.8), (1500, 0.6), (2000, 0.4))


def ct_stepped(step: int) -> float:
    """LambdaLR factor for the (step + 1)-th optimizer step of the `ct_stepped` schedule."""
    return next((factor for end, factor in CT_STEPS if step < end), 0.2)


def resolved(options: dict) -> dict:
    """`pretrain` options with the preset's schedule, the objective's pooling and grouping filled in."""
    options = dict(options)
    objective = OBJECTIVES[options["objective"]]
    for key in SCHEDULE_KEYS:
        if options.get(key) is None:
            options[key] = PRESETS[options["preset"]][key]
    if options.get("pooling") is None:
        options["pooling"] = objective.pooling
    if options.get("group_by_length") is None:
        options["group_by_length"] = not objective.in_batch_negatives
    if not options["group_by_length"]:
        options.pop("megabatch", None)
    for key in OBJECTIVE_OPTIONS:
        if key not in objective.options:
            options.pop(key, None)
    if options.get("warmup_steps", 0) is None:  # unset: warmup_ratio; keys planned before the option stay
        options.pop("warmup_steps")
    if options.get("optimizer") == "adamw":  # the default: keys planned before the option stay
        options.pop("optimizer")
    if options.get("aux_weight_on") == "contrastive":  # the default reading: keys planned before the option stay
        options.pop("aux_weight_on")
    if options.get("mlp_head") == "none":  # the default (no head): keys planned before the option stay
        options.pop("mlp_head")
    if options.get("cov_sampling") == "gaussian":  # the default reading: keys planned before the option stay
        options.pop("cov_sampling")
    if not options.get("torch_compile", True):  # off, the default: keys planned before the option stay
        options.pop("torch_compile")
    if options["objective"] == "consert":  # the rate of a view it does not use
        views = options.get("consert_views") or []
        if not any(v in ("token_cutoff", "feature_cutoff") for v in views):
            options.pop("cutoff_rate", None)
        if "embedding_dropout" not in views:
            options.pop("dropout_rate", None)
    variant = options.get("simcse_variant", "none") if options["objective"] == "simcse" else "none"
    used = ("simcse_variant", *SIMCSE_VARIANTS[variant]) if variant != "none" else ()
    for key in SIMCSE_VARIANT_KEYS:
        if key not in used:
            options.pop(key, None)
    if "extra_negatives" in options and options["extra_negatives"] is None:
        options["extra_negatives"] = options["batch_size"]  # K = the batch size unless set
    return options


def training_rows(objective: str, sentences: list[str], seed: int, ct_negatives: int = 7,
                  triples: list[tuple[str, str, str]] | None = None) -> dict[str, list]:
    """The dataset columns of `objective` for `sentences` (or NLI `triples` for `simcse_sup`)."""
    columns = OBJECTIVES[objective].columns
    if objective in ("rcl", "rcl_entropy"):
        from .rcl import rcl_columns

        # rows (id, anchor, positive[, negative]) from the rcl stages; else each sentence twice (dropout views)
        return rcl_columns(triples if triples else [(i, s, s) for i, s in enumerate(sentences)])
    if objective == "simcse_sup":
        if not triples:
            raise ValueError("simcse_sup needs NLI triples (pretrain.triples)")
        return {c: [t[i] for t in triples] for i, c in enumerate(columns)}
    if objective == "ct":
        # each sentence once as a positive (a, a) and with `ct_negatives` random other sentences (a, b)
        import numpy as np  # here: the schema reads OBJECTIVES when it is loaded, before any job

        rng = np.random.default_rng(seed)
        n = len(sentences)
        if n < 2:
            raise ValueError("Contrastive Tension needs at least two sentences")
        a, b, label = [], [], []
        for i, text in enumerate(sentences):
            a.append(text)
            b.append(text)
            label.append(1.0)
            others = rng.integers(0, n - 1, ct_negatives)
            for j in others + (others >= i):  # uniform over the other sentences
                a.append(text)
                b.append(sentences[j])
                label.append(0.0)
        return {"sentence_A": a, "sentence_B": b, "label": label}
    return {c: list(sentences) for c in columns}


def build_loss(objective: str, model, params: PretrainParams, head_source: str):
    """The loss module of `objective` for the SentenceTransformer `model`.

    `head_source` is the checkpoint TSDAE's decoder and the MLM head are built from.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown pretrain.objective {objective!r} (one of {', '.join(OBJECTIVES)})")
    scale = 1.0 / params.temperature if params.temperature is not None else None
    return OBJECTIVES[objective].build(model, params, head_source, scale)
