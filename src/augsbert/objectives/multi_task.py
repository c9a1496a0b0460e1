"""The thesis' multi-task objectives: a main loss (MLM or TSDAE) + λ x a contrastive one (SimCSE or NM)."""

from __future__ import annotations

from dataclasses import dataclass

from .base import DeletionOptions, MaskingOptions, MultiTaskOptions, Objective, TemperatureOptions, load
from .nm import ENTRIES as NM
from .simcse import MNRL
from .tsdae import ENTRIES as TSDAE

LOSSES = "augsbert.losses"


@dataclass(frozen=True, kw_only=True)
class MLMSimCSEOptions(TemperatureOptions, MaskingOptions, MultiTaskOptions):
    pass


@dataclass(frozen=True, kw_only=True)
class MLMNoiseMatchingOptions(TemperatureOptions, DeletionOptions, MaskingOptions, MultiTaskOptions):
    pass


@dataclass(frozen=True, kw_only=True)
class TSDAENoiseMatchingOptions(TemperatureOptions, DeletionOptions, MultiTaskOptions):
    pass


@dataclass(frozen=True)
class MaskedLM(Objective):
    """The MLM term: the base checkpoint's MLM head over the encoder's tokens."""

    def build(self, model, params, head_source: str):
        return load(self.loss)(model, head_source, params.mask_probability, params.masking, params.config_kwargs)


# the terms, built as parts (not offered as `pretrain.objective`, not in the registry)
MLM = MaskedLM("mlm", ("anchor",), "cls", True, MaskingOptions, f"{LOSSES}.masked_lm:MaskedLMLoss", choice=False)
SIMCSE_TERM = Objective("simcse", ("anchor", "positive"), "cls", True, TemperatureOptions, MNRL, choice=False)


@dataclass(frozen=True)
class MultiTask(Objective):
    """MultiTaskLoss(main, aux): main + λ x aux (or λ x main + aux: `aux_weight_on`)."""

    main: Objective | None = None
    aux: Objective | None = None
    aux_columns: tuple[int, ...] | None = None  # the aux loss's columns of the main loss's (tsdae+nm: swapped)

    def build(self, model, params, head_source: str):
        extra = {"aux_columns": self.aux_columns} if self.aux_columns else {}
        return load(self.loss)(self.main.build(model, params, head_source), self.aux.build(model, params, head_source),
                               params.aux_weight, weight_on=params.aux_weight_on, **extra)


ENTRIES = (
    MultiTask("mlm+simcse", ("anchor", "positive"), "cls", True, MLMSimCSEOptions, f"{LOSSES}.multi_task:MultiTaskLoss",
              dropout_views=True, main=MLM, aux=SIMCSE_TERM),
    MultiTask("mlm+nm", ("clean", "noised"), "cls", True, MLMNoiseMatchingOptions, f"{LOSSES}.multi_task:MultiTaskLoss",
              main=MLM, aux=NM[0]),
    MultiTask("tsdae+nm", ("noised", "original"), "cls", True, TSDAENoiseMatchingOptions, f"{LOSSES}.multi_task:MultiTaskLoss",
              main=TSDAE[0], aux=NM[0], aux_columns=(1, 0)),
)
