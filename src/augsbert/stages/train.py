"""The `teacher` and `student` stages: the pair model and the Bi-Encoder (job: augsbert.jobs.train).

The student stage also trains the lower bound (the same Bi-Encoder on gold labels only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from ..store.graph import Graph, Node
from ..params import PairTrainingParams
from .base import MODEL_SETTINGS, Stage


@dataclass(frozen=True, kw_only=True)
class TeacherParams(PairTrainingParams):
    """The `teacher` section (the Cross-Encoder's `loss` and `activation` only for arch ce).

    `selection: last` (keyed only then): keep the last epoch, read no dev split (a Trans-Encoder cross model,
    which must not see a gold label); a teacher with a `labels` input learns those scores, not the gold.
    """

    arch: Literal["ce", "cbe"]
    symmetric: bool
    loss: Literal["bce", "mse"] | None = None
    selection: Literal["dev", "last"] = "dev"


@dataclass(frozen=True, kw_only=True)
class StudentParams(PairTrainingParams):
    """The `student` section; `selection` is how it picks its epoch (planning.train.student_selection).
    With `max_steps` (a step budget) the planner leaves `epochs` out: None here."""

    epochs: int | None = None
    use_gold_labels: bool
    selection: Literal["source_dev", "target_dev", "last"]
    loss: Literal["cosine", "cosent", "angle", "mnrl", "margin_mse", "kl_div"] | None = None


TEACHER = Stage("teacher", 3, "train the teacher (Cross-Encoder or Cross-Bi-Encoder) on the gold train split",
                "augsbert.jobs.train:run_teacher", section="teacher", runtime=MODEL_SETTINGS, roles=("teacher",),
                data_parallel=True, seconds_per_item=0.02, mb_per_item=0.002, aliases=("train-teacher",),
                rule_alias="train_teacher", params=TeacherParams)
STUDENT = Stage("student", 3, "train a Bi-Encoder on gold and/or teacher-labelled pairs (also the lower bound)",
                "augsbert.jobs.train:run_student", section="student", runtime=MODEL_SETTINGS,
                roles=("student", "lower_bound"), data_parallel=True, seconds_per_item=0.01, mb_per_item=0.002,
                aliases=("train-student",), rule_alias="train_student", gpu_sequences=2,  # both sides of a pair
                params=StudentParams)
STAGES = (TEACHER, STUDENT)


def inert_grouping_dropped(options: dict) -> dict:
    """A copy of a training section without `megabatch` when `group_by_length` is off (it changes nothing then),
    and without `early_stopping_patience` when it is 0 and `torch_compile` when false (off: sections planned
    before they existed keep their keys)."""
    options = dict(options)
    if not options.get("group_by_length", False):
        options.pop("megabatch", None)
    for key in ("early_stopping_patience", "torch_compile"):
        if not options.get(key):
            options.pop(key, None)
    return options


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


def from_adapted(inputs: dict[str, Node]) -> bool:
    return "init" in inputs and inputs["init"].stage == "adapt"


def teacher(graph: Graph, exp: dict, dataset: str, seed: int, inputs: dict[str, Node],
            prompt: str | None = None, selection: str = "dev") -> Node:
    options = inert_grouping_dropped(exp["teacher"])
    options.pop("ensemble", None)  # an ensemble's members are teachers of their own (planning.ensemble)
    options.pop("combine", None)
    options.pop("pretrained", None)  # a `gpl` model's Cross-Encoder used as it is (planning.gpl), never trained
    options.pop("score_scale", None)
    model = options.pop("base_model") or exp["base_model"]
    options.pop("base")  # the start point is the `init` input (pretrained) or `model`
    if options["freeze_embeddings"] is None:  # thesis 5.4.3: freeze when starting from an adapted checkpoint
        options["freeze_embeddings"] = from_adapted(inputs)
    if options["arch"] == "cbe":  # Cross-Encoder-only options must not change a CBE's key
        options.pop("loss")
        options.pop("activation")
    params = {**options, "model": model, "seed": seed}
    if prompt:  # its gold pairs carry topics: trained and tested on prompted pairs
        params["topic_prompt"] = prompt
    if selection != "dev":
        params["selection"] = selection
    return graph.add(TEACHER, f"{dataset}.{options['arch']}", params, inputs)


def student(graph: Graph, exp: dict, dataset: str, seed: int, inputs: dict[str, Node], selection: str,
            gold_only: bool = False, prompt: str | None = None) -> Node:
    if exp["student"].get("loss") == "kl_div":
        raise ConfigError("student.loss kl_div learns a teacher's scores over a mined list of passages: it is the "
                          "loss of a GPL student (`models: [gpl]`), not of a student of scored pairs")
    options = student_loss_options(inert_grouping_dropped(exp["student"]))
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
    if prompt:  # `prompted`: the student sees the prompts too (`hidden`: plain texts, same scores)
        params["topic_prompt"] = prompt
    return graph.add(STUDENT, f"{dataset}.be", params, inputs)
