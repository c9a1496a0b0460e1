"""What the planning hooks read of an experiment's run: the models it asks for, in-domain or transfer, the
gold its models learn, the target its pairs come from and its topic prompt.

In-domain the teacher and the lower bound learn the target's gold; with `source` (domain transfer) they
learn the source's gold and are tested on the target, and no target label enters any trained model:
silver candidates come from the target's train *sentences*, the teacher's gold (for KDE references,
re-labelling and `use_gold_labels`) is the source's. With `gold_fraction` < 1 a seeded subset of the gold
(role `gold_subset`) stands for the gold in every trained model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..params import Params, option
from ..planning.graph import Node, SeedPlan

# What `models` may name. Not the registry's rows: `pretrained` is a row that `pretrain.objective` asks for, not
# `models`, and `trans_encoder` has no row of its own (its rounds are the numbered rows te_cross_<k>, te_bi_<k>);
# tests/test_schema_gen.py checks that the two differ by exactly these
MODELS = ("zero_shot", "lower_bound", "teacher", "student", "classifier", "trans_encoder", "gpl", "multilingual")


@dataclass(frozen=True, kw_only=True)
class ExperimentOptions(Params):
    """An experiment's own keys among its stage options (`defaults` or the experiment, beside the stages'
    sections): what the functions below and the planning hooks read of a run. augsbert.reference.schema writes them as
    the properties of `stage_options` (its generated block `experiment`)."""

    base_model: str = option("minilm-l6", """
        Model every stage starts from: a local directory, a packaged alias (`minilm-l6` = the bundled
        all-MiniLM-L6-v2) or a Hugging Face hub id (needs network or a filled HF cache; offline it fails with a
        message telling how to give a local copy).""")
    models: list[str] = option(["zero_shot", "lower_bound", "teacher", "student"], """
        Models the experiment trains and reports: `zero_shot` (base model, no training), `lower_bound`
        (Bi-Encoder on gold only, SBERT), `teacher` (its test score is the upper bound), `student` (Bi-Encoder
        distilled from the teacher's labels, with or without gold), `classifier` (thesis 5.6.1 baseline: the
        encoder fine-tuned with a linear head on the target's topics, then evaluated as a Bi-Encoder),
        `trans_encoder` (Trans-Encoder's rounds of bi-to-cross and cross-to-bi distillation on unlabelled pairs, no
        gold label; see `trans_encoder`), `gpl` (a Bi-Encoder learning the margins of `teacher.pretrained` over the
        negatives `negatives` mines, GPL; no gold label, docs/methods/gpl.md), `multilingual` (a student that learns
        the teacher's embeddings of parallel sentences' originals for the originals and their translations:
        multilingual knowledge distillation, `multilingual`, docs/methods/multilingual.md).""",
        items={"type": "string", "enum": list(MODELS)}, uniqueItems=True)
    gold_fraction: float = option(1, """
        Few labels: the teacher, the lower bound and the student learn a seeded subset of this fraction of the
        gold train pairs (the source's in domain transfer), drawn anew for each seed (numpy PCG64 seeded with the
        run's seed; at least 2 pairs), so the spread over seeds includes which pairs were labelled. The other train
        pairs stay as unlabelled pairs, their scores dropped: `candidates.strategies: [target_pairs]` labels
        exactly them, and `candidates.pool: unlabeled` / `train+unlabeled` include their sentences. Dev and test
        splits are unchanged (the models still select their epoch on the full dev split, as the thesis' protocol
        does). 1 = all gold, no subset stage (keys unchanged).""", exclusiveMinimum=0, maximum=1)  # 1: the
    # schema's (and the reference's) default as it was written, an integer
    topic_prompt: Literal["none", "prompted", "hidden"] = option("none", """
        Topic information (thesis 4.4, 5.6): `prompted` puts each sentence's topic in front of it (`[CLS] topic ¥
        text [SEP]`) for MLM adaptation, the teacher, labelling, the student and the classifier; `hidden`: the
        same for MLM adaptation, the teacher and labelling, but the student learns the teacher's scores on the
        plain texts. Texts without a known topic (e.g. STS-B as the teacher's source) stay plain; the lower bound
        always learns plain gold. `none` (the thesis' "Original"): no prompts.""")
    topic_delimiter: str = option("¥", """
        Token that ends the topic prompt (thesis: ¥, unused in its data). Added to the tokenizer, with a new
        trained embedding, only if the tokenizer does not keep it as one token (the stage log says which).""",
        minLength=1)


# The inputs of a model's node that the reports and the export read (the hooks give them these names)
INPUT_DATA, INPUT_LABELS, INPUT_TEACHER = "data", "labels", "teacher"
# The role of the target's data artifact in every run (the data stage's first role): its split sizes, skipped rows
# and warnings head an experiment's results file
TARGET_DATA = "data"


def wants(seed_plan: SeedPlan, model: str) -> bool:
    """Whether the experiment's `models` list names `model` (a table row: student, teacher, zero_shot, ...)."""
    return model in seed_plan.config["models"]


def source(exp: dict) -> str:
    """The dataset whose gold the models learn: `source` in domain transfer, else the target."""
    return exp["source"] or exp["dataset"]


def transfer(exp: dict) -> bool:
    return source(exp) != exp["dataset"]


def gold(seed_plan: SeedPlan) -> Node:
    """The gold the models learn: the seed's gold subset, else the source's (transfer) or target's data."""
    roles = seed_plan.roles
    return roles.get("gold_subset") or roles.get("source_data") or roles[TARGET_DATA]


def trained_on(seed_plan: SeedPlan) -> dict[str, Node]:
    """The inputs of a model trained on gold: its gold (`data`) and, in transfer, the target it is tested on."""
    tested_on = {"eval": seed_plan.roles[TARGET_DATA]} if transfer(seed_plan.config) else {}
    return {INPUT_DATA: gold(seed_plan), **tested_on}


def target(seed_plan: SeedPlan) -> Node:
    """What sampling and labelling read as the target: in-domain the gold subset (its unlabelled pairs), if any."""
    roles = seed_plan.roles
    return roles[TARGET_DATA] if transfer(seed_plan.config) else roles.get("gold_subset", roles[TARGET_DATA])


def strategies(exp: dict) -> list[str]:
    """The sampling strategies that draw candidates (`none` draws none)."""
    return [s for s in exp["candidates"]["strategies"] if s != "none"]


def topic_prompt(exp: dict) -> str | None:
    """The topic delimiter when the experiment prompts (thesis 4.4), else None (the data stage's check has
    made sure the data has topics)."""
    return None if exp["topic_prompt"] == "none" else exp["topic_delimiter"]


def inert_grouping_dropped(options: dict) -> dict:
    """A copy of a training section without `megabatch` when `group_by_length` is off (it changes nothing then),
    and without `early_stopping_patience` when it is 0 and `torch_compile` when false (off: sections planned
    before they existed keep their keys)."""
    options = dict(options)
    if not options.get("group_by_length"):
        options.pop("megabatch", None)
    for key in ("early_stopping_patience", "torch_compile"):
        if not options.get(key):
            options.pop(key, None)
    return options


def from_adapted(inputs: dict[str, Node]) -> bool:
    return "init" in inputs and inputs["init"].stage == "adapt"
