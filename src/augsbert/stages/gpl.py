"""The `gpl` stage, GPL's (Wang et al., NAACL 2022) Bi-Encoder: it learns the `margins` of a pretrained
Cross-Encoder over mined negatives with MarginMSE or KL-divergence for a step budget (job: augsbert.jobs.gpl).
Its planning hook plans GPL's chain: generated queries (`queries`), mined negatives, margins, the student."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError
from ..planning.graph import Node, SeedPlan
from ..params import section_options, slice_of
from .base import MODEL_SETTINGS, Row, Stage
from .negatives import PER_STEP, mined_pairs, negatives_node, negatives_per_row
from .queries import passage_tokens, queries_node
from .margins import MARGINS, mined_negatives
from .sizes import DEFAULT_MAX_LENGTH, epochs, input_splits, metrics, text_tokens
from .student import StudentOptions
from .training_options import Trained


TRAINED = "trained"  # teacher.pretrained: the experiment's own trained Cross-Encoder (an offline demo's stand-in)


# the `student` section's options a GPL student reads: its loss over the mined list (the hook refuses the others),
# its score, the optimiser, its length and evaluation batch, and the step budget (`max_steps`; unset: `epochs` passes
# over the list; the spec holds the one that counts)
StudentSlice = slice_of(StudentOptions, "loss", "similarity", "epochs", "max_steps", "batch_size", "lr", "warmup_ratio",
                        "weight_decay", "max_length", "eval_batch_size", "checkpoint_steps")


@dataclass(frozen=True, kw_only=True)
class GplParams(StudentSlice, Trained):
    """A GPL student: the `student` section's `StudentSlice`, and the model it starts from: `model`, or None for the
    `init` input (the pretrained encoder)."""

    model: str | None = None  # resolved: None when the student starts from the `init` input


GPL_STUDENT = Stage("gpl", 1, "train a Bi-Encoder on a pretrained Cross-Encoder's margins over mined negatives "
                    "(GPL: MarginMSE or KL-divergence, a step budget)", "augsbert.jobs.gpl:run",
                    section="student", runtime=MODEL_SETTINGS, roles=("gpl",), seconds_per_item=0.02,
                    mb_per_item=0.002, gpu_sequences=3, trains=True, params=GplParams,
                    plan=lambda seed_plan: plan_gpl(seed_plan), needs=("data", "teacher", "pretrained"),
                    rows={"gpl": Row(60, "GPL", "Bi-Encoder trained on a pretrained Cross-Encoder's margins over mined "
                                                "negatives (GPL), no gold")}, estimate="distill",
                    counts=lambda plan, node: distill_counts(plan, node))
STAGES = (GPL_STUDENT,)


def plan_gpl(seed_plan: SeedPlan) -> dict[str, Node]:
    """`models: [gpl]`: negatives of the qrels' (query, positive) pairs, `teacher.pretrained`'s margins, the student."""
    exp, name = seed_plan.config, seed_plan.experiment
    if "gpl" not in exp["models"]:
        return {}
    teacher = exp["teacher"]
    if not teacher["pretrained"]:
        raise ConfigError(f"experiments.{name}.teacher.pretrained: a `gpl` model learns the margins of a "
                          "Cross-Encoder used as it is; name one (GPL: cross-encoder/ms-marco-MiniLM-L-6-v2)")
    if not exp["negatives"]["retrievers"]:
        raise ConfigError(f"experiments.{name}.negatives.retrievers: a `gpl` model needs mined negatives; name a "
                          "retriever (`bm25` or a Bi-Encoder; GPL: msmarco-distilbert-base-v3, msmarco-MiniLM-L-6-v3)")
    dataset = exp["dataset"]
    generated = bool(exp["queries"]["generator"])
    if not generated and seed_plan.graph.config["datasets"][dataset]["loader"] != "beir":
        raise ConfigError(f"experiments.{name}: a `gpl` model needs (query, positive) pairs: set "
                          f"`queries.generator` (a T5 query generator, or `inverse_cloze` offline), or use a "
                          f"BEIR-format dataset's qrels (dataset '{dataset}' is not `loader: beir`)")
    student = exp["student"]
    loss = student["loss"] if student["loss"] in ("margin_mse", "kl_div") else None
    if loss is None:
        raise ConfigError(f"experiments.{name}.student.loss: a `gpl` model learns margins over mined negatives: "
                          f"`margin_mse` or `kl_div` (got {student['loss']})")
    graph = seed_plan.graph
    roles: dict[str, Node] = {}
    if generated:
        roles["queries"] = queries_node(seed_plan)
    mined = negatives_node(seed_plan, roles.get("queries", seed_plan.roles["data"]), generated)
    scoring = {"score_scale": teacher["score_scale"], "max_length": teacher["max_length"],
               "batch_size": exp["labels"]["batch_size"]}
    if exp["negatives"]["mode"] == PER_STEP:  # the margins of the negatives the student will draw, seeded
        budget = {"max_steps": student["max_steps"]} if student["max_steps"] is not None \
            else {"epochs": student["epochs"]}
        scoring["draws"] = {"seed": seed_plan.seed, "batch_size": student["batch_size"], **budget}
    if teacher["pretrained"] == TRAINED:  # the chain's teacher, trained on the target's gold: not label-free
        if "teacher" not in seed_plan.roles or teacher["arch"] != "ce":
            raise ConfigError(f"experiments.{name}.teacher.pretrained: `trained` scores with the experiment's own "
                              "trained Cross-Encoder: add `teacher` to `models` and set teacher.arch: ce")
        margins = graph.add(MARGINS, f"{mined.name}.trained", scoring,
                            {"negatives": mined, "teacher": seed_plan.roles["teacher"]})
    else:
        margins = graph.add(MARGINS, f"{mined.name}.{teacher['pretrained'].rsplit('/', 1)[-1]}",
                            {"model": teacher["pretrained"], **scoring}, {"negatives": mined})
    options = section_options(StudentSlice, student)
    options.pop("epochs" if student["max_steps"] is not None else "max_steps")  # the step budget (GPL: 140K steps)
    params = {**options, "model": student["base_model"] or exp["base_model"], "seed": seed_plan.seed}
    # `data`: a target with test pairs (Lee, STS) gets the student's test Spearman beside the retrieval suite
    inputs = {"margins": margins, "data": seed_plan.roles["data"]}
    if student["base"] == "pretrained":  # TSDAE + GPL: the student starts from the `pretrain` stage's encoder
        if "pretrained" not in seed_plan.roles:
            raise ConfigError(f"experiments.{name}.student.base: `pretrained` needs `pretrain.objective` "
                              "(TSDAE + GPL: tsdae)")
        inputs["init"] = seed_plan.roles["pretrained"]
        params.pop("model")
    return {**roles, "negatives": mined, "margins": margins,
            "gpl": graph.add(GPL_STUDENT, f"{dataset}.gpl", params, inputs)}


# ------------------------------------------------------------------ what the time estimate counts (kind `distill`)
def distill_counts(plan, node) -> dict:
    """What the GPL student's job computes: `steps` of `batch` (query, positive, `kept` negatives) tuples, each text
    encoded alone (`tokens` per tuple, within max_length), then the target's `test` pairs scored (`test_tokens`
    each)."""
    p = node.params
    negatives = mined_negatives(plan, node)
    pairs, _, query = mined_pairs(plan, negatives)
    rows = int(metrics(negatives).get("rows") or pairs)
    kept, _ = negatives_per_row(negatives)
    batch = int(p["batch_size"])
    steps = int(p["max_steps"]) if p.get("max_steps") else math.ceil(rows / batch) * epochs(node, GplParams)
    max_length = float(p.get("max_length") or DEFAULT_MAX_LENGTH)
    tokens = min(max_length, query + 2) + (1 + kept) * min(max_length, passage_tokens(plan, negatives) + 2)
    return {"steps": steps, "batch": batch, "kept": kept, "tokens": tokens,
            "test": input_splits(plan, node).get("test", 0),
            "test_tokens": 2 * min(max_length, text_tokens(plan, node) + 2)}
