"""The `multilingual` stage: multilingual knowledge distillation (Reimers & Gurevych, EMNLP 2020, "Making Monolingual
Sentence Embeddings Multilingual using Knowledge Distillation"): a student Bi-Encoder learns, on parallel sentences
(s, t), to put the original s and its translation t where the teacher puts s (job: augsbert.jobs.multilingual).

The teacher is a Bi-Encoder this experiment makes (`multilingual.teacher`: the AugSBERT student by default); its
embeddings of the originals are computed once by the `source_embeddings` stage, the student is evaluated per
language by the `language_suite` stage (beside the zero-shot base and the teacher). docs/methods/multilingual.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..config.datasets import LANGUAGE
from ..errors import ConfigError
from ..params import Params, option, restate, section_options, slice_of
from ..planning.graph import Node, SeedPlan
from .base import MODEL_SETTINGS, Row, Stage
from .runs import wants
from .sizes import data_sizes, metrics
from .training_options import Trained, TrainingOptions

# the loaders whose data artifact holds parallel sentences (augsbert.data.parallel)
PARALLEL_LOADERS = ("parallel_rows", "parallel_file")
TARGETS = "source_embeddings"  # the student's input (and role): the teacher's embeddings of the originals
# the Bi-Encoders of an experiment that can teach (`multilingual.teacher`), in the order the default looks for them
TEACHERS = ("student", "lower_bound", "zero_shot")


@dataclass(frozen=True, kw_only=True)
class MultilingualModelOptions(Params):
    """The head of the `multilingual` section: from which data, which teacher, which student, how long a text."""

    dataset: str | None = option(None, """
        The parallel dataset (a `datasets` entry with loader `parallel_rows` or `parallel_file`) the student learns
        and is tested on per language; null = the experiment's own dataset (then one of those loaders).""",
                                 minLength=1)
    teacher: Literal["student", "lower_bound", "zero_shot"] | None = option(None, """
        Which of this experiment's Bi-Encoders teaches: `student` (the AugSBERT student: "distil the student you
        just made into other languages"), `lower_bound` (the Bi-Encoder on gold only) or `zero_shot` (the base model
        as it is); it must be in `models`. null = the first of student, lower_bound the experiment trains, else
        zero_shot.""")
    base_model: str | None = option(None, """
        Model the multilingual student starts from: a local directory (e.g. a multilingual XLM-R checkpoint; an
        embedding size other than the teacher's gets a trained linear layer to it), a packaged alias or a hub id;
        null = the teacher's own base (the model the teacher started from; the paper's students start from
        XLM-R).""")
    language: str | None = option(None, """
        The language whose figures this experiment reports (the `language_suite` of the zero-shot base, the teacher
        and the student): the grids' columns set one each (`multilingual`, `demo_multilingual`). null = every
        language of the parallel dataset, each figure named `<figure>@<language>`. Evaluation only: the student
        (trained on every language of the dataset) is the same whatever it says.""", **LANGUAGE)
    max_length: int = option(128, "Maximum tokens per sentence of the student (make_multilingual.py: 128).",
                             minimum=8)
    max_per_language: int | None = option(500000, """
        At most this many parallel pairs per language train (the first ones in file order, after dropping any pair
        holding a dev or test sentence); make_multilingual.py's `max_sentences_per_language`. null = all.""",
                                          minimum=1)


TrainingSlice = slice_of(TrainingOptions, "epochs", "max_steps", "batch_size", "lr", "warmup_ratio", "weight_decay",
                         "eval_batch_size")


@dataclass(frozen=True, kw_only=True)
class MultilingualOptions(TrainingSlice, MultilingualModelOptions):
    """The `multilingual` section (its schema section is written from here: augsbert.reference.schema). The schedule's
    defaults are make_multilingual.py's where a CPU allows (docs/methods/multilingual.md "Settings")."""

    SECTION = "multilingual"
    SECTION_DESCRIPTION = """
        Multilingual knowledge distillation (models: [multilingual]): a student Bi-Encoder learns to map each
        parallel sentence and its translation where the teacher maps the original (MSELoss); docs/methods/
        multilingual.md."""

    epochs = restate(5, "Training epochs over the parallel pairs (make_multilingual.py: 5; the last epoch's model "
                        "is kept).")
    max_steps = restate(None, """
        Train for this many optimizer steps instead of `epochs` (a cap for a CPU); warm-up is `warmup_ratio` of
        them. null = `epochs` decides. Set, `epochs` leaves the artifact key.""")
    batch_size = restate(64, "Training batch size, parallel pairs per step (make_multilingual.py: 64).")
    lr = restate(2.0e-5, "AdamW learning rate, linear decay after warm-up (make_multilingual.py: 2e-5).")
    warmup_ratio = restate(0.1, "Fraction of the training steps of linear warm-up (make_multilingual.py: 0.1).")
    weight_decay = restate(0.0, """
        AdamW weight decay (make_multilingual.py sets none: the trainer's 0; its 2020 version trained with 0.01).""")
    eval_batch_size = restate(64, "Encoding batch size of the teacher's embeddings and the student's test split.")


# the `multilingual` options that plan nodes (which data, which teacher, where the student starts, what is reported)
PLANNED = ("dataset", "teacher", "base_model", "language")
StudentSlice = slice_of(MultilingualOptions, but=PLANNED)


@dataclass(frozen=True, kw_only=True)
class MultilingualParams(StudentSlice, Trained):
    """A multilingual student spec: the section but its `PLANNED` options (a step budget leaves `epochs` out), the
    model it starts from and the seed."""


MULTILINGUAL = Stage("multilingual", 1, "train a multilingual student Bi-Encoder on parallel sentences: MSE to the "
                     "teacher's embeddings of the originals, for the original and its translation",
                     "augsbert.jobs.multilingual:run", section="multilingual", runtime=MODEL_SETTINGS,
                     roles=("multilingual",), seconds_per_item=0.01, mb_per_item=0.002, trains=True,
                     gpu_sequences=2,  # the original and its translation
                     params=MultilingualParams, plan=lambda seed_plan: plan_multilingual(seed_plan),
                     needs=("data", TARGETS), estimate="train",
                     card="augsbert.reporting.multilingual_card:card",
                     items=lambda plan, node: parallel_pairs(plan, plan.nodes[dict(node.inputs)[TARGETS]]),
                     rows={"multilingual": Row(70, "Multilingual student", "Bi-Encoder trained on parallel sentences "
                                                "to map each translation where the teacher maps its original "
                                                "(multilingual knowledge distillation)",
                                               export="multilingual student (distilled from the teacher on parallel "
                                                      "sentences)")})
STAGES = (MULTILINGUAL,)


def parallel_pairs(plan, node: Node) -> int:
    """The parallel train pairs a job of the chain reads (`node`: one with a `parallel` input): counted by its
    parallel data's job, else 2 per row and translation of a row-parallel STS set (the data's train pairs)."""
    data = plan.nodes[dict(node.inputs)["parallel"]]
    sizes = metrics(data).get("sizes") or {}
    if "parallel_train" in sizes:
        return int(sizes["parallel_train"])
    return 2 * data_sizes(data, plan)["train"] * len(data.settings.get("languages") or [None])


def parallel_dataset(seed_plan: SeedPlan) -> str:
    """The parallel dataset of a multilingual experiment (`multilingual.dataset`, else its own), checked."""
    exp, name = seed_plan.config, seed_plan.experiment
    dataset = exp["multilingual"]["dataset"] or exp["dataset"]
    definitions = seed_plan.graph.config["datasets"]
    where = f"experiments.{name}.multilingual.dataset"
    if dataset not in definitions:
        raise ConfigError(f"{where}: no dataset {dataset!r} in `datasets` (known: {', '.join(definitions)})")
    loader = definitions[dataset]["loader"]
    if loader not in PARALLEL_LOADERS:
        said = where if exp["multilingual"]["dataset"] else f"experiments.{name}.dataset"
        raise ConfigError(f"{said}: {dataset!r} (loader {loader}) holds no parallel sentences; name a dataset with "
                          f"loader {' or '.join(PARALLEL_LOADERS)} in multilingual.dataset")
    language = exp["multilingual"]["language"]
    languages = definitions[dataset].get("languages") if loader == "parallel_rows" else None
    if language and languages is not None and language not in languages:
        raise ConfigError(f"experiments.{name}.multilingual.language: {language!r} is not a language of dataset "
                          f"{dataset!r} ({', '.join(languages)})")
    return dataset


def teacher_row(seed_plan: SeedPlan) -> str:
    """The row whose model teaches (`multilingual.teacher`, else the first of TEACHERS the experiment has)."""
    chosen = seed_plan.config["multilingual"]["teacher"]
    if chosen is None:
        return next(row for row in TEACHERS if row == "zero_shot" or wants(seed_plan, row))
    if not wants(seed_plan, chosen):
        raise ConfigError(f"experiments.{seed_plan.experiment}.multilingual.teacher: {chosen}, but `models` lacks "
                          f"{chosen}: add it (the teacher's per-language figures are a row of the results)")
    return chosen


def teacher_base(seed_plan: SeedPlan, row: str) -> str:
    """The model the teacher started from (the multilingual student's default start)."""
    if row == "zero_shot":
        return seed_plan.config["base_model"]
    return seed_plan.roles[row].settings["model"]


def plan_multilingual(seed_plan: SeedPlan) -> dict[str, Node]:
    """`models: [multilingual]`: the student, on the pairs and targets of the `source_embeddings` node."""
    if TARGETS not in seed_plan.roles:
        return {}
    exp = seed_plan.config
    options = section_options(StudentSlice, exp["multilingual"])
    if options["max_steps"] is None:  # unset: `epochs` decides
        options.pop("max_steps")
    else:  # a step budget: the number of epochs does not enter
        options.pop("epochs")
    targets = seed_plan.roles[TARGETS]
    start = exp["multilingual"]["base_model"] or teacher_base(seed_plan, teacher_row(seed_plan))
    params = {**options, "model": start, "seed": seed_plan.seed}
    node = seed_plan.graph.add(MULTILINGUAL, targets.name, params,
                               {TARGETS: targets, "data": seed_plan.roles["data"]})
    return {"multilingual": node}
