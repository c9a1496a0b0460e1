"""The `negatives` stage: hard negatives of (query, positive) pairs mined from a passage corpus by BM25 and
Bi-Encoder retrievers (job: augsbert.jobs.negatives)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..errors import ConfigError
from ..store.graph import Node, SeedPlan
from ..params import Params
from .base import Stage
from .queries import queries_node

BM25 = "bm25"
PER_STEP = "per_step"  # GPL: a candidate list per pair, one negative drawn for every training tuple


@dataclass(frozen=True, kw_only=True)
class NegativesParams(Params):
    """`negatives`: the retrievers (`bm25` or Bi-Encoder references, entering the key by identity), the
    selection rule of sentence-transformers' miner, the optional Cross-Encoder filter and its score scale."""

    retrievers: list[str]
    qrels_split: Literal["train", "dev", "test"]
    mode: Literal["per_step", "fixed"] = "fixed"
    num_negatives: int = 1  # `fixed` only
    range_min: int = 0
    range_max: int | None = None
    absolute_margin: float | None = None
    relative_margin: float | None = None
    max_score: float | None = None
    min_score: float | None = None
    cross_encoder: str | None = None
    cross_encoder_scale: Literal["logits", "sigmoid"] = "sigmoid"
    max_length: int = 256
    batch_size: int = 64
    embedding_cache: str | None = None
    model_identity: dict[str, str] = field(default_factory=dict)  # each model reference -> its identity
    hub_revisions: dict[str, str] = field(default_factory=dict)


NEGATIVES = Stage("negatives", 1, "mine hard negatives of (query, positive) pairs with BM25 / Bi-Encoder retrievers "
                  "(rank range, margins, optional Cross-Encoder filter): a candidate list per pair (GPL) or fixed negatives", "augsbert.jobs.negatives:run",
                  section="negatives", runtime=("batch_size", "embedding_cache", "hub_revisions"),
                  roles=("negatives",), seconds_per_item=0.01, base_mem_mb=8000, mb_per_item=0.01,
                  params=NegativesParams, plan=lambda seed_plan: plan_negatives(seed_plan), needs=("data",))
STAGES = (NEGATIVES,)


def negatives_node(seed_plan: SeedPlan, pairs: Node, generated: bool = False) -> Node:
    """The negatives node over `pairs`: a BEIR-format dataset's data node (its qrels are the pairs), or a
    `queries` node (`generated`: its pairs are its train qrels)."""
    graph, options = seed_plan.graph, dict(seed_plan.config["negatives"])
    if generated:
        options["qrels_split"] = "train"
    refs = [r for r in options["retrievers"] if r != BM25] + ([options["cross_encoder"]] if options["cross_encoder"]
                                                               else [])
    options["model_identity"] = {ref: graph.model_identity(ref) for ref in dict.fromkeys(refs)}
    pinned = graph.config.get("hub_revisions", {})
    revisions = {ref: pinned[ref] for ref in refs if ref in pinned}
    if revisions:
        options["hub_revisions"] = revisions
    if not options["cross_encoder"]:
        options.pop("cross_encoder_scale")  # no Cross-Encoder: its scale cannot change anything
    if options["mode"] == PER_STEP:  # every survivor of each retriever's top range_max is a candidate
        if options["range_max"] is None:
            raise ConfigError(f"experiments.{seed_plan.experiment}.negatives.range_max: `mode: per_step` keeps "
                              "each retriever's top range_max as the query's candidates; set it (GPL: 50)")
        options.pop("num_negatives")
    name = f"{pairs.name}.{options['qrels_split']}.{'+'.join(r.rsplit('/', 1)[-1] for r in options['retrievers'])}"
    return graph.add(NEGATIVES, name, options, {"pairs": pairs})


def plan_negatives(seed_plan: SeedPlan) -> dict[str, Node]:
    """Planned when `negatives.retrievers` names one: the pairs are the generated queries (`queries.generator`)
    or the qrels of a BEIR-format dataset. A `gpl` model plans the same node itself (stages.gpl)."""
    if not seed_plan.config["negatives"]["retrievers"] or "gpl" in seed_plan.config["models"]:
        return {}
    if seed_plan.config["queries"]["generator"]:
        pairs = queries_node(seed_plan)
        return {"queries": pairs, "negatives": negatives_node(seed_plan, pairs, generated=True)}
    dataset = seed_plan.config["dataset"]
    if seed_plan.graph.config["datasets"][dataset]["loader"] != "beir":
        raise ConfigError(f"experiments.{seed_plan.experiment}.negatives: mining needs (query, positive) pairs; "
                          f"dataset '{dataset}' is not BEIR-format (`loader: beir` with qrels/"
                          f"{seed_plan.config['negatives']['qrels_split']}.tsv)")
    return {"negatives": negatives_node(seed_plan, seed_plan.roles["data"])}
