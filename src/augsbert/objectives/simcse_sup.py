"""`simcse_sup`: supervised SimCSE on NLI triples (anchor, entailment, contradiction; Gao et al. 2021)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from .base import Objective, TemperatureOptions
from .simcse import MNRL


@dataclass(frozen=True)
class SupervisedSimCSE(Objective):
    """MultipleNegativesRankingLoss over (anchor, positive, negative): N x 2N logits."""

    def rows(self, sentences, seed, triples, options):
        if not triples:
            raise ValueError("simcse_sup needs NLI triples (pretrain.triples)")
        return {c: [t[i] for t in triples] for i, c in enumerate(self.columns)}

    def check(self, where: str, pretrain: dict) -> None:
        if pretrain["objective"] == self.name and not pretrain["triples"]:
            raise ConfigError(f"{where}.pretrain.triples: simcse_sup learns from NLI triples; name a "
                              "file with columns anchor, positive, negative")


ENTRIES = (SupervisedSimCSE("simcse_sup", ("anchor", "positive", "negative"), "cls", True, TemperatureOptions,
                            MNRL, corpus="augsbert.training.pretrain_rows:triple_corpus"),)
