"""The sampling stages: `candidates` (silver candidate pairs) and, with `sampling.shards > 1`, `pool_index`
and `candidate_shard` (jobs: augsbert.jobs.candidates, augsbert.jobs.pool_index)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..store.graph import Graph, Node
from ..params import ModelParams, Params
from .base import Stage

Pool = Literal["train", "train+unlabeled", "unlabeled"]


@dataclass(frozen=True, kw_only=True)
class CandidatePool(Params):
    """KDE strategies: how many random / semantic-search partners per sentence they choose from."""

    random: int
    semantic_search: int


@dataclass(frozen=True, kw_only=True)
class CandidatesParams(ModelParams):
    """The `sampling` section as a candidates node keeps it: the encoder options only when a strategy
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
                   "target sentences", "augsbert.jobs.candidates:run", section="sampling", runtime=SAMPLING_RUNTIME,
                   roles=("candidates",), seconds_per_item=0.002, base_mem_mb=4000, mb_per_item=0.008,
                   aliases=("sample-pairs",), rule_alias="sample_pairs",
                   params=CandidatesParams)  # GPU only when a strategy encodes
# sampling.shards > 1 (README "Large pools"): fixed sizes, one shard of a 10-million sentence pool
POOL_INDEX = Stage("pool_index", 1, "sampling.shards > 1: write the sentence pool and, for semantic search, its "
                   "embeddings and faiss index once for every shard", "augsbert.jobs.pool_index:run",
                   section="sampling", runtime=SAMPLING_RUNTIME, roles=("pool_index",),
                   fixed_resources={"mem_mb": 32000, "runtime": 480, "gpu": 1}, aliases=("index-pool",),
                   rule_alias="index_pool", params=PoolIndexParams)
CANDIDATE_SHARD = Stage("candidate_shard", 1, "sampling.shards > 1: partners of one range of query sentences (merged "
                        "by candidates)", "augsbert.jobs.candidates:run_shard", section="sampling",
                        runtime=SAMPLING_RUNTIME,
                        roles=("candidate_shard_0",),  # --role candidate_shard_<n> for the n-th shard
                        gpu=False, fixed_resources={"mem_mb": 32000, "runtime": 480, "gpu": 0},
                        aliases=("sample-pairs-shard",), rule_alias="sample_pairs_shard",
                        params=CandidateShardParams)
STAGES = (CANDIDATES, POOL_INDEX, CANDIDATE_SHARD)


def check_pool(graph: Graph, name: str, sampling: dict, data: Node) -> None:
    """Fail while planning when `top_k` (or a KDE candidate count) exceeds the sentence pool.

    The pool is known only from the data, so this runs once the data artifact exists (any
    later plan: the next dry run, the CLI); before that the sampling stage checks the same
    thing before it encodes anything.
    """
    if not (Path(data.path) / "train.parquet").is_file():
        return
    from ..data import DataError
    from ..jobs.common import pool_too_small, target_pool

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
    sampling = dict(exp["sampling"])
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
    # sampling.shards > 1: one pool (+ semantic index) node, N shard nodes over query rows, the merge
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
