"""The `gold_subset` stage: few labels, a seeded fraction of a dataset's gold train pairs (`gold_fraction`; job:
augsbert.jobs.gold_subset).

Its artifact has the layout of a data artifact (train / dev / test / unlabeled parquet tables), so every stage
that learns gold reads it in place of the dataset: the train split is the subset, dev and test are the
dataset's, and the train pairs left out are kept *without their scores* in `unlabeled_pairs.parquet`, the
unlabelled in-domain pairs that silver labelling (`candidates.strategies: [target_pairs]`) and the sentence
pool (`candidates.pool: unlabeled` / `train+unlabeled`) draw from. This is the semi-supervised setting of the
AugSBERT paper (a few gold pairs, many unlabelled ones from the same distribution) on any labelled dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params
from .base import Stage
from .runs import source


@dataclass(frozen=True, kw_only=True)
class GoldSubsetParams(Params):
    """`gold_fraction` and the seed its subset is drawn with (the run's seed)."""

    fraction: float
    seed: int


GOLD_SUBSET = Stage("gold_subset", 1, "keep a seeded fraction of a dataset's gold train pairs (gold_fraction); the "
                    "others stay as unlabelled pairs", "augsbert.jobs.gold_subset:run", section="gold_fraction",
                    roles=("gold_subset",), gpu=False, device=False, seconds_per_item=0.001, base_mem_mb=4000,
                    mb_per_item=0.002, env="cpu", threads=1, cache=False, params=GoldSubsetParams,
                    plan=lambda seed_plan: plan_gold_subset(seed_plan), needs=("data", "source_data"), estimate="read")
STAGES = (GOLD_SUBSET,)


def gold_subset(graph: Graph, dataset: str, fraction: float, seed: int, data: Node) -> Node:
    """The few-label version of `data` for run `seed` (a different subset per seed: the spread over seeds
    includes which pairs were labelled)."""
    return graph.add(GOLD_SUBSET, f"{dataset}.gold{fraction:g}", {"fraction": fraction, "seed": seed}, {"data": data})


def plan_gold_subset(seed_plan: SeedPlan) -> dict[str, Node]:
    """`gold_fraction` < 1: a seeded subset of the gold stands for the gold in every trained model."""
    exp, roles = seed_plan.config, seed_plan.roles
    if exp["gold_fraction"] >= 1:
        return {}
    gold = roles.get("source_data") or roles["data"]
    return {"gold_subset": gold_subset(seed_plan.graph, source(exp), exp["gold_fraction"], seed_plan.seed, gold)}
