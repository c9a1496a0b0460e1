"""What a `pretrain.objective` entry is (augsbert.objectives holds one module per objective).

An entry says what the objective trains on (dataset columns), the source paper's pooling, whether its batches
hold in-batch negatives, its options class and how it builds its loss. Its options class is a frozen dataclass
(augsbert.params.Params) whose fields are made with `option()`: default, description and JSON-schema bounds in
one place; `make schema` writes them into the schema's `pretrain` section (augsbert.stages.pretrain.PretrainOptions),
the job reads them into the class, and the planner keys an objective by its own options only.

Nothing here imports torch or sentence-transformers: the loss class is named as "module:Class" and imported
(importlib) when it is built, so loading the config, `augsbert --help` and planning stay light.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError
from ..params import Params, option, options_schema  # noqa: F401 (the objectives' import place)


def load(reference: str) -> Any:
    """The object named by "module:attribute" (a loss class: imported only by a process that builds it)."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Objective:
    """One `pretrain.objective`: its dataset columns, the source paper's pooling, whether its batches hold
    in-batch negatives, its options class (only those options enter its artifact key) and its loss
    ("module:Class", built by `build`). An objective with more to do overrides the hooks below."""

    name: str
    columns: tuple[str, ...]
    pooling: str  # the source paper's pooling, used when `pretrain.pooling` is null
    in_batch_negatives: bool  # length-grouped batches would change its negatives (grouping off by default)
    options: type[Params]
    loss: str = ""  # "module:Class" of its loss, constructed as loss(model[, scale=1/τ])
    choice: bool = True  # offered as `pretrain.objective` (rcl_entropy is the rcl_entropy stage's own)
    # its positive is a second dropout pass of the same text: in eval mode the two views are equal, so its
    # held-out loss is measured with the encoder in train mode under a fixed seed (training.pretrain.dropout_views)
    dropout_views: bool = False
    # "module:function(spec, params, evaluated) -> (params, train, held, removed, triples, held_triples)": the
    # job's corpus (augsbert.training.pretrain_rows); the default is the corpus' sentences
    corpus: str = "augsbert.training.pretrain_rows:sentence_corpus"

    @property
    def noised(self) -> bool:
        return "noised" in self.columns

    @property
    def option_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.options))

    @staticmethod
    def scale(params) -> float | None:
        """1/τ of a contrastive loss (None without a temperature)."""
        temperature = getattr(params, "temperature", None)
        return 1.0 / temperature if temperature is not None else None

    def build(self, model, params, head_source: str):
        """The loss module for the SentenceTransformer `model`; `head_source` is the checkpoint a decoder or an
        MLM head is built from. Default: the loss class with `scale` when the objective has a temperature."""
        if "temperature" in self.option_names:
            return load(self.loss)(model, scale=self.scale(params))
        return load(self.loss)(model)

    def rows(self, sentences: list[str], seed: int, triples, options) -> dict[str, list]:
        """The dataset columns for `sentences` (default: each column the sentence itself)."""
        return {c: list(sentences) for c in self.columns}

    def resolve(self, options: dict) -> dict:
        """The planner's `pretrain` options after the objective drops what it does not read (in place)."""
        return options

    def check(self, where: str, pretrain: dict) -> None:
        """Refuse an experiment's `pretrain` section that this objective cannot train (or that sets this
        objective's options for another one); `where` is `experiments.<name>`."""


# Options that several objectives share (an objective's options class derives from those it reads).

@dataclass(frozen=True, kw_only=True)
class TemperatureOptions(Params):
    temperature: float = option(0.05, "τ of the contrastive objectives (scale 1/τ = 20; SimCSE's 0.05). Not used "
                                "by `ct` (dot product).", exclusiveMinimum=0)


@dataclass(frozen=True, kw_only=True)
class DeletionOptions(Params):
    deletion_ratio: float = option(0.6, "Share of words (tokens) deleted by T(x) for tsdae / nm (TSDAE 0.6); at "
                                   "least one is kept.", minimum=0, exclusiveMaximum=1)
    deletion_unit: Literal["word", "token"] = option("word", """
        What T(x) deletes: whitespace-separated words (TSDAE deletes words; the NM text does not say, so it
        follows TSDAE) or the model's tokens (special tokens always stay).""")


@dataclass(frozen=True, kw_only=True)
class AuxWeightOptions(Params):
    aux_weight: float = option(0.1, """
        λ of the multi-task objectives: main (MLM / TSDAE) + λ x contrastive (SimCSE / NM); for seed 000's
        `simcse+clm_ae` / `simcse+mlm_ae` the w of SimCSE + w x autoencoder (set it: seed 000's best is 0.001).
        The thesis leaves it unstated; 0.1 is the only weight it cites (SimCSE's auxiliary MLM weight) and keeps
        the contrastive term the "low-loss auxiliary" the thesis describes; `aux_weight_on: main` puts it on the
        main term instead (SimCSE's reading).""", minimum=0)


@dataclass(frozen=True, kw_only=True)
class MultiTaskOptions(AuxWeightOptions):
    aux_weight_on: Literal["contrastive", "main"] = option("contrastive", """
        `mlm+simcse`, `mlm+nm`, `tsdae+nm`: which term aux_weight (λ) weights. `contrastive`: main + λ x
        contrastive (the thesis' "low-loss auxiliary"); `main`: λ x main + contrastive, SimCSE's own reading
        (its λ = 0.1 weights the auxiliary MLM term). The thesis states neither; the `unsupervised` grid plans
        both.""", keyed_default=False)


@dataclass(frozen=True, kw_only=True)
class MaskingOptions(Params):
    mask_probability: float = option(0.2, "MLM term of mlm+*, share of tokens masked. No source states it for "
                                     "these objectives; 0.2 is our choice, the default of our MLM adaptation "
                                     "(adapt.mask_probability).", exclusiveMinimum=0, exclusiveMaximum=1)
    masking: Literal["uniform", "bert"] = option("uniform", "MLM term: `uniform` every chosen token becomes the "
                                                 "mask token (our choice; no source states a scheme for it); "
                                                 "`bert` 80/10/10 (BERT's).")


@dataclass(frozen=True, kw_only=True)
class DecoderOptions(Params):
    decoder_layers: int = option(2, "`clm_ae`, `mlm_ae` and their SimCSE combinations: Transformer layers of the "
                                 "decoder (seed 000: always 2), initialised from the base checkpoint's first "
                                 "layers.", minimum=1)


@dataclass(frozen=True, kw_only=True)
class AEMaskOptions(Params):
    ae_mask_probability: float = option(0.8, "`mlm_ae`: share of the copy's tokens masked (seed 000: 80 %).",
                                        exclusiveMinimum=0, exclusiveMaximum=1)


def unknown_objective(name: Any, known) -> ConfigError:
    return ConfigError(f"unknown pretrain.objective {name!r} (one of {', '.join(known)})")

