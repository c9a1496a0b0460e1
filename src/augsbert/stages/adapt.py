"""The `adapt` stage: masked-LM domain adaptation (thesis 4.3; job: augsbert.jobs.adapt)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params, TrainingParams, option, section_options
from .base import Stage
from .runs import inert_grouping_dropped, strategies, topic_prompt
from .sizes import pool_items, pool_sentences
from .training_options import group_by_length_option, megabatch_option, torch_compile_option


@dataclass(frozen=True, kw_only=True)
class AdaptOptions(Params):
    """The `adapt` section (its schema section is written from here: augsbert.face.schema)."""

    SECTION = "adapt"
    SECTION_DESCRIPTION = """
        MLM domain adaptation before the teacher (thesis 4.3.1, Table 6.10): masked-LM training of the base
        model on target pairs in the CBE layout ([CLS] a [SEP] [CLS] b [SEP]); which pairs: `pairs`."""

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
    batch_size: int = option(64, "Training batch size (thesis 64).", minimum=1)
    lr: float = option(3e-05, "AdamW learning rate (thesis 3e-5).", exclusiveMinimum=0)
    warmup_ratio: float = option(0.1, "Fraction of steps for linear warm-up.", minimum=0, maximum=1)
    weight_decay: float = option(0.01, "AdamW weight decay.", minimum=0)
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
    checkpoint_steps: int = option(500, "Resumable checkpoint interval (steps).", minimum=1)
    group_by_length: bool = group_by_length_option(True, "false = uniformly random batches.", what="MLM pairs")
    megabatch: int = megabatch_option(50)
    torch_compile: bool = torch_compile_option()


@dataclass(frozen=True, kw_only=True)
class AdaptParams(AdaptOptions, TrainingParams):
    """The `adapt` section (but `variant`, which says where the adapted model is used: not in the spec) and the
    pool. `epochs` replaces `max_steps` when set; `pairs: candidates` trains on the `candidates` input."""

    pool: Literal["train", "train+unlabeled", "unlabeled"]
    exclude_eval_sentences: bool


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
