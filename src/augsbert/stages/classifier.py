"""The `classifier` stage: the topic-classifier baseline (thesis 5.6.1; job: augsbert.jobs.classifier)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError
from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params, TrainingParams, option, section_options
from .base import MODEL_SETTINGS, Row, Stage
from .data import has_topics
from .runs import wants


@dataclass(frozen=True, kw_only=True)
class ClassifierOptions(Params):
    """The `classifier` section (its schema section is written from here: augsbert.face.schema)."""

    SECTION = "classifier"
    SECTION_DESCRIPTION = """
        The topic-classifier baseline (`models: [classifier]`): mean-pooled
        encoder + linear head, cross-entropy on the topics of the target's
        sentences (train split and unlabeled corpus, without dev/test
        sentences). The thesis gives no settings; these follow the student's."""

    epochs: int = option(1, "Training epochs.", minimum=1)
    batch_size: int = option(32, "Sentences per batch.", minimum=2)
    lr: float = option(2.0e-5, "AdamW learning rate (encoder and head).", exclusiveMinimum=0)
    warmup_ratio: float = option(0.1, "Fraction of steps for linear warm-up.", minimum=0, maximum=1)
    max_length: int = option(256, "Maximum tokens per sentence.", minimum=8)
    checkpoint_steps: int = option(500, "Resumable checkpoint interval (steps).", minimum=1)


@dataclass(frozen=True, kw_only=True)
class ClassifierParams(ClassifierOptions, TrainingParams):
    """The `classifier` section; `eval_batch_size` is the evaluation batch size."""

    exclude_eval_sentences: bool


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
              "exclude_eval_sentences": exp["candidates"]["exclude_eval_sentences"]}
    if exp["topic_prompt"] == "prompted":
        params["topic_prompt"] = exp["topic_delimiter"]
    return graph.add(CLASSIFIER, f"{dataset}.topics", params, {"data": data})


def plan_classifier(seed_plan: SeedPlan) -> dict[str, Node]:
    if not wants(seed_plan, "classifier"):
        return {}
    exp = seed_plan.config
    return {"classifier": classifier(seed_plan.graph, seed_plan.experiment, exp, exp["dataset"], seed_plan.seed,
                                     seed_plan.roles["data"])}
