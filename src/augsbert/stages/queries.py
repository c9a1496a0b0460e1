"""The `queries` stage: (query, passage) pairs generated for a target corpus without labels, GPL's first step
(jobs: augsbert.jobs.queries, augsbert.jobs.query_shard)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..errors import ConfigError
from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params, default_of, option, section_options
from .base import Stage
from .sizes import DEFAULT_SIZE, data_sizes, metrics, text_tokens

INVERSE_CLOZE = "inverse_cloze"


@dataclass(frozen=True, kw_only=True)
class QueriesOptions(Params):
    """The `queries` section (its schema section is written from here: augsbert.reference.schema)."""

    SECTION = "queries"
    SECTION_DESCRIPTION = """
        Query generation (stage `queries`, GPL's first step) for a `gpl` model: (query, passage) pairs for the
        target corpus (a BEIR dataset's passages, else the unlabeled corpus); each query's passage is its
        positive. null `generator` = the dataset's own qrels (a BEIR dataset, GPL's `use_train_qrels`)."""

    generator: str | None = option(None, """
        A seq2seq (encoder-decoder) model reference, hub or local (GPL:
        BeIR/query-gen-msmarco-t5-base-v1); `inverse_cloze` = offline, no weights: a query is one
        sentence of its passage (a one-sentence passage: a span of at least half its words); null = no
        generation. Another kind of model stops with one message.""")
    mode: Literal["query", "paraphrase"] = option("query", """
        `query`: queries for passages (asymmetric retrieval); `paraphrase`: similar sentences for
        symmetric data (the input gets `prefix`, default "paraphrase: ", for a paraphrase model).""")
    source: Literal["corpus", "sentences"] = option("corpus", """
        What the generator reads: `corpus` = a BEIR dataset's passages, else the unlabeled corpus (a
        dataset without one is refused while planning); `sentences` = the distinct sentences of the
        train split (scores unused; dev and test sentences left out), for symmetric data without a
        corpus (grid `gpl_symmetric`).""")
    prefix: str | None = option(None, """
        Text put before each passage for the generator; null = "" (query) or "paraphrase: "
        (paraphrase).""")
    queries_per_passage: int | None = option(None, """
        Generated per passage; null = GPL's automatic sizing: `total` / |corpus| per passage when that
        is at least 3, else 3 per passage for a seeded subset of `total` / 3 passages.""", minimum=1)
    total: int = option(250000, "The automatic sizing's number of queries (GPL 250K).", minimum=1)
    top_k: int = option(25, "Top-k sampling (BEIR's QueryGenerator default, which GPL calls).", minimum=0)
    top_p: float = option(0.95, "Nucleus sampling (BEIR's QueryGenerator default).", exclusiveMinimum=0, maximum=1)
    max_length: int = option(64, "Maximum generated tokens (BEIR's QueryGenerator default).", minimum=2)
    input_max_length: int = option(350, "Passage tokens the generator reads (ours: GPL's max_seq_length).", minimum=8)
    batch_size: int = option(32, """
        Passages per generation batch; part of the key, as the sampling is seeded per batch (its first
        row and the run seed).""", minimum=1)
    shards: int = option(1, """
        Generation split over this many jobs (stage `query_shard`, each a range of passages cut at batch
        boundaries, so the queries equal an unsharded run's; the `queries` job merges them). 1 = one job
        (keys unchanged).""", minimum=1)


@dataclass(frozen=True, kw_only=True)
class QueriesParams(QueriesOptions):
    """`queries`: the generator (a seq2seq model reference, entering the key by identity, or the offline
    `inverse_cloze`), the mode, the sampling and how many per passage (null = GPL's automatic sizing)."""

    seed: int
    model_identity: dict[str, str] = field(default_factory=dict)
    hub_revisions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class QueryShardParams(QueriesParams):
    """One shard of the generation: the queries' options and its place among `shards`."""

    shard: int


QUERIES = Stage("queries", 2, "generate (query, passage) pairs for the target corpus: a seq2seq model (T5, top-k / "
                "top-p sampling) or the offline inverse cloze; `paraphrase` for symmetric data",
                "augsbert.jobs.queries:run", section="queries", runtime=("hub_revisions",), roles=("queries",),
                seconds_per_item=0.05, base_mem_mb=8000, params=QueriesParams,
                # sharded: it merges the shards' texts
                uses_gpu=lambda node: node.params.get("shards", default_of(QueriesParams, "shards")) == 1,
                check=lambda graph, name, exp: check_corpus(graph, name, exp), estimate="generate",
                counts=lambda plan, node: query_counts(plan, node))
QUERY_SHARD = Stage("query_shard", 1, "queries.shards > 1: the generated texts of one range of passages (merged "
                    "by queries)", "augsbert.jobs.query_shard:run", section="queries", runtime=("hub_revisions",),
                    roles=("query_shard_0",), fixed_resources={"mem_mb": 16000, "runtime": 720, "gpu": 1},
                    params=QueryShardParams, estimate="generate", counts=lambda plan, node: query_counts(plan, node))
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
    graph, options = seed_plan.graph, section_options(QueriesOptions, seed_plan.config["queries"])
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


# ------------------------------------------------------------------ what the time estimate counts (kind `generate`)
def sizing(n_passages: int, per_passage: int | None, total: int) -> tuple[int, int]:
    """(queries per passage, passages used). Set: as given, all passages. null: GPL's rule with both automatic
    flags (gpl/train.py `queries_per_passage -1`, `new_size -1`): ceil(total / |corpus|) per passage if
    3 |corpus| < total, else 3 per passage over ceil(total / 3) passages."""
    if per_passage is not None:
        return per_passage, n_passages
    if 3 * n_passages < total:
        return -(-total // n_passages), n_passages
    return 3, min(n_passages, -(-total // 3))


def corpus_passages(plan, data, source: str = "corpus") -> int:
    """Passages the queries stage reads of data node `data`: its corpus (the unlabeled texts, a BEIR corpus), or
    with `source: sentences` its train sentences (both sides of each pair: an upper bound of the distinct ones);
    a corpus not counted yet (a BEIR dataset before its data job): DEFAULT_SIZE's train, a guess."""
    sizes = data_sizes(data, plan)
    count = 2 * sizes["train"] if source == "sentences" else sizes["unlabeled"]
    return count or DEFAULT_SIZE["train"]


def generated(plan, node) -> tuple[int, int]:
    """(passages generated for, queries per passage) of a `queries` node: its metrics once it ran, else GPL's
    sizing over the corpus' passages."""
    done = {} if "shard" in node.params else metrics(node)  # a shard's metrics count its own passages
    if done.get("passages"):
        return int(done["passages"]), int(done["queries_per_passage"])
    p = node.params
    source = p.get("source", default_of(QueriesParams, "source"))
    per_passage, used = sizing(corpus_passages(plan, plan.node(dict(node.inputs)["data"]), source),
                               p.get("queries_per_passage"), int(p.get("total") or 1))
    return used, per_passage


def passage_tokens(plan, node) -> float:
    """Tokens of one passage the chain mines: a sentence of the train pairs (`queries.source: sentences`), else a
    passage of the corpus."""
    queries = next((plan.node(k) for _, k in node.inputs if plan.node(k).stage == QUERIES.name), None)
    sentences = queries is not None and queries.params.get("source") == "sentences"
    return text_tokens(plan, node, "pairs" if sentences else "corpus")


def query_counts(plan, node) -> dict:
    """What a `queries` job (or one `query_shard`: its share of the passages) generates: `passages`, `per_passage`;
    `without_model` says why no model runs (the inverse cloze; the `queries` job over shards merges their texts),
    else the `generator`, its `input_tokens` per passage and its decoder `steps` (a batch decodes until its longest
    query ends: at most max_length)."""
    passages, per_passage = generated(plan, node)
    p = node.params
    shards = int(p.get("shards", default_of(QueriesParams, "shards")))
    if shards > 1 and "shard" not in p or p.get("generator") == INVERSE_CLOZE:  # no model: a data job's time
        return {"passages": passages, "per_passage": per_passage, "without_model": (
            "merging the shards' queries" if shards > 1 and "shard" not in p else "inverse cloze, no model")}
    input_tokens = min(float(p.get("input_max_length") or 350), passage_tokens(plan, node) + 1)
    return {"passages": -(-passages // shards), "per_passage": per_passage, "generator": p["generator"],
            "input_tokens": input_tokens, "steps": int(p.get("max_length") or 64)}
