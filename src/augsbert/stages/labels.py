"""The labelling stages: `labels` (the teacher's silver scores) and, with `candidates.shards > 1`, `label_shard`
(jobs: augsbert.jobs.labels, augsbert.jobs.label_shard)."""

from __future__ import annotations

from typing import Literal

from dataclasses import dataclass

from ..errors import ConfigError
from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params, option, section_options
from .base import Stage
from .runs import gold, strategies, topic_prompt, transfer, wants
from .sizes import label_pairs
from .teacher import teacher_node
from .teacher_ensemble import member_inputs


@dataclass(frozen=True, kw_only=True)
class LabelsOptions(Params):
    """The `labels` section (its schema section is written from here: augsbert.reference.schema)."""

    SECTION = "labels"
    SECTION_DESCRIPTION = "How the teacher labels pairs for the student."

    relabel_gold: bool = option(True, """
        Label regularisation: the teacher re-scores its gold train pairs
        (the source's in domain transfer) and the student learns those
        scores. The thesis states it for its semi-supervised AugSBERT rows
        (5.5: "The train datasets are reannotated") and its distillation
        rows (5.2.2); its unsupervised (5.4.3) and topic (5.6.1) students
        learn the annotated silver pairs alone (false in those grids). See
        `student.use_gold_labels` for how the two combine.""")
    batch_size: int = option(64, "Teacher scoring batch size.", minimum=1)


@dataclass(frozen=True, kw_only=True)
class LabelsParams(LabelsOptions):
    """The `labels` section, the KDE reference of `candidates`, and the shard layout (`candidates.shards`)."""

    kde_reference: Literal["teacher", "gold"]
    seed: int
    iterative_kde_accept: Literal["at_least", "greater"] = "at_least"  # candidates.iterative_kde_accept
    topic_prompt: str | None = None
    shards: int = 1


@dataclass(frozen=True, kw_only=True)
class LabelShardParams(Params):
    batch_size: int
    shards: int
    shard: int
    topic_prompt: str | None = None


LABELS = Stage("labels", 3, "score pairs with the teacher (silver labels)", "augsbert.jobs.labels:run",
               section="labels", runtime=("batch_size",), roles=("labels",), seconds_per_item=0.004,
               base_mem_mb=8000, mb_per_item=0.002, model_input="teacher", aliases=("label-pairs",),
               rule_alias="label_pairs", params=LabelsParams,
               figures={"score_densities.png": "silver_densities"}, statistics={"sampling_stats.json": "silver"},
               plan=lambda seed_plan: plan_labels(seed_plan),
               needs=("data", "source_data", "gold_subset", "teacher", "candidates"),
               items=lambda plan, node: label_pairs(plan, node.key), holds=("pairs.parquet", "sampling_stats.json"),
               estimate="score")
LABEL_SHARD = Stage("label_shard", 1, "candidates.shards > 1: teacher scores of one row range of the candidates, "
                    "streamed from parquet (merged by labels)", "augsbert.jobs.label_shard:run", section="labels",
                    runtime=("batch_size",), roles=("label_shard_0",), model_input="teacher",
                    fixed_resources={"mem_mb": 8000, "runtime": 720, "gpu": 1}, aliases=("label-pairs-shard",),
                    rule_alias="label_pairs_shard", params=LabelShardParams)
STAGES = (LABELS, LABEL_SHARD)


def labels(graph: Graph, exp: dict, dataset: str, seed: int, inputs: dict[str, Node], roles: dict[str, Node],
           data: Node, prompt: str | None = None) -> Node:
    """The labels node of `inputs` (teacher, gold, candidates, and an ensemble teacher's members `member_<k>`);
    with shards, its shard nodes go into `roles` too."""
    candidate_options = exp["candidates"]
    inputs = dict(inputs)
    params = {**section_options(LabelsOptions, exp["labels"]), "kde_reference": candidate_options["kde_reference"],
              "seed": seed}
    if candidate_options["iterative_kde_accept"] != "at_least" and "iterative_kde" in candidate_options["strategies"]:
        params["iterative_kde_accept"] = candidate_options["iterative_kde_accept"]  # keyed only when it can act
    if prompt:  # the teacher scores prompted pairs (prompted and hidden); topics of the target's texts
        params["topic_prompt"] = prompt
        inputs["topics"] = data
    shards = candidate_options["shards"]
    if "candidates" in inputs and shards > 1:  # N label_shard nodes score row ranges of the candidates; labels merges
        candidates = dict(inputs["candidates"].inputs)
        roles["pool_index"] = graph.nodes[candidates["index"]]
        for i in range(shards):
            roles[f"candidate_shard_{i}"] = graph.nodes[candidates[f"shard_{i}"]]
            roles[f"label_shard_{i}"] = inputs[f"label_shard_{i}"] = graph.add(
                LABEL_SHARD, f"{dataset}.{exp['teacher']['arch']}.{i + 1}of{shards}",
                {**{k: params[k] for k in ("batch_size", "topic_prompt") if k in params}, "shards": shards, "shard": i},
                {k: v for k, v in inputs.items()
                 if k in ("teacher", "candidates", "topics") or k.startswith("member_")})
        params["shards"] = shards
    return graph.add(LABELS, f"{dataset}.{exp['teacher']['arch']}", params, inputs)


def plan_labels(seed_plan: SeedPlan) -> dict[str, Node]:
    """A student's silver labels: the teacher scores the candidates and (re-labelling, KDE reference) the gold;
    with `candidates.shards` > 1 the shard nodes are roles too."""
    exp, name, roles = seed_plan.config, seed_plan.experiment, seed_plan.roles
    if not wants(seed_plan, "student"):
        return {}
    few_labels = exp["gold_fraction"] < 1
    if "target_pairs" in strategies(exp) and not (transfer(exp) or few_labels):
        raise ConfigError(f"experiments.{name}.candidates.strategies: target_pairs is for domain transfer "
                          "(`source` set) or few labels (`gold_fraction` < 1: the train pairs left "
                          "unlabelled); in-domain, labels.relabel_gold re-labels the train pairs")
    if not (strategies(exp) or exp["labels"]["relabel_gold"]):
        raise ConfigError(f"experiments.{name}: the student gets no teacher labels (candidates.strategies "
                          "is [none] and labels.relabel_gold is false); it would just be the lower bound")
    teacher, members = teacher_node(seed_plan)
    inputs = {"teacher": teacher, "gold": gold(seed_plan), **member_inputs(members)}
    if strategies(exp):
        inputs["candidates"] = roles["candidates"]
    planned: dict[str, Node] = {}
    planned["labels"] = labels(seed_plan.graph, exp, exp["dataset"], seed_plan.seed, inputs, planned, roles["data"],
                               topic_prompt(exp))
    return planned
