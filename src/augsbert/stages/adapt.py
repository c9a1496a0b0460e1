"""The `adapt` stage: masked-LM domain adaptation (thesis 4.3; job: augsbert.jobs.adapt)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params, option, restate, section_options, slice_of
from .base import Stage
from .candidates import CandidatesOptions
from .runs import inert_grouping_dropped, strategies, topic_prompt
from .sizes import pool_items, pool_sentences
from .training_options import Prompted, Trained, TrainingOptions, group_by_length_words, torch_compile_option


@dataclass(frozen=True, kw_only=True)
class AdaptHead(Params):
    """The head of the `adapt` section: where the adapted model is used, on which pairs, for how long."""

    variant: Literal["augsbert", "domain", "full_domain"] = option("augsbert", """
        `augsbert`: no adaptation; `domain`: the teacher starts from the adapted checkpoint, the student
        from the base model; `full_domain`: the student starts from the adapted checkpoint too.""")
    pairs: Literal["bm25_random", "candidates"] = option("bm25_random", """
        The pairs MLM trains on. `bm25_random`: BM25 top-1 and one random partner per sentence of
        `candidates.pool` (our construction; no source names it). `candidates`: the candidate pairs of
        `candidates.strategies`, the very pairs the teacher then labels (thesis 4.3.1: "the sentence
        pairs annotated by the Cross-Bi Encoder are the same as those used for MLM pre-training"); the
        candidates stage then runs before the adaptation. Not with the KDE strategies (their candidates
        are thinned by teacher score). Enters the artifact key only when `candidates`.""", keyed_default=False)
    max_steps: int = option(12500, "Optimizer steps (thesis 5.4.3: 12.5K); unused when `epochs` is set.", minimum=1)
    epochs: int | None = option(None, """
        Passes over the MLM training pairs instead of `max_steps` (steps = epochs × ⌈pairs /
        batch_size⌉, counted when the job has its pairs; thesis 5.6.1 states 5 epochs, 5.4.3 12.5K
        steps). null = `max_steps`. Enters the artifact key only when set (then `max_steps` does not).""", minimum=1,
        keyed_default=False)


@dataclass(frozen=True, kw_only=True)
class MaskingOptions(Params):
    """What the masked-LM objective of the `adapt` section reads (after the shared optimiser options)."""

    max_length: int = option(256, "Maximum tokens of a pair.", minimum=8)
    mask_probability: float = option(0.2, """
        Probability that a non-special token is chosen for masking. The thesis states no rate; 0.2 is
        our choice (BERT's 0.15 is the usual alternative).""", exclusiveMinimum=0, exclusiveMaximum=1)
    masking: Literal["uniform", "bert"] = option("uniform", """
        `uniform`: every chosen token becomes the mask token; `bert`: 80/10/10 mask/random/keep (BERT's
        scheme). The thesis states no scheme; `uniform` is our choice.""")
    held_out: float = option(0.05, """
        Fraction of the pairs kept out of training to measure MLM loss and masked-token accuracy.""",
        exclusiveMinimum=0, exclusiveMaximum=1)


@dataclass(frozen=True, kw_only=True)
class AdaptOptions(slice_of(TrainingOptions, "checkpoint_steps", "group_by_length", "megabatch"), MaskingOptions,
                   slice_of(TrainingOptions, "batch_size", "lr", "warmup_ratio", "weight_decay"), AdaptHead):
    """The `adapt` section (its schema section is written from here: augsbert.reference.schema): its head, the shared
    optimiser options (augsbert.stages.training_options) with the thesis' batch and rate, the masked-LM options,
    the shared checkpoint interval and length grouping (on, as the MLM pairs' lengths vary)."""

    SECTION = "adapt"
    SECTION_DESCRIPTION = """
        MLM domain adaptation before the teacher (thesis 4.3.1, Table 6.10): masked-LM training of the base
        model on target pairs in the CBE layout ([CLS] a [SEP] [CLS] b [SEP]); which pairs: `pairs`."""

    batch_size = restate(64, "Training batch size (thesis 64).")
    lr = restate(3e-05, "AdamW learning rate (thesis 3e-5).")
    warmup_ratio = restate(description="Fraction of steps for linear warm-up.")
    checkpoint_steps = restate(description="Resumable checkpoint interval (steps).")
    group_by_length = restate(True, group_by_length_words("false = uniformly random batches.", what="MLM pairs"))
    torch_compile: bool = torch_compile_option()


# what the adaptation reads of the `candidates` section: its sentence pool
CandidatePool = slice_of(CandidatesOptions, "pool", "exclude_eval_sentences")


@dataclass(frozen=True, kw_only=True)
class AdaptParams(slice_of(AdaptOptions, but=("variant",)), CandidatePool, Prompted, Trained):
    """The `adapt` section (but `variant`, which says where the adapted model is used: not in the spec) and the
    pool. `epochs` replaces `max_steps` when set; `pairs: candidates` trains on the `candidates` input."""


ADAPT = Stage("adapt", 2, "masked-LM domain adaptation of the base model on target pairs in the CBE layout",
              "augsbert.jobs.adapt:run", section="adapt", runtime=("checkpoint_steps", "model"),
              roles=("adapt",), seconds_per_item=0.01, trains=True, aliases=("adapt-mlm",), rule_alias="adapt_mlm",
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
    # the options added later (keyed_default=False) enter the key only when set: adaptations planned before them
    # keep their keys
    options = inert_grouping_dropped(section_options(AdaptOptions, exp["adapt"]))
    del options["variant"]
    if "epochs" in options:  # epochs decide the steps; max_steps is not read
        options.pop("max_steps", None)
    inputs = {"data": data}
    if "pairs" in options:
        inputs["candidates"] = candidates
    params = {**options, "model": exp["teacher"]["base_model"] or exp["base_model"],
              **section_options(CandidatePool, exp["candidates"]), "seed": seed}
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
