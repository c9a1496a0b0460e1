"""`tsdae`: TSDAE (seed 003): delete part of the words, decode the sentence from one pooled vector."""

from __future__ import annotations

from dataclasses import dataclass

from .base import DeletionOptions, Objective, TemperatureOptions, load


@dataclass(frozen=True, kw_only=True)
class NoisedOptions(TemperatureOptions, DeletionOptions):
    pass


@dataclass(frozen=True)
class TSDAE(Objective):
    """The library's DenoisingAutoEncoderLoss with the decoder tied to the encoder (memory = one vector)."""

    def build(self, model, params, head_source: str):
        return load(self.loss)(model, tie_encoder_decoder=True)


ENTRIES = (TSDAE("tsdae", ("noised", "original"), "cls", False, NoisedOptions,
                 "sentence_transformers.sentence_transformer.losses:DenoisingAutoEncoderLoss"),)
