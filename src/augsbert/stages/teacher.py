"""The `teacher` stage: the pair model (Cross-Encoder or Cross-Bi-Encoder) trained on gold, or on a
Trans-Encoder round's scores (job: augsbert.jobs.teacher). With `teacher.ensemble` each member is a teacher node
and the experiment's teacher is their `teacher_ensemble` node."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from ..params import PairTrainingParams
from ..store.graph import Graph, Node, SeedPlan
from .base import MODEL_SETTINGS, Row, Stage
from .data import pairs_have_topics
from .runs import from_adapted, inert_grouping_dropped, source, topic_prompt, trained_on, wants
from .sizes import trained_items
from .teacher_ensemble import MEMBER_ROLE, check_members, member_config, member_seed, teacher_ensemble


@dataclass(frozen=True, kw_only=True)
class TeacherParams(PairTrainingParams):
    """The `teacher` section (the Cross-Encoder's `loss` and `activation` only for arch ce).

    `selection: last` (keyed only then): keep the last epoch, read no dev split (a Trans-Encoder cross model,
    which must not see a gold label); a teacher with a `labels` input learns those scores, not the gold.
    """

    epochs: int | None = None  # None with `max_steps` (a step budget): the planner leaves `epochs` out
    weight_decay: float = 0.01  # the teacher section's default (what users got), not TrainingParams' 0.0
    arch: Literal["ce", "cbe"]
    symmetric: bool
    loss: Literal["bce", "mse"] | None = None
    selection: Literal["dev", "last"] = "dev"


TEACHER = Stage("teacher", 3, "train the teacher (Cross-Encoder or Cross-Bi-Encoder) on the gold train split",
                "augsbert.jobs.teacher:run", section="teacher", runtime=MODEL_SETTINGS, roles=("teacher",),
                data_parallel=True, seconds_per_item=0.02, mb_per_item=0.002, aliases=("train-teacher",),
                rule_alias="train_teacher", params=TeacherParams,
                plan=lambda seed_plan: plan_teacher(seed_plan), needs=("data", "source_data", "gold_subset", "adapt",
                                                                        "pretrained"),
                items=trained_items, rows={"teacher": Row(40, "{arch} (upper bound)", "teacher trained on gold (Cross-Encoder / "
                                                                  "Cross-Bi-Encoder, upper bound)", bi_encoder=False,
                                                          curves=True, export="teacher (trained on gold)")},
                row_arch=lambda plan, node: node.params["arch"].upper(), estimate="train")
STAGES = (TEACHER,)


def teacher(graph: Graph, exp: dict, dataset: str, seed: int, inputs: dict[str, Node],
            prompt: str | None = None, selection: str = "dev") -> Node:
    options = inert_grouping_dropped(exp["teacher"])
    options.pop("ensemble", None)  # an ensemble's members are teachers of their own (stages.teacher_ensemble)
    options.pop("combine", None)
    options.pop("pretrained", None)  # a `gpl` model's Cross-Encoder used as it is (stages.gpl), never trained
    options.pop("score_scale", None)
    model = options.pop("base_model") or exp["base_model"]
    options.pop("base")  # the start point is the `init` input (pretrained) or `model`
    if options["freeze_embeddings"] is None:  # thesis 5.4.3: freeze when starting from an adapted checkpoint
        options["freeze_embeddings"] = from_adapted(inputs)
    if options.get("max_steps") is None:  # unset: `epochs` decides, and keys planned before the option stay
        options.pop("max_steps", None)
    else:  # a step budget: the number of epochs does not enter
        options.pop("epochs")
    if options["arch"] == "cbe":  # Cross-Encoder-only options must not change a CBE's key
        options.pop("loss")
        options.pop("activation")
    params = {**options, "model": model, "seed": seed}
    if prompt:  # its gold pairs carry topics: trained and tested on prompted pairs
        params["topic_prompt"] = prompt
    if selection != "dev":
        params["selection"] = selection
    return graph.add(TEACHER, f"{dataset}.{options['arch']}", params, inputs)


def teacher_node(seed_plan: SeedPlan) -> tuple[Node, list[Node]]:
    """The seed's teacher and, with `teacher.ensemble`, its members (each a teacher of its own, their scores
    combined by the ensemble node, which is then the teacher). It starts from the MLM-adapted checkpoint (role
    `adapt`), else from the pretrain stage's encoder with `teacher.base: pretrained`."""
    exp, name = seed_plan.config, seed_plan.experiment
    prompt = topic_prompt(exp) if pairs_have_topics(seed_plan.graph.config["datasets"][source(exp)]) else None
    if not exp["teacher"]["ensemble"]:
        return _teacher(seed_plan, exp, seed_plan.seed, prompt), []
    members = [_teacher(seed_plan, member_config(exp, m), member_seed(seed_plan.seed, m.get("seed", 0)), prompt)
               for m in exp["teacher"]["ensemble"]]
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
