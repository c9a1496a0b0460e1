"""What the planning hooks read of an experiment's run: the models it asks for, in-domain or transfer, the
gold its models learn, the target its pairs come from and its topic prompt.

In-domain the teacher and the lower bound learn the target's gold; with `source` (domain transfer) they
learn the source's gold and are tested on the target, and no target label enters any trained model:
silver candidates come from the target's train *sentences*, the teacher's gold (for KDE references,
re-labelling and `use_gold_labels`) is the source's. With `gold_fraction` < 1 a seeded subset of the gold
(role `gold_subset`) stands for the gold in every trained model.
"""

from __future__ import annotations

from ..store.graph import Node, SeedPlan

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
    if not options.get("group_by_length", False):
        options.pop("megabatch", None)
    for key in ("early_stopping_patience", "torch_compile"):
        if not options.get(key):
            options.pop(key, None)
    return options


def from_adapted(inputs: dict[str, Node]) -> bool:
    return "init" in inputs and inputs["init"].stage == "adapt"
