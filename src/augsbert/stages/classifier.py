"""The `classifier` stage: the topic-classifier baseline (thesis 5.6.1; job: augsbert.jobs.classifier)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params, option, restate, section_options, slice_of
from .base import MODEL_SETTINGS, Row, Stage
from .candidates import CandidatesOptions
from .data import has_topics
from .runs import wants
from .training_options import Prompted, Trained, TrainingOptions


@dataclass(frozen=True, kw_only=True)
class SentenceLength(Params):
    max_length: int = option(256, "Maximum tokens per sentence.", minimum=8)


@dataclass(frozen=True, kw_only=True)
class ClassifierOptions(slice_of(TrainingOptions, "checkpoint_steps"), SentenceLength,
                        slice_of(TrainingOptions, "epochs", "batch_size", "lr", "warmup_ratio")):
    """The `classifier` section (its schema section is written from here: augsbert.reference.schema): the shared
    schedule's options (augsbert.stages.training_options), its own defaults of epochs and batch size, and the
    sentence length."""

    SECTION = "classifier"
    SECTION_DESCRIPTION = """
        The topic-classifier baseline (`models: [classifier]`): mean-pooled
        encoder + linear head, cross-entropy on the topics of the target's
        sentences (train split and unlabeled corpus, without dev/test
        sentences). The thesis gives no settings; these follow the student's."""

    epochs = restate(1, "Training epochs.")
    batch_size = restate(32, "Sentences per batch.", minimum=2)


# what the classifier reads of the `candidates` section: whether dev / test sentences stay out of its training
EvalSentences = slice_of(CandidatesOptions, "exclude_eval_sentences")


@dataclass(frozen=True, kw_only=True)
class ClassifierParams(ClassifierOptions, EvalSentences, slice_of(TrainingOptions, "eval_batch_size"), Prompted,
                       Trained):
    """The `classifier` section, the `candidates` section's `exclude_eval_sentences` and the evaluation's batch
    size (`eval_batch_size`: `evaluation.batch_size`, encoding the sentences after training)."""


CLASSIFIER = Stage("classifier", 1, "train the topic-classifier baseline (encoder + linear head on the target's "
                   "topics) and test its encoder as a Bi-Encoder", "augsbert.jobs.classifier:run",
                   section="classifier", runtime=MODEL_SETTINGS, roles=("classifier",), seconds_per_item=0.01,
                   trains=True, aliases=("train-classifier",), rule_alias="train_classifier",
                   params=ClassifierParams, plan=lambda seed_plan: plan_classifier(seed_plan), needs=("data",),
                   rows={"classifier": Row(25, "Topic classifier", "encoder fine-tuned with a linear head on the "
                                            "target's topics (thesis 5.6.1 baseline)", curves=True)},
                   estimate="train")
STAGES = (CLASSIFIER,)


def classifier(graph: Graph, name: str, exp: dict, dataset: str, seed: int, data: Node) -> Node:
    """Trained on the target's topics, prompted or not."""
    if not has_topics(graph.config["datasets"][dataset]):
        raise ConfigError(f"experiments.{name}.models: classifier learns topics, but dataset '{dataset}' has "
                          "no topic labels (BWS, or a pairs_file with columns.topic)")
    params = {**section_options(ClassifierOptions, exp["classifier"]), "model": exp["base_model"], "seed": seed,
              "eval_batch_size": exp["suite"]["batch_size"],
              **section_options(EvalSentences, exp["candidates"])}
    if exp["topic_prompt"] == "prompted":
        params["topic_prompt"] = exp["topic_delimiter"]
    return graph.add(CLASSIFIER, f"{dataset}.topics", params, {"data": data})


def plan_classifier(seed_plan: SeedPlan) -> dict[str, Node]:
    if not wants(seed_plan, "classifier"):
        return {}
    exp = seed_plan.config
    return {"classifier": classifier(seed_plan.graph, seed_plan.experiment, exp, exp["dataset"], seed_plan.seed,
                                     seed_plan.roles["data"])}
