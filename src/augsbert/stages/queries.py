"""The `queries` stage: (query, passage) pairs generated for a target corpus without labels, GPL's first step
(job: augsbert.jobs.queries)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..errors import ConfigError
from ..store.graph import Graph, Node, SeedPlan
from ..params import Params
from .base import Stage

INVERSE_CLOZE = "inverse_cloze"


@dataclass(frozen=True, kw_only=True)
class QueriesParams(Params):
    """`queries`: the generator (a seq2seq model reference, entering the key by identity, or the offline
    `inverse_cloze`), the mode, the sampling and how many per passage (null = GPL's automatic sizing)."""

    generator: str
    mode: Literal["query", "paraphrase"]
    source: Literal["corpus", "sentences"] = "corpus"
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
    shards: int = 1


@dataclass(frozen=True, kw_only=True)
class QueryShardParams(QueriesParams):
    """One shard of the generation: the queries' options and its place among `shards`."""

    shard: int


QUERIES = Stage("queries", 2, "generate (query, passage) pairs for the target corpus: a seq2seq model (T5, top-k / "
                "top-p sampling) or the offline inverse cloze; `paraphrase` for symmetric data",
                "augsbert.jobs.queries:run", section="queries", runtime=("hub_revisions",), roles=("queries",),
                seconds_per_item=0.05, base_mem_mb=8000, params=QueriesParams,
                uses_gpu=lambda node: node.params.get("shards", 1) == 1,  # sharded: it merges the shards' texts
                check=lambda graph, name, exp: check_corpus(graph, name, exp))
QUERY_SHARD = Stage("query_shard", 1, "queries.shards > 1: the generated texts of one range of passages (merged "
                    "by queries)", "augsbert.jobs.queries:run_shard", section="queries", runtime=("hub_revisions",),
                    roles=("query_shard_0",), fixed_resources={"mem_mb": 16000, "runtime": 720, "gpu": 1},
                    params=QueryShardParams)
STAGES = (QUERIES, QUERY_SHARD)


def check_corpus(graph: Graph, name: str, exp: dict) -> None:
    """Refused while planning: generating for a dataset without a corpus (`queries.source: corpus` needs a BEIR
    corpus or an unlabeled corpus), rather than a DataError in the queries job after its upstream jobs ran."""
    generates = exp["queries"]["generator"] and ("gpl" in exp["models"] or exp["negatives"]["retrievers"])
    if not generates or exp["queries"]["source"] != "corpus":
        return
    from ..data import get_loader  # the loaders import pandas: read only for an experiment that generates

    dataset = graph.config["datasets"][exp["dataset"]]
    if not get_loader(dataset["loader"]).own_corpus and not (dataset.get("unlabeled") or dataset.get("topic_corpus")):
        raise ConfigError(f"experiments.{name}.queries: dataset '{exp['dataset']}' (loader {dataset['loader']}) has "
                          "no corpus to generate queries for: give it `unlabeled` (a text file), use a BEIR dataset, "
                          "or set queries.source: sentences (its train sentences)")


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
    shards = options.pop("shards")
    params, inputs = {**options, "seed": seed_plan.seed}, {"data": data}
    if shards > 1:  # N jobs generate ranges of the passages (content-keyed, as label_shard); queries merges them
        params["shards"] = shards
        for i in range(shards):
            inputs[f"shard_{i}"] = graph.add(QUERY_SHARD, f"{name}.{i + 1}of{shards}", {**params, "shard": i},
                                             {"data": data})
    return graph.add(QUERIES, name, params, inputs)
