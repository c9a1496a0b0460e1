"""The sampling stages: `candidates` (silver candidate pairs) and, with `candidates.shards > 1`, `pool_index`
and `candidate_shard` (jobs: augsbert.jobs.candidates, augsbert.jobs.pool_index, augsbert.jobs.candidate_shard)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..store.graph import Graph, Node, SeedPlan
from ..params import ModelParams, Params
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

    random: int
    semantic_search: int


@dataclass(frozen=True, kw_only=True)
class CandidatesParams(ModelParams):
    """The `candidates` section as a candidates node keeps it: the encoder options only when a strategy
    encodes (`semantic_model` ... `max_length`), `candidate_pool` only for the KDE strategies."""

    strategies: list[str]
    top_k: int
    pool: Pool
    exclude_eval_sentences: bool
    seed: int
    semantic_model: str | None = None  # finetuned | pretrained_stage | pretrained | a model reference
    exact: bool = True
    batch_size: int = 64
    max_length: int = 256
    candidate_pool: CandidatePool | None = None
    shards: int = 1


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


SAMPLING_RUNTIME = ("batch_size", "model", "semantic_model")
CANDIDATES = Stage("candidates", 2, "draw candidate silver pairs (random, BM25, semantic search, KDE pools) from the "
                   "target sentences", "augsbert.jobs.candidates:run", section="candidates", runtime=SAMPLING_RUNTIME,
                   roles=("candidates",), seconds_per_item=0.002, base_mem_mb=4000, mb_per_item=0.008,
                   aliases=("sample-pairs",), rule_alias="sample_pairs", params=CandidatesParams,
                   plan=lambda seed_plan: plan_candidates(seed_plan), needs=("data", "source_data", "gold_subset",
                                                                              "pretrained"),
                   check=lambda graph, name, exp: check_sampling(graph, name, exp), items=pool_items,
                   uses_gpu=lambda node: encodes(node),  # GPU only when a strategy encodes
                   holds=("candidates.parquet",), kind_options=("strategies",))
# candidates.shards > 1 (docs/guide/large-pools.md): fixed sizes, one shard of a 10-million sentence pool
POOL_INDEX = Stage("pool_index", 1, "candidates.shards > 1: write the sentence pool and, for semantic search, its "
                   "embeddings and faiss index once for every shard", "augsbert.jobs.pool_index:run",
                   section="candidates", runtime=SAMPLING_RUNTIME, roles=("pool_index",),
                   fixed_resources={"mem_mb": 32000, "runtime": 480, "gpu": 1}, aliases=("index-pool",),
                   rule_alias="index_pool", params=PoolIndexParams)
CANDIDATE_SHARD = Stage("candidate_shard", 1, "candidates.shards > 1: partners of one range of query sentences (merged "
                        "by candidates)", "augsbert.jobs.candidate_shard:run", section="candidates",
                        runtime=SAMPLING_RUNTIME,
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
    sampling = dict(exp["candidates"])
    sampling["strategies"] = strategies
    needs_encoder = any(s.startswith("semantic_search") or s == "iterative_kde" for s in strategies)
    inputs = {"data": data}
    if needs_encoder and sampling["semantic_model"] == "finetuned":
        inputs["encoder"] = encoder
    elif needs_encoder and sampling["semantic_model"] == "pretrained_stage":
        inputs["encoder"] = pretrained
    if not needs_encoder:  # encoder options cannot change BM25/random/KDE/target-pair candidates
        for key in ("semantic_model", "exact", "batch_size", "max_length"):
            sampling.pop(key)
    if not any(s in ("kde", "iterative_kde") for s in strategies):
        sampling.pop("candidate_pool")
    sampling.pop("kde_reference")  # used when labelling
    sampling.pop("iterative_kde_accept")  # likewise
    shards = sampling.pop("shards", 1)  # a key only when > 1: unsharded candidates keep their keys
    params = {**sampling, "model": exp["base_model"], "seed": seed}
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


def check_sampling(graph: Graph, name: str, exp: dict) -> None:
    """A student's candidates fit the pool; the data job checks the same once it has made the tables."""
    sampling = exp["candidates"]
    if not (strategies(exp) and "student" in exp["models"]):
        return
    data = data_node(graph, exp["dataset"])
    check_pool(graph, name, sampling, data)
    graph.pool_checks.setdefault(data.key, []).append({"experiment": name, "candidates": {
        k: sampling[k] for k in ("strategies", "top_k", "candidate_pool", "pool", "exclude_eval_sentences")}})


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
