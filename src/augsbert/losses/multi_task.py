"""A main loss plus a weighted auxiliary loss (the thesis' multi-task objectives): `MultiTaskLoss`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from torch import Tensor, nn

from ..models.topic_classifier import REIML_2023  # the thesis (5.4.2) that defines the multi-task objectives


class MultiTaskLoss(nn.Module):
    """L = L_main + weight * L_aux on the same batch (thesis 5.4.2: MLM+SimCSE, MLM+NM, TSDAE+NM), or with
    `weight_on="main"` L = weight * L_main + L_aux (SimCSE's reading: its auxiliary MLM term is the weighted one).

    The auxiliary objective is the "low-loss" contrastive term (SimCSE or NM);
    the main one MLM or TSDAE. `aux_columns` picks and orders the batch's text
    columns for the auxiliary loss (TSDAE reads (noised, original), NM reads
    (clean, noised): the same two columns swapped). Each loss runs its own
    forward passes (the thesis does not say a pass is shared). Returns the two
    weighted terms as a dict, which the sentence-transformers trainer sums and
    logs separately.
    """

    def __init__(self, main: nn.Module, aux: nn.Module, weight: float, aux_columns: tuple[int, ...] = (0, 1),
                 weight_on: str = "contrastive") -> None:
        super().__init__()
        if weight_on not in ("contrastive", "main"):
            raise ValueError(f"weight_on: 'contrastive' or 'main', not {weight_on!r}")
        self.main, self.aux, self.weight, self.aux_columns = main, aux, weight, tuple(aux_columns)
        self.weight_on = weight_on
        self.model = getattr(main, "model", None) or getattr(main, "encoder")

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        features = list(sentence_features)
        if self.weight_on == "main":
            aux = self.aux([features[i] for i in self.aux_columns], labels)
            if self.weight == 0:
                return {"aux": aux}
            return {"main": self.weight * self.main(features, labels), "aux": aux}
        main = self.main(features, labels)
        if self.weight == 0:
            return {"main": main}
        aux = self.aux([features[i] for i in self.aux_columns], labels)
        return {"main": main, "aux": self.weight * aux}

    def get_config_dict(self) -> dict[str, Any]:
        return {"weight": self.weight, "weight_on": self.weight_on, "aux_columns": list(self.aux_columns)}

    @property
    def citation(self) -> str:
        return REIML_2023
