"""The `rcl_entropy` stage: the entropy models of Regularized Contrastive Learning (seed 002, Algorithm 1;
job: augsbert.jobs.rcl_entropy)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..planning.graph import Graph, Node
from ..params import TrainingParams
from .base import Stage
from .data import triples_inputs
from .sizes import pool_items


@dataclass(frozen=True, kw_only=True)
class RclEntropyParams(TrainingParams):
    """One entropy model: the final model's schedule (RCL_ENTROPY_KEYS), its φ, and its own stopping."""

    phi: float
    max_steps: int
    patience: int
    eval_steps: int
    pooling: Literal["cls", "mean"]
    scheduler: str
    held_out: float
    exclude_eval_sentences: bool
    pool: str | None = None  # the corpus' sentences, or
    triples: str | list[str] | None = None  # NLI rows (anchors and positives) from these files
    triples_digest: str | list[str] | None = None
    triples_format: Literal["triples", "nli"] | None = None


RCL_ENTROPY = Stage("rcl_entropy", 1, "train one entropy model of Regularized Contrastive Learning (pretrain.objective "
                    "rcl, one per rcl_phis value) and store its embeddings of every training query and document",
                    "augsbert.jobs.rcl_entropy:run", section="pretrain",
                    runtime=("eval_batch_size", "model", "triples"),
                    raw_inputs=lambda node: triples_inputs(node),  # the NLI triples: checked when Snakemake plans
                    roles=("rcl_entropy_0",),  # --role rcl_entropy_<n> for the n-th φ
                    seconds_per_item=0.01, trains=True, params=RclEntropyParams, items=pool_items,
                    gpu_sequences=2)  # query and document
STAGES = (RCL_ENTROPY,)

# what trains an entropy model: the final model's own options (selection, the other φ values) stay out
RCL_ENTROPY_KEYS = ("model", "pooling", "max_length", "batch_size", "lr", "warmup_ratio", "weight_decay",
                    "scheduler", "group_by_length", "megabatch", "held_out", "exclude_eval_sentences",
                    "eval_batch_size", "config_kwargs")


def rcl_entropy(graph: Graph, corpus: str, options: dict, seed: int, inputs: dict[str, Node]) -> dict[str, Node]:
    """One node per φ of `rcl_phis`, as the pretrain node's inputs entropy_0, entropy_1, ...; the entropy models'
    own options leave `options` (the pretrain node's)."""
    params = {k: options[k] for k in RCL_ENTROPY_KEYS if k in options}
    params.update(seed=seed, patience=options["rcl_patience"], eval_steps=options["rcl_eval_steps"],
                  max_steps=options["rcl_entropy_max_steps"] or options["max_steps"])
    if "triples" in options:  # NLI rows: the corpus dataset is not read
        params.update(triples=options["triples"], triples_digest=options["triples_digest"])
        if "triples_format" in options:
            params["triples_format"] = options["triples_format"]
        files = [options["triples"]] if isinstance(options["triples"], str) else options["triples"]
        entropy_inputs, name = {"eval": inputs["eval"]}, "+".join(Path(f).stem for f in files)
    else:
        params["pool"] = options["pool"]
        entropy_inputs, name = dict(inputs), corpus
    planned = {f"entropy_{i}": graph.add(RCL_ENTROPY, f"{name}.phi{phi:g}", {**params, "phi": phi}, entropy_inputs)
               for i, phi in enumerate(options["rcl_phis"])}
    for key in ("rcl_patience", "rcl_eval_steps", "rcl_entropy_max_steps"):  # in the entropy keys only
        options.pop(key)
    return planned


# the pre-training objectives whose pretrain node reads this stage's artifacts: objective -> its extra inputs
# (planned here, in the stage that computes them: the objectives' declarations sit below the stages)
OBJECTIVE_INPUTS = {"rcl": rcl_entropy}
