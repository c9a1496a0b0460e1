"""The `student` stage: a Bi-Encoder trained on teacher-labelled pairs (with or without the gold), and the
lower bound, the same Bi-Encoder on gold labels only (job: augsbert.jobs.student)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from ..params import PairTrainingParams
from ..store.graph import Graph, Node, SeedPlan
from .base import MODEL_SETTINGS, Row, Stage
from .runs import from_adapted, inert_grouping_dropped, source, topic_prompt, trained_on, transfer, wants
from .sizes import trained_items


@dataclass(frozen=True, kw_only=True)
class StudentParams(PairTrainingParams):
    """The `student` section; `selection` is how it picks its epoch (`student_selection` below).
    With `max_steps` (a step budget) the planner leaves `epochs` out: None here."""

    epochs: int | None = None
    # the student section's defaults (what users got), not TrainingParams' 0.0 / False / 50
    weight_decay: float = 0.01
    group_by_length: bool = True
    megabatch: int = 400
    use_gold_labels: bool
    selection: Literal["source_dev", "target_dev", "last"]
    loss: Literal["cosine", "cosent", "angle", "mnrl", "margin_mse", "kl_div"] | None = None
    # students that deploy (augsbert.models.compact); each keyed only when set, the student's only
    init: Literal["full", "layers"] = "full"
    layers: int | list[int] | None = None  # init layers: a count (evenly spread) or the base's layer indices
    arch: Literal["transformer", "static"] = "transformer"
    static_dims: int | None = None  # arch static: model2vec's PCA dimensions (None: the base's)
    matryoshka_dims: list[int] | None = None  # MatryoshkaLoss around the loss; the test scored at each


STUDENT = Stage("student", 3, "train a Bi-Encoder on gold and/or teacher-labelled pairs (also the lower bound)",
                "augsbert.jobs.student:run", section="student", runtime=MODEL_SETTINGS,
                roles=("student", "lower_bound"), data_parallel=True, seconds_per_item=0.01, mb_per_item=0.002,
                aliases=("train-student",), rule_alias="train_student", gpu_sequences=2,  # both sides of a pair
                params=StudentParams, plan=lambda seed_plan: plan_student(seed_plan), kind_options=("matryoshka_dims",),
                needs=("data", "source_data", "gold_subset", "labels", "adapt", "pretrained"), items=trained_items,
                rows={"lower_bound": Row(30, "SBERT (lower bound)", "Bi-Encoder trained on gold only (SBERT, lower "
                                                                         "bound)", curves=True,
                                         export="lower bound (Bi-Encoder on gold only)"),
                      "student": Row(50, "", "Bi-Encoder student trained on the teacher's labels (AugSBERT)",
                                     curves=True, export="AugSBERT student (Bi-Encoder on the teacher's labels)")},
                console_label=lambda spec: None if "labels" in (spec.get("inputs") or {}) else "lower_bound",
                estimate="train")
STAGES = (STUDENT,)


def student_loss_options(options: dict) -> dict:
    """A student section without the options its `loss` does not read (the default `cosine` reads none,
    so students planned before `student.loss` existed keep their keys)."""
    options = dict(options)
    loss = options.pop("loss", "cosine")
    used = {"cosent": ("scale",), "angle": ("scale",), "mnrl": ("scale", "positive_threshold", "hard_negatives"),
            "margin_mse": (), "kl_div": ("similarity",)}.get(loss, ())
    if loss == "margin_mse" and options.get("similarity", "cos") != "cos":  # cosine: keys as before the option
        used += ("similarity",)
    if loss == "mnrl" and options.get("hard_negatives"):
        used += ("negative_threshold",)
    for key in ("scale", "positive_threshold", "hard_negatives", "negative_threshold", "similarity"):
        if key not in used:
            options.pop(key, None)
    if loss != "cosine":
        options["loss"] = loss
    if loss in ("mnrl", "margin_mse", "kl_div"):
        # mnrl: in-batch negatives, length-sorted batches would change them; margin_mse: triples, which the
        # two-sided length grouping does not sort (random batches, said here so the key says it too)
        options["group_by_length"] = False
        options.pop("megabatch", None)
    return options


def compact_options(options: dict, gold_only: bool, name: str = "student") -> dict:
    """A student section with the options of the compact students (issue 51) only where they are set, so
    students planned before they existed keep their keys; the lower bound (gold only) is always the full
    Transformer (it is also the encoder of `semantic_model: finetuned` sampling, upstream of the student)."""
    options = dict(options)
    init, arch, dims = options.pop("init", "full"), options.pop("arch", "transformer"), options.get("matryoshka_dims")
    layers, static_dims = options.pop("layers", None), options.pop("static_dims", None)
    static_lr = options.pop("static_lr", None)
    options.pop("matryoshka_dims", None)
    if gold_only:
        return options
    where = f"experiments.{name}.student"
    if init == "layers":
        if arch == "static":
            raise ConfigError(f"{where}.init: `layers` keeps Transformer layers, but arch is `static` (no layers)")
        options.update(init=init, layers=3 if layers is None else layers)
    if arch == "static":
        if options.get("freeze_embeddings"):
            raise ConfigError(f"{where}.freeze_embeddings: a static student is its embeddings; it cannot freeze them")
        if options.get("torch_compile"):
            raise ConfigError(f"{where}.torch_compile: a static student has no Transformer to compile")
        # one vector per token: no sequence to group by length, no embeddings to freeze apart
        options.update(arch=arch, static_dims=static_dims, group_by_length=False, freeze_embeddings=False)
        if static_lr is not None:  # its own rate: the lower bound of the same section keeps `lr`
            options["lr"] = static_lr
        options.pop("megabatch", None)
    if dims:
        if len(set(dims)) != len(dims):
            raise ConfigError(f"{where}.matryoshka_dims: {dims} lists a dimension twice")
        options["matryoshka_dims"] = sorted(dims, reverse=True)
    return options


def student_selection(name: str, exp: dict) -> str:
    """How Bi-Encoders pick their epoch: `target_dev`, `source_dev` (transfer default) or `last`."""
    transfer = bool(exp["source"]) and exp["source"] != exp["dataset"]
    selection = exp["student"]["selection"] or ("source_dev" if transfer else "target_dev")
    if selection == "source_dev" and not transfer:
        selection = "target_dev"  # in-domain the teacher's data is the target: one and the same split
    if selection == "last" and exp["student"]["seed_optimization"]["trials"] > 0:
        raise ConfigError(f"experiments.{name}.student.seed_optimization.trials: seed optimisation compares "
                          "seeds on a dev split, but student.selection is `last`; set trials to 0 or choose "
                          "a dev split")
    return selection


def dev_input(selection: str, target: Node, transfer: bool) -> dict[str, Node]:
    """A transfer model selected by `target_dev` reads the target's dev split (else that of `data`)."""
    return {"dev": target} if selection == "target_dev" and transfer else {}


def student(graph: Graph, exp: dict, dataset: str, seed: int, inputs: dict[str, Node], selection: str,
            gold_only: bool = False, prompt: str | None = None, name: str = "student") -> Node:
    if exp["student"].get("loss") == "kl_div":
        raise ConfigError("student.loss kl_div learns a teacher's scores over a mined list of passages: it is the "
                          "loss of a GPL student (`models: [gpl]`), not of a student of scored pairs")
    options = compact_options(exp["student"], gold_only, name)
    options = student_loss_options(inert_grouping_dropped(options))
    if options.get("max_steps") is None:  # unset: `epochs` decides, and keys planned before the option stay
        options.pop("max_steps", None)
    else:  # a step budget (thesis 5.4.3): the number of epochs does not enter
        options.pop("epochs")
    model = options.pop("base_model") or exp["base_model"]
    options.pop("base")  # the start point is the `init` input (pretrained / adapted) or `model`
    if options["freeze_embeddings"] is None:
        options["freeze_embeddings"] = from_adapted(inputs)
    if gold_only:
        options["use_gold_labels"] = True
    options["selection"] = selection
    params = {**options, "model": model, "seed": seed}
    if prompt and options.get("arch") == "static":
        raise ConfigError(f"experiments.{name}.student.arch: a static student takes no topic prompts")
    if prompt:  # `prompted`: the student sees the prompts too (`hidden`: plain texts, same scores)
        params["topic_prompt"] = prompt
    return graph.add(STUDENT, f"{dataset}.be", params, inputs)


def lower_bound_node(seed_plan: SeedPlan) -> Node:
    """The lower bound: the student's Bi-Encoder on the gold alone (also the encoder of `semantic_model:
    finetuned` sampling, so it is planned whether or not it is a row)."""
    exp = seed_plan.config
    selection = student_selection(seed_plan.experiment, exp)
    inputs = {**trained_on(seed_plan), **dev_input(selection, seed_plan.roles["data"], transfer(exp))}
    return student(seed_plan.graph, exp, source(exp), seed_plan.seed, inputs, selection, gold_only=True,
                   name=seed_plan.experiment)


def plan_student(seed_plan: SeedPlan) -> dict[str, Node]:
    """The lower bound (planned always, a row with `models: [lower_bound]`) and the student of the teacher's
    labels (`labels`). The student's gold (use_gold_labels) and default dev split are the teacher's: the
    source's in transfer. It starts from the MLM-adapted checkpoint with `adapt.variant: full_domain`,
    from the pretrain stage's encoder with `student.base: pretrained`."""
    exp, roles = seed_plan.config, seed_plan.roles
    lower_bound = lower_bound_node(seed_plan)
    planned = {"lower_bound": lower_bound} if wants(seed_plan, "lower_bound") else {}
    if not wants(seed_plan, "student"):
        return planned
    selection = student_selection(seed_plan.experiment, exp)
    inputs = {**trained_on(seed_plan), "labels": roles["labels"],
              **dev_input(selection, roles["data"], transfer(exp))}
    if exp["adapt"]["variant"] == "full_domain":
        inputs["init"] = roles["adapt"]
    elif exp["student"]["base"] == "pretrained":
        inputs["init"] = roles.get("pretrained")
    prompt = topic_prompt(exp) if exp["topic_prompt"] == "prompted" else None
    planned["student"] = student(seed_plan.graph, exp, exp["dataset"], seed_plan.seed, inputs, selection,
                                 prompt=prompt, name=seed_plan.experiment)
    return planned
