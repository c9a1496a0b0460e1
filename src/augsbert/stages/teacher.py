"""The `teacher` stage: the pair model (Cross-Encoder or Cross-Bi-Encoder) trained on gold, or on a
Trans-Encoder round's scores (job: augsbert.jobs.teacher). With `teacher.ensemble` each member is a teacher node
and the experiment's teacher is their `teacher_ensemble` node."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..errors import ConfigError
from ..params import Params, option, options_schema, override_schema, restate, slice_of
from ..planning.graph import Graph, Node, SeedPlan
from .base import MODEL_SETTINGS, Row, Stage
from .data import pairs_have_topics
from .runs import from_adapted, inert_grouping_dropped, source, topic_prompt, trained_on, wants
from .sizes import trained_items
from .teacher_ensemble import MEMBER_ROLE, check_members, member_config, member_seed, teacher_ensemble
from .training_options import Prompted, Trained, TrainingOptions, torch_compile_option


@dataclass(frozen=True, kw_only=True)
class TeacherModelOptions(Params):
    """The head of the `teacher` section: which pair model, from what, on what (before the schedule)."""

    arch: Literal["ce", "cbe"] = option("cbe", """
        `ce` Cross-Encoder ([CLS] a [SEP] b [SEP] -> logit) or `cbe` Cross-Bi-Encoder (cosine of two segment
        means).""")
    base_model: str | None = option(None, "Model the teacher starts from; null = the experiment's `base_model`.")
    pretrained: str | None = option(None, """
        A Cross-Encoder used as it is, no training and no gold (GPL: cross-encoder/ms-marco-MiniLM-L-6-v2): it
        scores the mined (query, positive) and (query, negative) pairs of a `gpl` model, whose targets are the
        margins. Read only by `models: [gpl]`. `trained`: the experiment's own trained Cross-Encoder (`teacher` in
        `models`, `arch: ce`): it learnt the target's gold, so the model is not label-free (the offline
        `demo_gpl`, which has no pretrained Cross-Encoder).""")
    score_scale: Literal["logits", "sigmoid"] = option("logits", """
        The scale of `pretrained`'s scores: raw logits (what GPL's margins are: its Cross-Encoder's configured
        activation is the identity) or through a sigmoid (0-1).""")
    base: Literal["base_model", "pretrained"] = option("base_model", """
        `pretrained`: start from the encoder of this experiment's `pretrain` stage instead of `base_model` (needs
        `pretrain.objective`).""")
    max_length: int = option(512, "Maximum tokens of a whole pair (truncation shortens the longer text first).",
                             minimum=8)
    symmetric: bool = option(True, "Train on both (a, b) and (b, a) of every gold pair.")
    loss: Literal["bce", "mse"] = option("bce", """
        Cross-Encoder loss against [0, 1] labels (BCE with logits as in the references, or MSE after sigmoid).
        The CBE always uses MSE.""")
    activation: Literal["sigmoid", "tanh", "identity"] = option("sigmoid", """
        Cross-Encoder activation at inference (thesis Table 6.2); the CBE's cosine needs none.""")
    selection: Literal["dev", "last"] = option("dev", """
        Which checkpoint is the teacher: `dev` (thesis 5.1) the pass over the training pairs with the best dev
        Spearman among those that end after warm-up (a pass inside warm-up, where a step budget on few pairs ends
        several, is never kept), or `last` the model after its last step, reading no dev label (with a `max_steps`
        budget: every teacher of an active-learning curve the same number of steps, docs/methods/active.md). A
        Trans-Encoder round's cross model is always `last` (it must not see a gold label).""")


@dataclass(frozen=True, kw_only=True)
class TeacherOptions(TrainingOptions, TeacherModelOptions):
    """The `teacher` section (its schema section is written from here: augsbert.reference.schema): the head, the
    shared schedule (augsbert.stages.training_options), the ensemble."""

    SECTION = "teacher"
    SECTION_DESCRIPTION = "The pair model trained on gold that labels pairs for the student."

    max_steps = restate(None, """
        Train for this many optimizer steps instead of `epochs`, as many passes over the pairs as that takes: a
        budget that does not grow with the number of labels (the round protocol of active learning,
        docs/methods/active.md). Warm-up is `warmup_ratio` of these steps; with `selection: dev` dev Spearman is
        taken after each full pass and at the last step, the best after warm-up kept. 0 = no training step: the
        base model is the teacher as it is (a CBE the cosine of its segment means, a Cross-Encoder its freshly
        initialised, seeded head), scored on the test split; no dev label is read (the untrained line of an
        active-learning curve). null = `epochs` decides. Set, it enters the artifact key and `epochs` leaves
        it.""", minimum=0)

    ensemble: list[dict[str, Any]] = option([], """
        Teacher ensemble: a list of at least two members, each a set of teacher options written over this
        section (e.g. `[{}, {seed: 1}, {seed: 2}]`: three CBEs that differ by seed; `[{arch: cbe}, {arch: ce}]`).
        Every member is its own teacher artifact (a member equal to the single teacher is that very artifact, so
        adding a member trains one model); their scores of a pair are combined as `combine` says, for the test
        split (the `teacher` row) and for labelling. The results show each member (`teacher_member_<k>`) and the
        ensemble. Empty = one teacher (keys unchanged).""", items={"$ref": "#/$defs/teacher_member"})
    combine: Literal["mean", "zscore"] = option("zscore", """
        How an ensemble combines its members' scores of a pair: `mean` of the raw scores, or `zscore` (our
        default): each member's score standardised by the mean and standard deviation of that member's scores of
        the gold train pairs, averaged, and mapped back to the gold scale with the gold train scores' mean and
        standard deviation (members on different scales, a CE's sigmoid and a CBE's cosine, then weigh alike).
        Read only with `ensemble`.""")
    torch_compile: bool = torch_compile_option()


@dataclass(frozen=True, kw_only=True)
class TeacherMemberOptions(Params):
    """One member of `teacher.ensemble` (the schema's `$defs.teacher_member`, written from here by
    augsbert.reference.schema): `seed`, and the `teacher` options in `OVERRIDES`, each null (= the section's value) or
    a value the section's own schema allows (its types, choices and bounds: written once, in TeacherOptions).
    augsbert.stages.teacher_ensemble.member_config writes a member over the section."""

    OVERRIDES: ClassVar[tuple[str, ...]] = (
        "arch", "base_model", "base", "max_length", "symmetric", "loss", "activation", "epochs", "batch_size", "lr",
        "warmup_ratio", "weight_decay", "freeze_embeddings", "group_by_length", "megabatch")

    seed: int = option(0, """
        0 (or left out) = the run's seed; k > 0 = a further seed, run seed x 1000 + k, so members of different
        runs never share an artifact.""", minimum=0, maximum=999)
    bag: float | None = option(None, """
        Bagging: the member learns its own seeded draw of this fraction of the gold train pairs (round(bag x n),
        at least 2, without replacement; numpy PCG64 seeded with the member's seed), so members that share an
        encoder and a schedule still disagree (an active-learning committee: Althammer et al. 2023 train each
        member on 80 %, `bag: 0.8`). null = every gold pair (keys unchanged).""", exclusiveMinimum=0, maximum=1)

    @classmethod
    def schema_properties(cls) -> dict[str, dict]:
        teacher = options_schema(TeacherOptions, "teacher")
        return {**super().schema_properties(),
                **{name: override_schema(teacher[name], f"See `teacher.{name}`.") for name in cls.OVERRIDES}}


# the `teacher` options that plan nodes (where the teacher starts, GPL's pretrained Cross-Encoder, an ensemble's
# members) and never reach a teacher spec
PLANNED = ("base_model", "pretrained", "score_scale", "base", "ensemble", "combine")


@dataclass(frozen=True, kw_only=True)
class TeacherParams(slice_of(TeacherOptions, but=PLANNED), Prompted, Trained):
    """A teacher spec: the `teacher` section but its `PLANNED` options, as the planner passes it (a step budget
    leaves `epochs` out, a CBE the Cross-Encoder's `loss` and `activation`: they read as their defaults, unread),
    and what it adds (`model`, `seed`, the topic delimiter). `freeze_embeddings` is resolved (the option's null:
    from an adapted checkpoint).

    `selection: last` (keyed): keep the last step's model, read no dev split (the option; a Trans-Encoder cross
    model always, which must not see a gold label); `selection: dev` is keyed only where a pass over the pairs can
    end inside warm-up (`dev_may_meet_warmup`), the one case where dev selection's rule (the best pass after
    warm-up) can keep another model than the rule before it (the best pass): those keys are new, so no teacher
    trained before the rule is taken for one trained under it. A teacher with a `labels` input learns those
    scores, not the gold.

    `max_steps: 0`: no training step (the options that only shape training leave the key: `UNTRAINED_DROPS`).
    `bag` (an ensemble member's option, keyed only when set): the member learns its seeded draw of that share of
    the gold train pairs. `test_pairs` (`active.test_pairs`, keyed only when set, on an active-learning round's
    teacher): the test split is scored on a seeded draw of at most that many pairs (augsbert.data.pool.test_draw).
    """

    freeze_embeddings: bool = field()  # resolved by the planner (null in the config: from an adapted checkpoint)
    bag: float | None = None
    test_pairs: int | None = None


TEACHER = Stage("teacher", 3, "train the teacher (Cross-Encoder or Cross-Bi-Encoder) on the gold train split",
                "augsbert.jobs.teacher:run", section="teacher", runtime=MODEL_SETTINGS, roles=("teacher",),
                data_parallel=True, seconds_per_item=0.02, mb_per_item=0.002, trains=True, aliases=("train-teacher",),
                rule_alias="train_teacher", params=TeacherParams,
                plan=lambda seed_plan: plan_teacher(seed_plan), needs=("data", "source_data", "gold_subset", "adapt",
                                                                        "pretrained"),
                items=trained_items, rows={"teacher": Row(40, "{arch} (upper bound)", "teacher trained on gold (Cross-Encoder / "
                                                                  "Cross-Bi-Encoder, upper bound)", bi_encoder=False,
                                                          curves=True, export="teacher (trained on gold)")},
                row_arch=lambda plan, node: node.params["arch"].upper(), estimate="train")
STAGES = (TEACHER,)


# what only shapes training: a teacher of `max_steps: 0` is the base model whatever they say
UNTRAINED_DROPS = ("batch_size", "lr", "warmup_ratio", "weight_decay", "seed_optimization",
                   "group_by_length", "megabatch", "early_stopping_patience", "symmetric", "loss",
                   "selection", "torch_compile", "bag")


def dev_may_meet_warmup(options: dict) -> bool:
    """Whether a teacher of these options may end a pass over its pairs inside warm-up, where dev selection keeps
    only passes after warm-up: with `epochs` E (pass p ends at step p x s of E x s) exactly when warmup_ratio x E >
    1; with a budget of M steps (passes of s steps, s unknown while planning: the number of pairs) when the warm-up
    of ceil(warmup_ratio x M) steps can hold one (2 steps or more); never without training (`max_steps: 0`)."""
    steps, ratio = options.get("max_steps"), float(options["warmup_ratio"])
    if steps is None:
        return ratio * int(options["epochs"]) > 1 + 1e-9
    return steps > 0 and math.ceil(ratio * steps) >= 2


def teacher(graph: Graph, exp: dict, dataset: str, seed: int, inputs: dict[str, Node],
            prompt: str | None = None, selection: str = "dev") -> Node:
    options = inert_grouping_dropped(exp["teacher"])
    model = options["base_model"] or exp["base_model"]  # the start point: the `init` input (pretrained) or `model`
    for key in PLANNED:  # an ensemble's members are teachers of their own (stages.teacher_ensemble: its section
        options.pop(key, None)  # has no `ensemble`), a `gpl` model's Cross-Encoder is used as it is (stages.gpl)
    if options["freeze_embeddings"] is None:  # thesis 5.4.3: freeze when starting from an adapted checkpoint
        options["freeze_embeddings"] = from_adapted(inputs)
    if selection != "dev":  # the planner's (Trans-Encoder) over the option
        options["selection"] = selection
    if options["selection"] == "dev" and not dev_may_meet_warmup(options):  # keys planned before the rule stay
        options.pop("selection")
    if options.get("max_steps") is None:  # unset: `epochs` decides, and keys planned before the option stay
        options.pop("max_steps", None)
    else:  # a step budget: the number of epochs does not enter
        options.pop("epochs")
    if options["arch"] == "cbe":  # Cross-Encoder-only options must not change a CBE's key
        options.pop("loss")
        options.pop("activation")
    if options.get("max_steps") == 0:  # no training step: what shapes training is not part of the model
        for key in UNTRAINED_DROPS:
            options.pop(key, None)
    if options.get("max_steps") == 0 and options["arch"] == "cbe" and not prompt:
        seed = 0  # an untrained CBE has no seeded part (no head, no new token): one model for every seed and member
    params = {**options, "model": model, "seed": seed}
    if prompt:  # its gold pairs carry topics: trained and tested on prompted pairs
        params["topic_prompt"] = prompt
    return graph.add(TEACHER, f"{dataset}.{options['arch']}", params, inputs)


def teacher_node(seed_plan: SeedPlan) -> tuple[Node, list[Node]]:
    """The seed's teacher and, with `teacher.ensemble`, its members (each a teacher of its own, their scores
    combined by the ensemble node, which is then the teacher). It starts from the MLM-adapted checkpoint (role
    `adapt`), else from the pretrain stage's encoder with `teacher.base: pretrained`. Untrained (`max_steps: 0`),
    members that differ only in how they would train are one model: the distinct ones (one: no ensemble)."""
    exp, name = seed_plan.config, seed_plan.experiment
    prompt = topic_prompt(exp) if pairs_have_topics(seed_plan.graph.config["datasets"][source(exp)]) else None
    if not exp["teacher"]["ensemble"]:
        return _teacher(seed_plan, exp, seed_plan.seed, prompt), []
    members = [_teacher(seed_plan, member_config(exp, m), member_seed(seed_plan.seed, m["seed"]), prompt)
               for m in exp["teacher"]["ensemble"]]
    if exp["teacher"].get("max_steps") == 0:
        members = list({m.key: m for m in members}.values())
        if len(members) == 1:
            return members[0], []
    check_members(name, members)
    return teacher_ensemble(seed_plan.graph, exp, source(exp), members, trained_on(seed_plan)), members


def _teacher(seed_plan: SeedPlan, exp: dict, seed: int, prompt: str | None) -> Node:
    """The teacher node of `exp`'s teacher section (one ensemble member's, or the single teacher's)."""
    roles = seed_plan.roles
    if exp["teacher"]["base"] == "pretrained" and "pretrained" not in roles:
        raise ConfigError(f"experiments.{seed_plan.experiment}.teacher.base: pretrained, but `pretrain.objective` "
                          "is none")
    init = roles.get("adapt") or (roles.get("pretrained") if exp["teacher"]["base"] == "pretrained" else None)
    inputs = {**trained_on(seed_plan), **({"init": init} if init else {})}
    return teacher(seed_plan.graph, exp, source(exp), seed, inputs, prompt)


def plan_teacher(seed_plan: SeedPlan) -> dict[str, Node]:
    """The teacher row (`models: [teacher]`) and an ensemble's members (they are rows too)."""
    if not (wants(seed_plan, "teacher") or wants(seed_plan, "student")):
        return {}
    node, members = teacher_node(seed_plan)
    roles = {MEMBER_ROLE.format(k): m for k, m in enumerate(members)}
    if wants(seed_plan, "teacher"):
        roles["teacher"] = node
    return roles
