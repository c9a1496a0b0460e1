"""The `zero_shot` stage: the untrained base model tested on the target (job: augsbert.jobs.zero_shot)."""

from __future__ import annotations

from dataclasses import dataclass

from ..planning.graph import Graph, Node, SeedPlan, slug
from ..params import ModelParams
from .base import Row, Stage
from .runs import wants


@dataclass(frozen=True, kw_only=True)
class ZeroShotParams(ModelParams):
    max_length: int
    batch_size: int


ZERO_SHOT = Stage("zero_shot", 3, "evaluate the untrained base model (cosine of mean-pooled embeddings) on the test "
                  "split", "augsbert.jobs.zero_shot:run", section="suite", runtime=("batch_size", "model"),
                  roles=("zero_shot",), seconds_per_item=0.002, base_mem_mb=8000, aliases=("evaluate-zero-shot",),
                  rule_alias="evaluate_zero_shot", group="evaluation", cache=False,
                  params=ZeroShotParams, plan=lambda seed_plan: plan_zero_shot(seed_plan), needs=("data",),
                  rows={"zero_shot": Row(10, "Zero-shot base model", "base model, no training (zero-shot Bi-Encoder)",
                                         seeded=False)},
                  estimate="test")
STAGES = (ZERO_SHOT,)


def zero_shot(graph: Graph, exp: dict, dataset: str, data: Node) -> Node:
    encoding = {k: exp["suite"][k] for k in ("batch_size", "max_length")}
    return graph.add(ZERO_SHOT, f"{dataset}.{slug(exp['base_model'])}", {"model": exp["base_model"], **encoding},
                     {"data": data})


def plan_zero_shot(seed_plan: SeedPlan) -> dict[str, Node]:
    """The untrained base model's row (`models: [zero_shot]`); its node is planned in every experiment."""
    exp = seed_plan.config
    node = zero_shot(seed_plan.graph, exp, exp["dataset"], seed_plan.roles["data"])
    return {"zero_shot": node} if wants(seed_plan, "zero_shot") else {}
