"""Seed 000's autoencoders `clm_ae` / `mlm_ae` and their SimCSE combinations `simcse+clm_ae` / `simcse+mlm_ae`."""

from __future__ import annotations

from dataclasses import dataclass

from .base import AEMaskOptions, AuxWeightOptions, DecoderOptions, Objective, TemperatureOptions, load
from .simcse import MNRL

LOSSES = "augsbert.losses"


@dataclass(frozen=True, kw_only=True)
class CLMOptions(TemperatureOptions, DecoderOptions):
    pass


@dataclass(frozen=True, kw_only=True)
class MLMOptions(CLMOptions, AEMaskOptions):
    pass


@dataclass(frozen=True, kw_only=True)
class SimCSECLMOptions(CLMOptions, AuxWeightOptions):
    pass


@dataclass(frozen=True, kw_only=True)
class SimCSEMLMOptions(MLMOptions, AuxWeightOptions):
    pass


@dataclass(frozen=True)
class AutoEncoder(Objective):
    """A `decoder_layers`-layer decoder reconstructs x from f(x): its loss takes the options `decoder_args`."""

    decoder_args: tuple[str, ...] = ("decoder_layers",)

    def build(self, model, params, head_source: str):
        return load(self.loss)(model, head_source, *(getattr(params, a) for a in self.decoder_args),
                               params.config_kwargs)


@dataclass(frozen=True)
class ContrastiveAutoEncoder(Objective):
    """SimCSE + w x autoencoder on the shared f(x) (seed 000 equation 3.6)."""

    autoencoder: AutoEncoder | None = None

    def build(self, model, params, head_source: str):
        return load(self.loss)(model, load(MNRL)(model, scale=self.scale(params)),
                               self.autoencoder.build(model, params, head_source), params.aux_weight)


def with_simcse(autoencoder: AutoEncoder, options: type) -> ContrastiveAutoEncoder:
    """`simcse+<autoencoder>`: SimCSE's dropout views (anchor, positive) and the autoencoder on the anchor."""
    return ContrastiveAutoEncoder(f"simcse+{autoencoder.name}", ("anchor", "positive"), "mean", True, options,
                                  f"{LOSSES}.contrastive_autoencoder:ContrastiveAutoEncoderLoss", dropout_views=True,
                                  autoencoder=autoencoder)


CLM = AutoEncoder("clm_ae", ("sentence",), "mean", False, CLMOptions, f"{LOSSES}.clm_autoencoder:CLMAutoEncoderLoss")
MLM = AutoEncoder("mlm_ae", ("sentence",), "mean", False, MLMOptions, f"{LOSSES}.mlm_autoencoder:MLMAutoEncoderLoss",
                  decoder_args=("decoder_layers", "ae_mask_probability"))
ENTRIES = (CLM, MLM, with_simcse(CLM, SimCSECLMOptions), with_simcse(MLM, SimCSEMLMOptions))
