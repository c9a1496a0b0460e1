"""The `adapt` stage: masked-LM domain adaptation (thesis 4.3; job: augsbert.stages.adapt)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..graph import Graph, Node
from ..params import TrainingParams
from ..stages.base import Stage
from .train import inert_grouping_dropped


@dataclass(frozen=True, kw_only=True)
class AdaptParams(TrainingParams):
    """The `adapt_mlm` section (but `variant`, which says where the adapted model is used) and the pool."""

    max_steps: int
    mask_probability: float
    masking: Literal["uniform", "bert"]
    held_out: float
    pool: Literal["train", "train+unlabeled", "unlabeled"]
    exclude_eval_sentences: bool


ADAPT = Stage("adapt", 2, "masked-LM domain adaptation of the base model on target pairs in the CBE layout",
              "augsbert.stages.adapt:run", section="adapt_mlm", runtime=("checkpoint_steps", "model"),
              roles=("adapt",), seconds_per_item=0.01, aliases=("adapt-mlm",), rule_alias="adapt_mlm",
              params=AdaptParams)
STAGES = (ADAPT,)


def adapt(graph: Graph, exp: dict, dataset: str, seed: int, data: Node, prompt: str | None = None) -> Node:
    options = inert_grouping_dropped({k: v for k, v in exp["adapt_mlm"].items() if k != "variant"})
    params = {**options, "model": exp["teacher"]["base_model"] or exp["base_model"],
              "pool": exp["sampling"]["pool"], "exclude_eval_sentences": exp["sampling"]["exclude_eval_sentences"],
              "seed": seed}
    if prompt:  # MLM on prompted pairs, prompt tokens never masked (thesis 4.4.3)
        params["topic_prompt"] = prompt
    return graph.add(ADAPT, f"{dataset}.mlm", params, {"data": data})
