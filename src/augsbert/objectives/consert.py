"""`consert` (seed 000): ConSERT, augmented embedding matrices of two views, symmetric NT-Xent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .base import Objective, TemperatureOptions, load, option


@dataclass(frozen=True, kw_only=True)
class ConSERTOptions(TemperatureOptions):
    consert_views: list[Literal['none', 'shuffle', 'token_cutoff', 'feature_cutoff', 'embedding_dropout']] = option(['feature_cutoff', 'shuffle'], """
        `consert`: the augmentation of view 1 and of view 2 (seed 000 does not say which view gets which;
        ConSERT's own scripts give each view one). ConSERT-1 = [feature_cutoff, shuffle] (default),
        ConSERT-2 = [embedding_dropout, shuffle]. `shuffle` permutes the position ids of the content tokens
        ([CLS] and the final [SEP] stay).""", minItems=2, maxItems=2)
    cutoff_rate: float = option(0.2, """
        `consert`: share of rows (token cutoff) or columns (feature cutoff) zeroed per sentence (seed 000:
        0.2).""", exclusiveMinimum=0, exclusiveMaximum=1)
    dropout_rate: float = option(0.2, """
        `consert`: probability that embedding dropout zeroes an element (seed 000: 0.2; the others are not
        rescaled).""", exclusiveMinimum=0, exclusiveMaximum=1)


@dataclass(frozen=True)
class ConSERT(Objective):
    """ConSERTLoss: the two views' augmentations (`consert_views`) and their rates."""

    def build(self, model, params, head_source: str):
        return load(self.loss)(model, tuple(params.consert_views), params.cutoff_rate, params.dropout_rate,
                               self.scale(params))

    def resolve(self, options: dict) -> dict:
        views = options.get("consert_views") or []  # the rate of a view it does not use leaves the key
        if not any(v in ("token_cutoff", "feature_cutoff") for v in views):
            options.pop("cutoff_rate", None)
        if "embedding_dropout" not in views:
            options.pop("dropout_rate", None)
        return options


ENTRIES = (ConSERT("consert", ("anchor", "positive"), "mean", True, ConSERTOptions,
                   "augsbert.losses.consert:ConSERTLoss"),)
