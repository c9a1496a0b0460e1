"""The `source_embeddings` stage: the multilingual teacher's embeddings of the parallel sentences' originals,
computed once (job: augsbert.jobs.source_embeddings). They are the targets the `multilingual` student learns (the
paper's M(s); sentence-transformers' make_multilingual.py computes them once too, before training). The pairs that
may train are chosen here: the parallel train pairs that hold no dev or test sentence."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import ModelParams, section_options, slice_of
from ..planning.graph import Node, SeedPlan
from .base import Stage
from .data import data_node
from .multilingual import MultilingualOptions, parallel_dataset, parallel_pairs, teacher_row
from .runs import wants

# what of the `multilingual` section the targets depend on (the cap) or are computed with (the encoding batch)
TargetsSlice = slice_of(MultilingualOptions, "max_per_language", "eval_batch_size")


@dataclass(frozen=True, kw_only=True)
class SourceEmbeddingsParams(TargetsSlice, ModelParams):
    """A `source_embeddings` spec: the teacher is the `teacher` input's model, or `model` (the base as it is:
    `multilingual.teacher: zero_shot`; None with a `teacher` input)."""

    model: str | None = None


SOURCE_EMBEDDINGS = Stage("source_embeddings", 1, "compute the multilingual teacher's embeddings of the parallel "
                          "sentences' originals once (the multilingual student's targets)",
                          "augsbert.jobs.source_embeddings:run", section="multilingual",
                          runtime=("model", "eval_batch_size"), roles=("source_embeddings",),
                          seconds_per_item=0.0005, base_mem_mb=8000, mb_per_item=0.002, model_input="teacher",
                          params=SourceEmbeddingsParams, items=parallel_pairs,
                          plan=lambda seed_plan: plan_source_embeddings(seed_plan),
                          needs=("data", "zero_shot", "student", "lower_bound"),
                          holds=("pairs.parquet", "embeddings.npy"))
STAGES = (SOURCE_EMBEDDINGS,)


def plan_source_embeddings(seed_plan: SeedPlan) -> dict[str, Node]:
    """`models: [multilingual]`: the teacher's embeddings of the parallel dataset's train originals. Its key holds
    the teacher's artifact (the `teacher` input) or the base model's identity (`zero_shot`), the parallel data and
    the target data (whose dev and test sentences are kept out of training too)."""
    if not wants(seed_plan, "multilingual"):
        return {}
    graph, roles, exp = seed_plan.graph, seed_plan.roles, seed_plan.config
    dataset = parallel_dataset(seed_plan)
    parallel = roles["data"] if dataset == exp["dataset"] else data_node(graph, dataset)
    row = teacher_row(seed_plan)
    params = section_options(TargetsSlice, exp["multilingual"])
    inputs = {"parallel": parallel, "data": roles["data"]}
    if row == "zero_shot":
        params["model"] = exp["base_model"]
    else:
        inputs["teacher"] = roles[row]
    return {"source_embeddings": graph.add(SOURCE_EMBEDDINGS, f"{dataset}.{row}", params, inputs)}
