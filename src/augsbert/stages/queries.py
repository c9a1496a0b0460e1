"""The `queries` stage: (query, passage) pairs generated for a target corpus without labels, GPL's first step
(job: augsbert.jobs.queries)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..store.graph import Node, SeedPlan
from ..params import Params
from .base import Stage

INVERSE_CLOZE = "inverse_cloze"


@dataclass(frozen=True, kw_only=True)
class QueriesParams(Params):
    """`queries`: the generator (a seq2seq model reference, entering the key by identity, or the offline
    `inverse_cloze`), the mode, the sampling and how many per passage (null = GPL's automatic sizing)."""

    generator: str
    mode: Literal["query", "paraphrase"]
    queries_per_passage: int | None
    total: int
    top_k: int
    top_p: float
    max_length: int
    input_max_length: int
    prefix: str
    batch_size: int
    seed: int
    model_identity: dict[str, str] = field(default_factory=dict)
    hub_revisions: dict[str, str] = field(default_factory=dict)


QUERIES = Stage("queries", 1, "generate (query, passage) pairs for the target corpus: a seq2seq model (T5, top-k / "
                "top-p sampling) or the offline inverse cloze; `paraphrase` for symmetric data",
                "augsbert.jobs.queries:run", section="queries", runtime=("hub_revisions",), roles=("queries",),
                seconds_per_item=0.05, base_mem_mb=8000, params=QueriesParams)
STAGES = (QUERIES,)


def queries_node(seed_plan: SeedPlan) -> Node:
    """The queries node of the experiment's `queries` section over its data (the corpus: a BEIR dataset's passages,
    else the unlabeled corpus). Seeded by the run seed: each seed's student learns other generated queries."""
    graph, options = seed_plan.graph, dict(seed_plan.config["queries"])
    generator = options["generator"]
    if generator != INVERSE_CLOZE:
        options["model_identity"] = {generator: graph.model_identity(generator)}
        if generator in graph.config.get("hub_revisions", {}):
            options["hub_revisions"] = {generator: graph.config["hub_revisions"][generator]}
    if options["prefix"] is None:  # the generator's input prefix: none for queries, "paraphrase: " for paraphrases
        options["prefix"] = "paraphrase: " if options["mode"] == "paraphrase" else ""
    data = seed_plan.roles["data"]
    name = f"{data.name}.{options['mode']}.{generator.rsplit('/', 1)[-1]}"
    return graph.add(QUERIES, name, {**options, "seed": seed_plan.seed}, {"data": data})
