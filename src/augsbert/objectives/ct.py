"""`ct` and `ct_in_batch`: Contrastive Tension (Carlsson et al. 2021), the library's losses."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Params
from .base import Objective, TemperatureOptions, option

LOSSES = "sentence_transformers.sentence_transformer.losses"


@dataclass(frozen=True, kw_only=True)
class CTOptions(Params):
    ct_negatives: int = option(7, """
        `ct`: random negative pairs per positive pair (CT: 1 positive : 7 negatives).""", minimum=1)


@dataclass(frozen=True)
class ContrastiveTension(Objective):
    """Two encoders, dot product, BCE: each sentence once as a positive (a, a) and with `ct_negatives` random
    other sentences (a, b)."""

    def rows(self, sentences, seed, triples, options):
        import numpy as np  # here: planning reads the registry before any job

        rng = np.random.default_rng(seed)
        n = len(sentences)
        if n < 2:
            raise ValueError("Contrastive Tension needs at least two sentences")
        a, b, label = [], [], []
        for i, text in enumerate(sentences):
            a.append(text)
            b.append(text)
            label.append(1.0)
            others = rng.integers(0, n - 1, options.ct_negatives)
            for j in others + (others >= i):  # uniform over the other sentences
                a.append(text)
                b.append(sentences[j])
                label.append(0.0)
        return {"sentence_A": a, "sentence_B": b, "label": label}


ENTRIES = (
    ContrastiveTension("ct", ("sentence_A", "sentence_B", "label"), "mean", False, CTOptions,
                       f"{LOSSES}:ContrastiveTensionLoss"),
    Objective("ct_in_batch", ("sentence",), "mean", True, TemperatureOptions,
              f"{LOSSES}:ContrastiveTensionLossInBatchNegatives"),
)
