"""Light declarations of the pre-training objectives: the `pretrain.objective` registry (no torch imported).

One module per objective (or family) in this folder declares its entries (`ENTRIES`: `base.Objective`, what an
entry is, with the option groups several objectives share) and their options classes; each names its loss as a
"module:Class" string of `augsbert.losses`, imported only by the process that builds it.

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
| `simcse` + `simcse_variant` | anchor, positive | seed 001 (Park) variants: `augsbert.losses.simcse_variant` |
| `rcl` | anchor, positive[, negative], label (= row id) | RegularizedContrastiveLoss (seed 002 Eq. 3) |
| `rcl_entropy` (stage `rcl_entropy`) | anchor, positive[, negative], label | EntropyContrastiveLoss (seed 002 Eq. 2) |

A column named `noised` holds the clean text in the dataset and is noised per batch by the deletion collator
(`augsbert.training.noise`). The modules are found by listing this folder, so an objective is added by
adding its module (and its loss class); nothing here names one.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Objective, options_schema, unknown_objective
from .simcse import SIMCSE_VARIANT_KEYS, SIMCSE_VARIANTS  # noqa: F401  (re-exported: the variants' options)

OBJECTIVES: dict[str, Objective] = {}
# the objective-specific options: an objective's artifact key holds those of its options class only
OBJECTIVE_OPTIONS: tuple[str, ...] = ()


def discover() -> dict[str, Objective]:
    """(Re)build OBJECTIVES from the modules of this package (its `__path__`), in module-name order."""
    global OBJECTIVE_OPTIONS
    found: dict[str, Objective] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        for entry in getattr(importlib.import_module(f"{__name__}.{module}"), "ENTRIES", ()):
            if entry.name in found:
                raise ValueError(f"pretrain.objective {entry.name!r} declared twice ({module})")
            found[entry.name] = entry
    OBJECTIVES.clear()
    OBJECTIVES.update(found)
    OBJECTIVE_OPTIONS = tuple(sorted({key for o in OBJECTIVES.values() if o.choice for key in o.option_names}))
    return OBJECTIVES


discover()


def pretrain_schema(properties: dict) -> None:
    """Fill the schema's `pretrain` properties (in place): the `objective` choices and every objective option,
    from the entries' options classes (an option several objectives read is declared once, in a shared class)."""
    choices = ["none", *(name for name, o in OBJECTIVES.items() if o.choice)]
    properties["objective"] = {"type": "string", "enum": choices, **properties["objective"]}
    for entry in OBJECTIVES.values():
        if not entry.choice:
            continue
        for key, prop in options_schema(entry.options).items():
            if properties.setdefault(key, prop) != prop:
                raise ValueError(f"pretrain.{key}: declared differently by objective {entry.name} and another")


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


def entry(name: str) -> Objective:
    if name not in OBJECTIVES:
        raise unknown_objective(name, OBJECTIVES)
    return OBJECTIVES[name]


def resolved(options: dict) -> dict:
    """`pretrain` options with the preset's schedule, the objective's pooling and grouping filled in, and only the
    options its entry reads (and those of them not left at a default that stays out of the key)."""
    options = dict(options)
    objective = entry(options["objective"])
    for key in SCHEDULE_KEYS:
        if options.get(key) is None:
            options[key] = PRESETS[options["preset"]][key]
    if options.get("pooling") is None:
        options["pooling"] = objective.pooling
    if options.get("group_by_length") is None:
        options["group_by_length"] = not objective.in_batch_negatives
    if not options["group_by_length"]:
        options.pop("megabatch", None)
    own = objective.option_names
    for key in OBJECTIVE_OPTIONS:
        if key not in own:
            options.pop(key, None)
    # unset: warmup_ratio; keys planned before the option stay
    if "warmup_steps" in options and options["warmup_steps"] is None:
        options.pop("warmup_steps")
    if options.get("optimizer") == "adamw":  # the default: keys planned before the option stay
        options.pop("optimizer")
    # off, the default: keys planned before the option stay
    if "torch_compile" in options and not options["torch_compile"]:
        options.pop("torch_compile")
    for f in objective.options.__dataclass_fields__.values():  # options keyed only when set to another value
        if not f.metadata.get("keyed_default", True) and f.name in options and options[f.name] == f.default:
            options.pop(f.name)
    return objective.resolve(options)


def training_rows(objective: str, sentences: list[str], seed: int, triples: list[tuple] | None = None,
                  **options) -> dict[str, list]:
    """The dataset columns of `objective` for `sentences` (or NLI `triples`), with its options (defaults
    where not given)."""
    found = entry(objective)
    return found.rows(sentences, seed, triples, found.options(**options))


def build_loss(objective: str, model, params, head_source: str):
    """The loss module of `objective` for the SentenceTransformer `model`.

    `head_source` is the checkpoint TSDAE's decoder and the MLM head are built from.
    """
    return entry(objective).build(model, params, head_source)
