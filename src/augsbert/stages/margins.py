"""The `margins` stage: a pretrained Cross-Encoder scores the mined (query, positive, negatives) lists, no
training, no gold: GPL's pseudo labels (Wang et al., NAACL 2022; job: augsbert.jobs.margins)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..params import Params
from .base import Stage
from .negatives import NEGATIVES, mined_pairs, negatives_per_row
from .queries import passage_tokens
from .sizes import DEFAULT_MAX_LENGTH, metrics


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
                model_input="teacher", params=MarginsParams, estimate="cross_scores",
                counts=lambda plan, node: margin_counts(plan, node))
STAGES = (MARGINS,)


# ------------------------------------------------------------------ what the time estimate counts (kind `cross_scores`)
def draws_per_row(rows: int, draws: dict) -> int:
    """How often the GPL student can see each mined row: `epochs`, or the passes its `max_steps` x `batch_size`
    tuples make over `rows` (the last one partial). The margins job draws by it (augsbert.training.gpl_data) and the
    time estimate counts by it."""
    if draws.get("max_steps"):
        return max(1, -(-int(draws["max_steps"]) * int(draws["batch_size"]) // max(rows, 1)))
    return int(draws["epochs"])  # the planner writes `epochs` where there is no `max_steps` (stages/gpl.py)


def mined_negatives(plan, node):
    """The `negatives` node of a margins node, or of a gpl node through its margins."""
    inputs = dict(node.inputs)
    if MARGINS.name in inputs:
        inputs = dict(plan.node(inputs[MARGINS.name]).inputs)
    return plan.node(inputs[NEGATIVES.name])


def margin_counts(plan, node) -> dict:
    """What a `margins` job scores: the (query, positive) and (query, drawn negative) pairs the student will read
    (`scored`; its metrics' count once it ran), each a pair of query + passage tokens (`tokens`)."""
    p = node.params
    negatives = mined_negatives(plan, node)
    pairs, _, query = mined_pairs(plan, negatives)
    rows = int(metrics(negatives).get("rows") or pairs)
    kept, candidates = negatives_per_row(negatives)
    scored = rows * (1 + (min(candidates, draws_per_row(rows, p["draws"])) if p.get("draws") else kept))
    scored = int(metrics(node).get("scored_pairs") or scored)
    tokens = min(float(p.get("max_length") or DEFAULT_MAX_LENGTH), query + passage_tokens(plan, negatives) + 3)
    return {"scored": scored, "tokens": tokens}
