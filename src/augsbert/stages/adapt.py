"""The `adapt` stage: masked-LM domain adaptation (thesis 4.3; job: augsbert.jobs.adapt)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from ..store.graph import Graph, Node, SeedPlan
from ..params import TrainingParams
from .base import Stage
from .runs import inert_grouping_dropped, strategies, topic_prompt
from .sizes import pool_items, pool_sentences


@dataclass(frozen=True, kw_only=True)
class AdaptParams(TrainingParams):
    """The `adapt` section (but `variant`, which says where the adapted model is used) and the pool.

    `epochs` replaces `max_steps` when set; `pairs: candidates` trains on the `candidates` input."""

    max_steps: int | None = None
    epochs: int | None = None
    pairs: Literal["bm25_random", "candidates"] = "bm25_random"
    mask_probability: float
    masking: Literal["uniform", "bert"]
    held_out: float
    pool: Literal["train", "train+unlabeled", "unlabeled"]
    exclude_eval_sentences: bool


ADAPT = Stage("adapt", 2, "masked-LM domain adaptation of the base model on target pairs in the CBE layout",
              "augsbert.jobs.adapt:run", section="adapt", runtime=("checkpoint_steps", "model"),
              roles=("adapt",), seconds_per_item=0.01, aliases=("adapt-mlm",), rule_alias="adapt_mlm",
              params=AdaptParams, plan=lambda seed_plan: plan_adapt(seed_plan), needs=("data", "candidates"),
              check=lambda graph, name, exp: check_adapt_pairs(name, exp, strategies(exp)),
              items=lambda plan, node: adapted_items(plan, node), checkpoint="MLM-adapted")
STAGES = (ADAPT,)


def check_adapt_pairs(name: str, exp: dict, strategies: list[str]) -> None:
    """`adapt.pairs: candidates` needs candidates the teacher labels as they are (no KDE thinning)."""
    if exp["adapt"]["variant"] == "augsbert" or exp["adapt"]["pairs"] != "candidates":
        return
    if not strategies:
        raise ConfigError(f"experiments.{name}.adapt.pairs: candidates, but candidates.strategies draws none; "
                          "name the strategies whose pairs MLM and the teacher share, or use pairs: bm25_random")
    thinned = [s for s in strategies if s in ("kde", "iterative_kde")]
    if thinned:
        raise ConfigError(f"experiments.{name}.adapt.pairs: candidates, but candidates.strategies has "
                          f"{', '.join(thinned)}, whose candidates the teacher's scores thin out after the "
                          "adaptation; use the other strategies or pairs: bm25_random")


def adapt(graph: Graph, exp: dict, dataset: str, seed: int, data: Node, prompt: str | None = None,
          candidates: Node | None = None) -> Node:
    """The adapt node; `candidates`: the node whose pairs it trains on (`adapt.pairs: candidates`)."""
    options = inert_grouping_dropped({k: v for k, v in exp["adapt"].items() if k != "variant"})
    # the options added later enter the key only when set: adaptations planned before them keep their keys
    if options.get("epochs") is None:
        options.pop("epochs", None)
    else:  # epochs decide the steps; max_steps is not read
        options.pop("max_steps", None)
    inputs = {"data": data}
    if options.get("pairs", "bm25_random") == "bm25_random":
        options.pop("pairs", None)
    else:
        inputs["candidates"] = candidates
    params = {**options, "model": exp["teacher"]["base_model"] or exp["base_model"],
              "pool": exp["candidates"]["pool"], "exclude_eval_sentences": exp["candidates"]["exclude_eval_sentences"],
              "seed": seed}
    if prompt:  # MLM on prompted pairs, prompt tokens never masked (thesis 4.4.3)
        params["topic_prompt"] = prompt
    return graph.add(ADAPT, f"{dataset}.mlm", params, inputs)


def plan_adapt(seed_plan: SeedPlan) -> dict[str, Node]:
    """MLM domain adaptation (`adapt.variant` other than augsbert); with `pairs: candidates` on the
    candidates the teacher will label (thesis 4.3.1)."""
    exp = seed_plan.config
    if exp["adapt"]["variant"] == "augsbert":
        return {}
    silver = seed_plan.roles.get("candidates") if exp["adapt"]["pairs"] == "candidates" else None
    return {"adapt": adapt(seed_plan.graph, exp, exp["dataset"], seed_plan.seed, seed_plan.roles["data"],
                           topic_prompt(exp), silver)}


def adapted_items(plan, node: Node) -> int:
    """Sentences MLM reads: its candidates' (top_k per strategy and pool sentence), else the target's pool."""
    inputs = dict(node.inputs)
    if "candidates" in inputs:
        candidates = plan.nodes[inputs["candidates"]]
        per_sentence = candidates.params["top_k"] * len(candidates.params["strategies"])
        return pool_sentences(plan.nodes[inputs["data"]]) * per_sentence
    return pool_items(plan, node)
