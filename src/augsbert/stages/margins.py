"""The `margins` stage: a pretrained Cross-Encoder scores the mined (query, positive, negatives) lists, no
training, no gold: GPL's pseudo labels (Wang et al., NAACL 2022; job: augsbert.jobs.margins)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..params import Params
from .base import Stage


@dataclass(frozen=True, kw_only=True)
class MarginsParams(Params):
    """`teacher.pretrained` (the `model`; None: the `teacher` input, the experiment's trained Cross-Encoder) and
    the scale its scores are taken in."""

    model: str | None = None
    model_identity: dict[str, str] = field(default_factory=dict)
    hub_revisions: dict[str, str] = field(default_factory=dict)
    score_scale: Literal["logits", "sigmoid"]
    max_length: int
    batch_size: int = 64
    # `negatives.mode: per_step`: the student's draws (its seed, batch_size, max_steps or epochs), fixed here
    draws: dict[str, int] | None = None


MARGINS = Stage("margins", 1, "score mined (query, positive, negatives) lists with a pretrained Cross-Encoder (GPL's "
                "pseudo labels: the margins)", "augsbert.jobs.margins:run", section="teacher",
                runtime=("batch_size", "model"), roles=("margins",), seconds_per_item=0.01, base_mem_mb=8000,
                model_input="teacher", params=MarginsParams, estimate="cross_scores")
STAGES = (MARGINS,)
