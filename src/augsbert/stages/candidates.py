"""The sampling stages: `candidates` (silver candidate pairs) and, with `candidates.shards > 1`, `pool_index`
and `candidate_shard` (jobs: augsbert.jobs.candidates, augsbert.jobs.pool_index, augsbert.jobs.candidate_shard)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..planning.graph import Graph, Node, SeedPlan
from ..params import ModelParams, Params, option
from .base import Stage
from .data import data_node
from .runs import strategies, target, wants
from .sizes import pool_items
from .student import lower_bound_node
from ..errors import DataError

Pool = Literal["train", "train+unlabeled", "unlabeled"]


@dataclass(frozen=True, kw_only=True)
class CandidatePool(Params):
    """KDE strategies: how many random / semantic-search partners per sentence they choose from."""

    random: int = option(3, "Random partners per sentence.", minimum=1)
    semantic_search: int = option(3, "Semantic-search partners per sentence (iterative KDE only).", minimum=1)


@dataclass(frozen=True, kw_only=True)
class CandidatesOptions(Params):
    """The `candidates` section (its schema section is written from here: augsbert.reference.schema)."""

    SECTION = "candidates"
    SECTION_DESCRIPTION = """How candidate silver pairs are drawn from the target train sentences
        (unique by normalised text; never a self pair, a gold pair, a repeated
        pair or, by default, a dev/test sentence)."""

    strategies: list[Literal["none", "random", "bm25", "bm25_least", "semantic_search", "semantic_search_least",
                             "kde", "iterative_kde", "target_pairs"]] = option(["none"], """
        Combinable strategies: `none` (only the re-labelled gold), `random`,
        `bm25`, `semantic_search` (k best partners per sentence; list both
        for BM25 + semantic search), `bm25_least` / `semantic_search_least`
        (k least similar: hard negatives), `kde` (AugSBERT paper: random
        pool thinned by min(1, F_gold/F_silver)), `iterative_kde` (thesis
        Algorithm 1 on random + semantic-search candidates), `target_pairs`
        (the target's train pairs with their gold labels withheld: in domain
        transfer all of them, thesis Tables 6.7/6.8; in-domain with
        `gold_fraction` < 1 the pairs left out of the gold subset).""", minItems=1, uniqueItems=True)
    top_k: int = option(3, "Partners per sentence for the neighbour strategies (reference 3-5).", minimum=1)
    pool: Pool = option("train", """
        Sentences the candidates are drawn from: the target's gold train
        split (AugSBERT), plus or only its unlabeled corpus (e.g. the 300
        Lee background documents; any dataset's `unlabeled` file).""")
    semantic_model: str = option("finetuned", """
        Encoder for semantic search: `finetuned` (the Bi-Encoder first
        trained on gold, the thesis' best), `pretrained` (the experiment's
        base model), `pretrained_stage` (the encoder of this experiment's
        `pretrain` stage), or any model reference.""")
    exact: bool = option(True, "Exact semantic search (flat index); false = approximate HNSW for very large pools.")
    candidate_pool: CandidatePool = option(
        CandidatePool, "Candidates per sentence for the KDE strategies (thesis 3 random + 3 semantic search).")
    kde_reference: Literal["teacher", "gold"] = option("teacher", """
        Gold score distribution for the KDE strategies: the teacher's
        predictions on the gold train pairs (thesis code) or the gold labels.""")
    iterative_kde_accept: Literal["at_least", "greater"] = option("at_least", """
        `iterative_kde`: a candidate joins the selected set when the gold
        density at its score is `at_least` the selected set's (our default,
        kept from before the option) or `greater` than it (thesis Algorithm
        1's words, "greater than"). The two differ only where the two
        densities are equal in floating point (ties of scores on a coarse
        lattice, a selected set equal to the gold set). Enters the labels'
        key only when `greater` and iterative_kde is sampled.""")
    exclude_eval_sentences: bool = option(
        True, "Drop dev/test sentences from the pool (switch off only for transductive setups).")
    batch_size: int = option(64, "Encoding batch size for semantic search.", minimum=1)
    max_length: int = option(256, "Maximum tokens per sentence when encoding for semantic search.", minimum=8)
    shards: int = option(1, """
        Split candidate search and silver labelling of a large pool (1-10
        million sentences) into this many independent jobs. 1 = one job
        each (and the artifact keys of unsharded runs). N > 1: a
        `pool_index` job writes the pool and, for semantic search, its
        embeddings and faiss index once; N `candidate_shard` jobs search
        disjoint ranges of query sentences (cut at query-block boundaries,
        so a range may be empty for a small pool); `candidates` merges
        them; N `label_shard` jobs score row ranges of the merged
        candidates (streamed from parquet) and `labels` merges the
        scores. The result equals the unsharded one row for row
        (tests/test_shards.py), except with `exact: false`, where the one
        shared HNSW graph may differ from another build of it (README
        "Large pools").""", minimum=1, maximum=1024)


@dataclass(frozen=True, kw_only=True)
class CandidatesParams(CandidatesOptions, ModelParams):
    """The `candidates` section as a candidates node keeps it: the encoder options only when a strategy
    encodes (`semantic_model` ... `max_length`), `candidate_pool` only for the KDE strategies (an option the
    node does not keep reads as its default, which the job then does not use); `kde_reference` and
    `iterative_kde_accept` go to the labels node."""

    seed: int


@dataclass(frozen=True, kw_only=True)
class CandidateShardParams(CandidatesParams):
    shard: int


@dataclass(frozen=True, kw_only=True)
class PoolIndexParams(Params):
    """The pool of a sharded sampling and, when a strategy searches, the encoder options of its index."""

    pool: Pool
    exclude_eval_sentences: bool
    model: str | None = None
    model_identity: dict[str, str] = field(default_factory=dict)
    hub_revisions: dict[str, str] = field(default_factory=dict)
    semantic_model: str | None = None
    exact: bool = True
    batch_size: int = 64
    max_length: int = 256
    least_index: bool = False


CANDIDATES_RUNTIME = ("batch_size", "model", "semantic_model")
CANDIDATES = Stage("candidates", 2, "draw candidate silver pairs (random, BM25, semantic search, KDE pools) from the "
                   "target sentences", "augsbert.jobs.candidates:run", section="candidates", runtime=CANDIDATES_RUNTIME,
                   roles=("candidates",), seconds_per_item=0.002, base_mem_mb=4000, mb_per_item=0.008,
                   aliases=("sample-pairs",), rule_alias="sample_pairs", params=CandidatesParams,
                   plan=lambda seed_plan: plan_candidates(seed_plan), needs=("data", "source_data", "gold_subset",
                                                                              "pretrained"),
                   check=lambda graph, name, exp: check_candidates(graph, name, exp), items=pool_items,
                   uses_gpu=lambda node: encodes(node),  # GPU only when a strategy encodes
                   holds=("candidates.parquet",), kind_options=("strategies",))
# candidates.shards > 1 (docs/guide/large-pools.md): fixed sizes, one shard of a 10-million sentence pool
POOL_INDEX = Stage("pool_index", 1, "candidates.shards > 1: write the sentence pool and, for semantic search, its "
                   "embeddings and faiss index once for every shard", "augsbert.jobs.pool_index:run",
                   section="candidates", runtime=CANDIDATES_RUNTIME, roles=("pool_index",),
                   fixed_resources={"mem_mb": 32000, "runtime": 480, "gpu": 1}, aliases=("index-pool",),
                   rule_alias="index_pool", params=PoolIndexParams)
CANDIDATE_SHARD = Stage("candidate_shard", 1, "candidates.shards > 1: partners of one range of query sentences (merged "
                        "by candidates)", "augsbert.jobs.candidate_shard:run", section="candidates",
                        runtime=CANDIDATES_RUNTIME,
                        roles=("candidate_shard_0",),  # --role candidate_shard_<n> for the n-th shard
                        gpu=False, fixed_resources={"mem_mb": 32000, "runtime": 480, "gpu": 0},
                        aliases=("sample-pairs-shard",), rule_alias="sample_pairs_shard",
                        params=CandidateShardParams, kind_options=("strategies",))
STAGES = (CANDIDATES, POOL_INDEX, CANDIDATE_SHARD)


def check_pool(graph: Graph, name: str, sampling: dict, data: Node) -> None:
    """Fail while planning when `top_k` (or a KDE candidate count) exceeds the sentence pool.

    The pool is known only from the data, so this runs once the data artifact exists (any
    later plan: the next dry run, the CLI); before that the sampling stage checks the same
    thing before it encodes anything.
    """
    if not (Path(data.path) / "train.parquet").is_file():
        return
    from ..data.pool import pool_too_small, target_pool  # pandas: read only once the data artifact exists

    pool = (data.key, sampling["pool"], sampling["exclude_eval_sentences"])
    if pool not in graph.pool_sizes:
        try:
            graph.pool_sizes[pool] = len(target_pool(data.path, *pool[1:])[0])
        except (DataError, ValueError, OSError):
            # no unlabeled corpus, or a damaged data artifact (a 0-byte parquet file): planning goes on, and the
            # sampling job stops with its own message (its input check names the damaged artifact)
            graph.pool_sizes[pool] = None
    if graph.pool_sizes[pool] is not None:
        problem = pool_too_small(sampling, graph.pool_sizes[pool], prefix=f"experiments.{name}.")
        if problem:
            raise ConfigError(problem)


def candidates(graph: Graph, exp: dict, dataset: str, seed: int, data: Node, encoder: Node,
               strategies: list[str], pretrained: Node | None = None) -> Node:
    section = dict(exp["candidates"])
    section["strategies"] = strategies
    needs_encoder = any(s.startswith("semantic_search") or s == "iterative_kde" for s in strategies)
    inputs = {"data": data}
    if needs_encoder and section["semantic_model"] == "finetuned":
        inputs["encoder"] = encoder
    elif needs_encoder and section["semantic_model"] == "pretrained_stage":
        inputs["encoder"] = pretrained
    if not needs_encoder:  # encoder options cannot change BM25/random/KDE/target-pair candidates
        for key in ("semantic_model", "exact", "batch_size", "max_length"):
            section.pop(key)
    if not any(s in ("kde", "iterative_kde") for s in strategies):
        section.pop("candidate_pool")
    section.pop("kde_reference")  # used when labelling
    section.pop("iterative_kde_accept")  # likewise
    shards = section.pop("shards")  # a key only when > 1: unsharded candidates keep their keys
    params = {**section, "model": exp["base_model"], "seed": seed}
    name = f"{dataset}.{'+'.join(strategies)}"
    if shards == 1:
        return graph.add(CANDIDATES, name, params, inputs)
    # candidates.shards > 1: one pool (+ semantic index) node, N shard nodes over query rows, the merge
    # keyed by what the index holds, not by the strategies: experiments that differ in those share it
    index_params = {k: params[k] for k in ("pool", "exclude_eval_sentences", "semantic_model", "exact",
                                           "batch_size", "max_length") if k in params}
    if needs_encoder:
        index_params.update(model=params["model"], least_index="semantic_search_least" in strategies)
    index = graph.add(POOL_INDEX, f"{dataset}.{params['pool']}", index_params, inputs)
    shard_nodes = {f"shard_{i}": graph.add(CANDIDATE_SHARD, f"{name}.{i + 1}of{shards}",
                                           {**params, "shards": shards, "shard": i}, {"index": index})
                   for i in range(shards)}
    return graph.add(CANDIDATES, name, {**params, "shards": shards}, {"data": data, "index": index, **shard_nodes})


def encodes(node: Node) -> bool:
    """Whether a candidates job encodes sentences (semantic search, iterative KDE) and so needs a GPU; the merge
    of shards (`candidates.shards` > 1, an `index` input) encodes nothing."""
    if "index" in dict(node.inputs):
        return False
    return any(s.startswith(("semantic_search", "iterative_kde")) for s in node.params.get("strategies") or [])


def check_candidates(graph: Graph, name: str, exp: dict) -> None:
    """A student's candidates fit the pool; the data job checks the same once it has made the tables."""
    section = exp["candidates"]
    if not (strategies(exp) and "student" in exp["models"]):
        return
    data = data_node(graph, exp["dataset"])
    check_pool(graph, name, section, data)
    graph.pool_checks.setdefault(data.key, []).append({"experiment": name, "candidates": {
        k: section[k] for k in ("strategies", "top_k", "candidate_pool", "pool", "exclude_eval_sentences")}})


def candidates_node(seed_plan: SeedPlan) -> Node:
    """The candidates of the seed's target: the lower bound encodes them for `semantic_model: finetuned`,
    the pretrain stage's encoder for `pretrained_stage`."""
    exp = seed_plan.config
    return candidates(seed_plan.graph, exp, exp["dataset"], seed_plan.seed, target(seed_plan),
                      lower_bound_node(seed_plan), strategies(exp), seed_plan.roles.get("pretrained"))


def plan_candidates(seed_plan: SeedPlan) -> dict[str, Node]:
    """Candidates for the teacher to label (a student), or first of all for MLM to train on (`adapt.pairs:
    candidates`, thesis 4.3.1: the adaptation sees the pairs the teacher will label)."""
    exp = seed_plan.config
    silver_first = exp["adapt"]["variant"] != "augsbert" and exp["adapt"]["pairs"] == "candidates"
    if silver_first or (wants(seed_plan, "student") and strategies(exp)):
        return {"candidates": candidates_node(seed_plan)}
    return {}
