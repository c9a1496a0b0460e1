"""Trans-Encoder (Liu et al., ICLR 2022) as a loop of stages: the `trans_encoder` stage (job:
augsbert.jobs.trans_encoder) and the rounds of `teacher` / `student` nodes it feeds (`models: [trans_encoder]`).

Round 0 scores the unlabelled pairs with the start Bi-Encoder. Round r trains a cross model (a `teacher`
node with a `labels` input: it learns those scores, never gold, and keeps its last epoch), scores the pairs
with it, and trains a Bi-Encoder on them (a `student` node without gold, last epoch); its scores start round
r + 1. Every model is its own node whose inputs are the previous round's: `rounds: 3` after `rounds: 2`
plans round 3 and nothing else anew. Mutual distillation (`trans_encoder.mutual`) runs a second chain from
other bases; both chains learn the mean of the two models' scores in every round.

Roles per seed: `trans_encoder_<r>` (the Bi-Encoders' scores after round r, round 0 = the start model),
`te_cross_<r>`, `te_cross_scores_<r>`, `te_bi_<r>` and, mutual, `te_cross_<r>_mutual`, `te_bi_<r>_mutual`.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from typing import Literal

from ..errors import ConfigError
from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params, option
from .base import Stage
from .candidates import candidates_node
from .runs import wants
from .sizes import label_pairs
from .student import student
from .teacher import teacher


@dataclass(frozen=True, kw_only=True)
class ScheduleOverrides(Params):
    """The schedule options both model kinds of the rounds may set over their section (null: the section's),
    declared once; a mixin listed first among the bases, so its options come after the kind's own."""

    epochs: int | None = option(None, "Training epochs.", minimum=1)
    batch_size: int | None = option(None, "Training batch size.", minimum=1)
    lr: float | None = option(None, "AdamW learning rate.", exclusiveMinimum=0)
    warmup_ratio: float | None = option(None, "Fraction of steps for linear warm-up.", minimum=0, maximum=1)
    weight_decay: float | None = option(None, "AdamW weight decay.", minimum=0)
    group_by_length: bool | None = option(None, "Length-grouped batches.")
    megabatch: int | None = option(None, "Batches per mega-batch for group_by_length.", minimum=1)


@dataclass(frozen=True, kw_only=True)
class CrossModelOptions(Params):
    """The cross models' own options of `trans_encoder.cross` (before the schedule's)."""

    arch: Literal["ce", "cbe"] | None = option(None, "`ce` (the paper) or `cbe`.")
    base_model: str | None = option(None, "Model the cross models start from (null = `teacher.base_model` / "
                                    "`base_model`).")
    max_length: int | None = option(None, "Maximum tokens of a pair.", minimum=8)
    symmetric: bool | None = option(None, "Train on (a, b) and (b, a) (the paper: yes).")
    loss: Literal["bce", "mse"] | None = option(None, "CE loss (the paper: BCE).")
    activation: Literal["sigmoid", "tanh", "identity"] | None = option(None, "CE activation when scoring.")


@dataclass(frozen=True, kw_only=True)
class CrossOptions(ScheduleOverrides, CrossModelOptions):
    """`trans_encoder.cross`: the cross models' settings over the `teacher` section's."""


@dataclass(frozen=True, kw_only=True)
class BiModelOptions(Params):
    """The Bi-Encoders' own options of `trans_encoder.bi` (before the schedule's)."""

    base_model: str | None = option(None, "Model the Bi-Encoders start from and round 0 scores with (null = "
                                    "`student.base_model` / `base_model`).")
    max_length: int | None = option(None, "Maximum tokens per sentence.", minimum=8)


@dataclass(frozen=True, kw_only=True)
class BiOptions(ScheduleOverrides, BiModelOptions):
    """`trans_encoder.bi`: the Bi-Encoders' settings over the `student` section's."""


@dataclass(frozen=True, kw_only=True)
class MutualOptions(Params):
    """`trans_encoder.mutual`: the second chain's starts."""

    base_model: str = option(MISSING, """
        Start of the second Bi-Encoder: a model reference, or `pretrained`
        (this experiment's `pretrain` encoder).""")
    cross_base_model: str | None = option(None, """
        Start of the second cross model (null = the same as `base_model`;
        the paper starts each cross model from the language model under its
        Bi-Encoder, e.g. roberta-base under unsup-SimCSE-RoBERTa).""")


@dataclass(frozen=True, kw_only=True)
class TransEncoderOptions(Params):
    """The `trans_encoder` section (its schema section is written from here: augsbert.reference.schema)."""

    SECTION = "trans_encoder"
    SECTION_DESCRIPTION = """
          Trans-Encoder (Liu et al., ICLR 2022; `models: [trans_encoder]`):
          unsupervised sentence-pair modelling by self-distillation. Round 0
          scores the unlabelled pairs with the start Bi-Encoder (the student's
          start: `student.base_model` / `base_model`, or the `pretrain`
          encoder with `student.base: pretrained`); each round r then trains a
          pair model (`cross.arch`: CE or CBE, from the teacher's start) on the
          Bi-Encoder's scores of the pairs, scores them with it, and trains a
          Bi-Encoder (from its start again) on those scores. No gold label
          reaches any of these models: they keep their last epoch (no dev
          selection) and the pairs' scores are dropped. Every model of every
          round is an artifact, so adding a round trains only that round. The
          cross models take the `teacher` section and the Bi-Encoders the
          `student` section, each with `cross` / `bi` written over it.
          docs/methods/teachers.md lists the paper's settings and ours."""

    rounds: int = option(3, "Rounds of bi-to-cross then cross-to-bi distillation (the paper's cycles; it runs 3).",
                         minimum=1)
    pairs: Literal["train", "candidates"] = option("train", """
        The unlabelled pairs: `train`, the target's train pairs with their
        scores dropped (the paper's setting: a task's sentence pairs without
        labels), or `candidates`, the pairs the sampling stage draws
        (`candidates.strategies`, from `candidates.pool`).""")
    max_pairs: int | None = option(None, """
        Use a seeded random subset of at most this many of those pairs (the
        paper's `num_training_pairs`; numpy PCG64 seeded with the run's
        seed). null = all.""", minimum=2)
    cross: CrossOptions = option(CrossOptions, """
        The cross models' settings that differ from the `teacher` section
        (null, the default of each, = the section's value; the paper: a CE, BCE loss, 1 epoch, batch 32, lr 2e-5, 10 %
        warm-up, max length 64). Their Bi-Encoder targets are cosines:
        with `arch: ce` and `loss: bce` they are clipped to [0, 1] (BCE
        needs probabilities; negative cosines would make its loss
        unbounded below).""")
    bi: BiOptions = option(BiOptions, """
        The Bi-Encoders' settings that differ from the `student` section
        (null, the default of each, = the section's value; the paper: CosineSimilarityLoss, i.e. MSE of the cosine against
        the cross model's score, 10 epochs, batch 128, lr 5e-5, no warm-up,
        max length 32).""")
    mutual: MutualOptions | None = option(None, """
        Mutual distillation (the paper's 5.3): a second Bi-Encoder and cross
        model from other bases run beside the first, and in every round each
        model learns the mean of the two models' scores of the other kind.
        null = self-distillation only.""")
    batch_size: int = option(64, "Batch size when scoring the pairs (not part of any key).", minimum=1)


@dataclass(frozen=True, kw_only=True)
class TransEncoderParams(TransEncoderOptions):
    """Which pairs (`source`, at most `max_pairs` of them drawn with `seed`) and how many scorers: scorer k is
    the input `scorer_<k>` (a trained artifact) or else a model reference (`model`, `mutual_model`: round 0),
    scored as a Bi-Encoder with `max_length`; several scorers' scores are averaged, then clipped to [0, 1]
    with `clip` (the targets of a BCE cross model). Of the section a spec holds `max_pairs` and `batch_size`
    (the other options plan the rounds' nodes; absent from a spec, they read as their defaults)."""

    source: Literal["train", "candidates"]
    scorers: int
    seed: int
    max_length: int
    clip: bool = False
    model: str | None = None
    mutual_model: str | None = None
    model_identity: dict[str, str] = field(default_factory=dict)
    hub_revisions: dict[str, str] = field(default_factory=dict)


PAIR_SCORES = Stage("trans_encoder", 1, "score unlabelled pairs with one or two models, averaged (Trans-Encoder's "
                    "pseudo-labels)", "augsbert.jobs.trans_encoder:run", section="trans_encoder",
                    runtime=("batch_size", "model", "mutual_model"), roles=("trans_encoder_0",), seconds_per_item=0.004,
                    base_mem_mb=8000, mb_per_item=0.002, params=TransEncoderParams,
                    plan=lambda seed_plan: plan_trans_encoder(seed_plan), needs=("data", "candidates", "pretrained"),
                    check=lambda graph, name, exp: check_pairs(name, exp) if "trans_encoder" in exp["models"] else None,
                    items=lambda plan, node: label_pairs(plan, node.key), estimate="score")
STAGES = (PAIR_SCORES,)

SCORER_INPUT = "scorer_{}"
NO_GOLD = {"seed_optimization": {"trials": 0, "fraction": 0.3}, "early_stopping_patience": 0}  # both read dev gold
PRETRAINED = "pretrained"


@dataclass(frozen=True)
class Chain:
    """Where one chain's models start: a model reference or a planned node (`pretrain`), for each kind."""

    bi: str | Node
    cross: str | Node
    suffix: str  # of its roles: "" (the first chain) or "_mutual"


def chains(name: str, exp: dict, pretrained: Node | None) -> list[Chain]:
    te = exp["trans_encoder"]

    def start(ref: str | None, use_pretrained: bool, what: str) -> str | Node:
        if use_pretrained or ref == PRETRAINED:
            if pretrained is None:
                raise ConfigError(f"experiments.{name}.{what}: starts from the `pretrain` encoder, but "
                                  "`pretrain.objective` is none")
            return pretrained
        return ref

    first = Chain(start(te["bi"].get("base_model") or exp["student"]["base_model"] or exp["base_model"],
                        exp["student"]["base"] == PRETRAINED and not te["bi"].get("base_model"), "student.base"),
                  start(te["cross"].get("base_model") or exp["teacher"]["base_model"] or exp["base_model"],
                        exp["teacher"]["base"] == PRETRAINED and not te["cross"].get("base_model"), "teacher.base"),
                  "")
    if not te["mutual"]:
        return [first]
    mutual = te["mutual"]
    second = Chain(start(mutual["base_model"], False, "trans_encoder.mutual.base_model"),
                   start(mutual["cross_base_model"] or mutual["base_model"], False,
                         "trans_encoder.mutual.cross_base_model"), "_mutual")
    if (second.bi, second.cross) == (first.bi, first.cross):
        raise ConfigError(f"experiments.{name}.trans_encoder.mutual: the same bases as the first chain "
                          f"({first.bi if isinstance(first.bi, str) else 'pretrained'}); mutual distillation needs "
                          "models of other bases (the paper: BERT and RoBERTa)")
    return [first, second]


def _section(exp: dict, kind: str, overrides: dict, start: str | Node) -> dict:
    """`exp` with its teacher (cross) or student (bi) section as a Trans-Encoder model of `start` trains."""
    section = {**exp[kind], **{k: v for k, v in overrides.items() if k != "base_model" and v is not None}, **NO_GOLD,
               "base": "base_model"}  # null overrides: the section's value
    if kind == "student":
        section["use_gold_labels"] = False
    section["base_model"] = start if isinstance(start, str) else None
    return {**exp, kind: section}


def _init(start: str | Node) -> dict[str, Node]:
    return {} if isinstance(start, str) else {"init": start}


def scores_node(graph: Graph, exp: dict, name: str, seed: int, pairs: Node, scorers: list[str | Node],
                clip: bool, max_length: int) -> Node:
    te = exp["trans_encoder"]
    params = {"source": te["pairs"], "scorers": len(scorers), "seed": seed, "max_length": max_length,
              "batch_size": te["batch_size"]}
    if clip:
        params["clip"] = True
    if te["max_pairs"] is not None:
        params["max_pairs"] = te["max_pairs"]
    inputs = {"pairs": pairs}
    for k, scorer in enumerate(scorers):
        if isinstance(scorer, str):  # round 0: a model reference, entering the key by identity
            params["model" if k == 0 else "mutual_model"] = scorer
        else:
            inputs[SCORER_INPUT.format(k)] = scorer
    return graph.add(PAIR_SCORES, name, params, inputs)


def rounds(graph: Graph, name: str, exp: dict, dataset: str, seed: int, data: Node, pairs: Node,
                  pretrained: Node | None) -> dict[str, Node]:
    """The nodes of every round for one seed, by role."""
    te = exp["trans_encoder"]
    starts = chains(name, exp, pretrained)
    cross_arch = te["cross"].get("arch") or exp["teacher"]["arch"]
    cross_loss = te["cross"].get("loss") or exp["teacher"]["loss"]
    clip = cross_arch == "ce" and cross_loss == "bce"  # BCE targets are probabilities
    bi_length = te["bi"].get("max_length") or exp["student"]["max_length"]
    roles: dict[str, Node] = {}
    scores = roles["trans_encoder_0"] = scores_node(graph, exp, f"{dataset}.te0.bi", seed, pairs,
                                                [c.bi for c in starts], clip, bi_length)
    for r in range(1, te["rounds"] + 1):
        crosses = [teacher(graph, _section(exp, "teacher", te["cross"], c.cross), f"{dataset}.te{r}", seed,
                           {"data": data, "labels": scores, **_init(c.cross)}, selection="last") for c in starts]
        cross_scores = roles[f"te_cross_scores_{r}"] = scores_node(graph, exp, f"{dataset}.te{r}.cross", seed, pairs,
                                                                   crosses, False, bi_length)
        bis = [student(graph, _section(exp, "student", te["bi"], c.bi), f"{dataset}.te{r}", seed,
                       {"data": data, "labels": cross_scores, **_init(c.bi)}, "last") for c in starts]
        for chain, cross, bi in zip(starts, crosses, bis):
            roles[f"te_cross_{r}{chain.suffix}"] = cross
            roles[f"te_bi_{r}{chain.suffix}"] = bi
        if r < te["rounds"]:
            scores = roles[f"trans_encoder_{r}"] = scores_node(graph, exp, f"{dataset}.te{r}.bi", seed, pairs, bis, clip,
                                                           bi_length)
    return roles


def check_pairs(name: str, exp: dict) -> None:
    """`pairs: candidates` must come from a strategy that uses no gold label (the fine-tuned semantic-search
    encoder learned the gold)."""
    candidate_options = exp["candidates"]
    strategies = [s for s in candidate_options["strategies"] if s != "none"]
    if exp["trans_encoder"]["pairs"] != "candidates":
        return
    if not strategies:
        raise ConfigError(f"experiments.{name}.trans_encoder.pairs: candidates, but candidates.strategies is [none]")
    encodes = any(s.startswith("semantic_search") or s == "iterative_kde" for s in strategies)
    if encodes and candidate_options["semantic_model"] == "finetuned":
        raise ConfigError(f"experiments.{name}.trans_encoder.pairs: candidates from semantic search with "
                          "candidates.semantic_model: finetuned, an encoder trained on gold; Trans-Encoder uses no "
                          "gold label: choose pretrained, pretrained_stage or a model")


def plan_trans_encoder(seed_plan: SeedPlan) -> dict[str, Node]:
    """`models: [trans_encoder]`: every round's nodes, on the target's train pairs (unlabelled) or on the
    sampled candidates (`trans_encoder.pairs: candidates`)."""
    if not wants(seed_plan, "trans_encoder"):
        return {}
    exp, roles = seed_plan.config, seed_plan.roles
    pairs = roles["data"]
    if exp["trans_encoder"]["pairs"] == "candidates":
        pairs = roles.get("candidates") or candidates_node(seed_plan)
    return rounds(seed_plan.graph, seed_plan.experiment, exp, exp["dataset"], seed_plan.seed, roles["data"],
                         pairs, roles.get("pretrained"))
