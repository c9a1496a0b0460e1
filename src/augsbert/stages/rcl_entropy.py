"""The `rcl_entropy` stage: the entropy models of Regularized Contrastive Learning (seed 002, Algorithm 1;
job: augsbert.jobs.rcl_entropy)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..planning.graph import Graph, Node, SeedPlan
from ..params import section_options, slice_of
from .base import Stage
from .data import data_node, triples_inputs
from .pretrain import ENTROPY_ROLE, PretrainParams, pretrain_options
from .sizes import pool_items
from .training_options import Trained

# what trains an entropy model, as the final model's spec has it: its schedule, its corpus (the pool's sentences,
# or NLI rows from `triples`) and its evaluation batch; the final model's own options (selection, the other φ values)
# stay out
FinalModel = slice_of(PretrainParams, "pooling", "max_length", "batch_size", "lr", "warmup_ratio", "weight_decay",
                      "scheduler", "group_by_length", "megabatch", "held_out", "exclude_eval_sentences", "pool",
                      "triples", "triples_digest", "triples_format", "eval_batch_size")


@dataclass(frozen=True, kw_only=True)
class RclEntropyParams(FinalModel, Trained):
    """One entropy model: what it shares with the final model (`FinalModel`), its φ, and its own stopping
    (`patience` evaluations without a lower held-out loss, one every `eval_steps`, at most `max_steps`)."""

    phi: float
    max_steps: int
    patience: int
    eval_steps: int


RCL_ENTROPY = Stage("rcl_entropy", 1, "train one entropy model of Regularized Contrastive Learning (pretrain.objective "
                    "rcl, one per rcl_phis value) and store its embeddings of every training query and document",
                    "augsbert.jobs.rcl_entropy:run", section="pretrain",
                    runtime=("eval_batch_size", "model", "triples"),
                    raw_inputs=lambda node: triples_inputs(node),  # the NLI triples: checked when Snakemake plans
                    roles=("rcl_entropy_0",),  # --role rcl_entropy_<n> for the n-th φ
                    seconds_per_item=0.01, trains=True, params=RclEntropyParams, items=pool_items,
                    plan=lambda seed_plan: plan_rcl_entropy(seed_plan), needs=("data",),
                    gpu_sequences=2)  # query and document
STAGES = (RCL_ENTROPY,)



def rcl_entropy(graph: Graph, corpus: str, options: dict, seed: int, inputs: dict[str, Node]) -> dict[str, Node]:
    """One node per φ of `rcl_phis` (roles rcl_entropy_0, rcl_entropy_1, ...) from the final model's `options`
    (stages.pretrain.pretrain_options) and its inputs (`data`: the corpus, `eval`: the target)."""
    params = {"model": options["model"], **section_options(FinalModel, options), "seed": seed,
              "patience": options["rcl_patience"], "eval_steps": options["rcl_eval_steps"],
              "max_steps": options["rcl_entropy_max_steps"] or options["max_steps"]}
    if "config_kwargs" in options:
        params["config_kwargs"] = options["config_kwargs"]
    if "triples" in options:  # NLI rows: the corpus dataset is not read
        params.pop("pool")
        files = [options["triples"]] if isinstance(options["triples"], str) else options["triples"]
        entropy_inputs, name = {"eval": inputs["eval"]}, "+".join(Path(f).stem for f in files)
    else:
        entropy_inputs, name = dict(inputs), corpus
    return {f"{ENTROPY_ROLE}{i}": graph.add(RCL_ENTROPY, f"{name}.phi{phi:g}", {**params, "phi": phi}, entropy_inputs)
            for i, phi in enumerate(options["rcl_phis"])}


def plan_rcl_entropy(seed_plan: SeedPlan) -> dict[str, Node]:
    """`pretrain.objective: rcl`: its entropy models, which the pretrain node reads (stages.pretrain)."""
    exp = seed_plan.config
    if exp["pretrain"]["objective"] != "rcl":
        return {}
    options, corpus = pretrain_options(seed_plan.graph, seed_plan.experiment, exp)
    inputs = {"data": data_node(seed_plan.graph, corpus), "eval": seed_plan.roles["data"]}
    return rcl_entropy(seed_plan.graph, corpus, options, seed_plan.seed, inputs)
