"""What each `pretrain.objective` trains on and with which loss.

| objective | dataset columns | loss |
| --- | --- | --- |
| `simcse` | anchor, positive (= the same text) | MultipleNegativesRankingLoss, scale 1/τ (two dropout views) |
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

import numpy as np


@dataclass(frozen=True)
class Objective:
    columns: tuple[str, ...]
    pooling: str  # the source paper's pooling, used when `pretrain.pooling` is null
    in_batch_negatives: bool  # length-grouped batches would change its negatives (grouping off by default)

    @property
    def noised(self) -> bool:
        return "noised" in self.columns


OBJECTIVES = {
    "simcse": Objective(("anchor", "positive"), "cls", True),
    "simcse_sup": Objective(("anchor", "positive", "negative"), "cls", True),
    "ct": Objective(("sentence_A", "sentence_B", "label"), "mean", False),
    "ct_in_batch": Objective(("sentence",), "mean", True),
    "tsdae": Objective(("noised", "original"), "cls", False),
    "nm": Objective(("clean", "noised"), "cls", True),
    "mlm+simcse": Objective(("anchor", "positive"), "cls", True),
    "mlm+nm": Objective(("clean", "noised"), "cls", True),
    "tsdae+nm": Objective(("noised", "original"), "cls", True),
    "consert": Objective(("anchor", "positive"), "mean", True),
    "clm_ae": Objective(("sentence",), "mean", False),
    "mlm_ae": Objective(("sentence",), "mean", False),
    "simcse+clm_ae": Objective(("anchor", "positive"), "mean", True),
    "simcse+mlm_ae": Objective(("anchor", "positive"), "mean", True),
    # seed 002 RCL: rows (anchor, positive[, negative]) + `label` = row id (augsbert.pretraining.rcl)
    "rcl": Objective(("anchor", "positive", "negative", "label"), "mean", True),
    "rcl_entropy": Objective(("anchor", "positive", "negative", "label"), "mean", True),  # stage rcl_entropy only
}
RCL_KEYS = ("rcl_phis", "rcl_patience", "rcl_eval_steps", "rcl_entropy_max_steps")  # `rcl` options
MLM_TERM = ("mlm+simcse", "mlm+nm")  # objectives with the thesis' MLM term (mask_probability, masking)
# seed 001 (Park) variants of `simcse` (augsbert.pretraining.variants) and the options each reads; resolved()
# drops the others, so an option a variant ignores does not change the artifact key
_NOISE, _RATE = ("noise_sigma", "noise_views"), ("noise_rate", "noise_views")
SIMCSE_VARIANTS = {
    "none": (), "gni": _NOISE, "gaussian_dropout": _NOISE, "bernoulli": _RATE, "feature_bernoulli": _RATE,
    "fgsm": ("fgsm_epsilon",), "output_gaussian": (), "output_bernoulli": ("noise_rate",),
    "output_mask_trivial": ("noise_rate",), "output_mask_significant": ("noise_rate",),
    "output_fgsm": ("fgsm_epsilon",), "label_smoothing": ("label_smoothing",), "sam": ("sam_rho",),
    "awp": ("awp_gamma",), "awp+gni": ("awp_gamma", *_NOISE), "awp+fgsm": ("awp_gamma", "fgsm_epsilon"),
    "memory_bank": (), "gaussian_negatives": ("extra_negatives",), "cov_filtering": ("extra_negatives",),
    "anchor_noise_negatives": (), "gmm": ("extra_negatives", "gmm_components", "gmm_history"),
}
SIMCSE_VARIANT_KEYS = ("simcse_variant", *sorted({k for keys in SIMCSE_VARIANTS.values() for k in keys}))

# Presets fill the schedule keys left null (thesis 5.4.2 vs TSDAE's own App. B / thesis 5.4.1).
PRESETS = {
    "thesis": {"batch_size": 64, "lr": 3e-5, "max_steps": 12500, "warmup_ratio": 0.1, "weight_decay": 0.01,
               "scheduler": "linear"},
    "tsdae": {"batch_size": 8, "lr": 3e-5, "max_steps": 100000, "warmup_ratio": 0.0, "weight_decay": 0.0,
              "scheduler": "constant"},
}
SCHEDULE_KEYS = tuple(PRESETS["thesis"])


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
    if not objective.noised:
        options.pop("deletion_ratio", None)
        options.pop("deletion_unit", None)
    if options["objective"] not in MLM_TERM:
        options.pop("mask_probability", None)
        options.pop("masking", None)
    if not options["objective"].endswith("_ae"):
        options.pop("decoder_layers", None)
    if not options["objective"].endswith("mlm_ae"):
        options.pop("ae_mask_probability", None)
    if "+" not in options["objective"]:
        options.pop("aux_weight", None)
    if options["objective"] != "ct":
        options.pop("ct_negatives", None)
    if options["objective"] == "ct":
        options.pop("temperature", None)  # CT (pairs) scores by dot product, no temperature
    if options["objective"] in ("rcl", "rcl_entropy"):
        options.pop("temperature", None)  # RCL's equations 1-3 use the plain cosine
    else:
        for key in RCL_KEYS:
            options.pop(key, None)
    if options["objective"] == "consert":
        views = options.get("consert_views") or []
        if not any(v in ("token_cutoff", "feature_cutoff") for v in views):
            options.pop("cutoff_rate", None)
        if "embedding_dropout" not in views:
            options.pop("dropout_rate", None)
    else:
        for key in ("consert_views", "cutoff_rate", "dropout_rate"):
            options.pop(key, None)
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


def build_loss(objective: str, model, params: dict, head_source: str):
    """The loss module of `objective` for the SentenceTransformer `model`.

    `head_source` is the checkpoint TSDAE's decoder and the MLM head are built from.
    """
    from sentence_transformers.sentence_transformer.losses import (
        ContrastiveTensionLoss,
        ContrastiveTensionLossInBatchNegatives,
        DenoisingAutoEncoderLoss,
        MultipleNegativesRankingLoss,
    )

    from .losses import (
        CLMAutoEncoderLoss,
        ConSERTLoss,
        ContrastiveAutoEncoderLoss,
        MaskedLMLoss,
        MLMAutoEncoderLoss,
        MultiTaskLoss,
        NoiseMatchingLoss,
    )

    scale = 1.0 / params["temperature"] if "temperature" in params else None

    def mlm():
        return MaskedLMLoss(model, head_source, params["mask_probability"], params["masking"],
                            params.get("config_kwargs"))

    def tsdae():
        return DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)

    if objective == "rcl_entropy":
        from .rcl import EntropyContrastiveLoss

        return EntropyContrastiveLoss(model, params["phi"])
    if objective == "rcl":
        from .rcl import RegularizedContrastiveLoss, load_regulators

        paths = params.get("regulators", [])  # the entropy artifacts, added by the stage (not a keyed option)
        if len(paths) != len(params.get("rcl_phis", [])):
            raise ValueError(f"rcl: {len(params.get('rcl_phis', []))} φ value(s) but {len(paths)} entropy model(s)")
        return RegularizedContrastiveLoss(model, load_regulators(paths))
    if objective == "simcse" and params.get("simcse_variant", "none") != "none":
        from .variants import variant_loss

        return variant_loss(model, params, scale)
    if objective in ("simcse", "simcse_sup"):
        return MultipleNegativesRankingLoss(model, scale=scale)
    if objective == "ct":
        return ContrastiveTensionLoss(model)
    if objective == "ct_in_batch":
        return ContrastiveTensionLossInBatchNegatives(model, scale=scale)
    if objective == "tsdae":
        return tsdae()
    if objective == "nm":
        return NoiseMatchingLoss(model, scale=scale)
    if objective == "mlm+simcse":
        return MultiTaskLoss(mlm(), MultipleNegativesRankingLoss(model, scale=scale), params["aux_weight"])
    if objective == "mlm+nm":
        return MultiTaskLoss(mlm(), NoiseMatchingLoss(model, scale=scale), params["aux_weight"])
    def autoencoder(kind: str):
        if kind == "clm_ae":
            return CLMAutoEncoderLoss(model, head_source, params["decoder_layers"], params.get("config_kwargs"))
        return MLMAutoEncoderLoss(model, head_source, params["decoder_layers"], params["ae_mask_probability"],
                                  params.get("config_kwargs"))

    if objective in ("clm_ae", "mlm_ae"):
        return autoencoder(objective)
    if objective in ("simcse+clm_ae", "simcse+mlm_ae"):
        return ContrastiveAutoEncoderLoss(model, MultipleNegativesRankingLoss(model, scale=scale),
                                          autoencoder(objective.split("+")[1]), params["aux_weight"])
    if objective == "consert":
        return ConSERTLoss(model, tuple(params["consert_views"]), params.get("cutoff_rate", 0.2),
                           params.get("dropout_rate", 0.2), scale)
    if objective == "tsdae+nm":
        return MultiTaskLoss(tsdae(), NoiseMatchingLoss(model, scale=scale), params["aux_weight"], aux_columns=(1, 0))
    raise ValueError(f"unknown pretrain.objective {objective!r} (one of {', '.join(OBJECTIVES)})")
