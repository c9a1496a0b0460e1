"""The `language_suite` stage: a Bi-Encoder's figures per language of a parallel dataset (job:
augsbert.jobs.language_suite): monolingual STS (l-l), cross-lingual STS (en-l, l-en: sentence1 in one language,
sentence2 in the other), translation retrieval accuracy and the share of [UNK] tokens, for the zero-shot base, the
multilingual teacher and the multilingual student. It encodes as the suites do (`suite.batch_size`,
`suite.max_length`), so the three rows' figures compare."""

from __future__ import annotations

from dataclasses import dataclass

from ..params import ModelParams
from ..planning.graph import Node, SeedPlan
from .base import Stage
from .multilingual import teacher_row
from .sizes import split_sizes

ROLE_SUFFIX = "_language_suite"  # a suite's role: the role of the row whose model it evaluates, suffixed
# the rows it scores: the zero-shot base, each Bi-Encoder that can teach, the multilingual student
ROWS = ("zero_shot", "student", "lower_bound", "multilingual")


@dataclass(frozen=True, kw_only=True)
class LanguageSuiteParams(ModelParams):
    """The encoding options of the `suite` section, the language reported (None: every language, its figures
    named `<figure>@<language>`) and, for the zero-shot base only, `model` (else the `model` input)."""

    model: str | None = None
    batch_size: int
    max_length: int
    language: str | None = None


def test_items(plan, node: Node) -> int:
    """What a language suite encodes: per language, its test pairs three times (l-l, en-l, l-en) and its held-out
    sentences with their originals (about as many again): the source language's test pairs x 4 x languages."""
    data = plan.nodes[dict(node.inputs)["parallel"]]
    languages = 1 if node.params.get("language") else len(data.settings.get("languages") or [None])
    return 4 * split_sizes(data, plan)["test"] * languages


def evaluated_row(role: str) -> str:
    """The row whose model the suite in `role` evaluates (`multilingual_language_suite` -> `multilingual`)."""
    return role.removesuffix(ROLE_SUFFIX)


LANGUAGE_SUITE = Stage("language_suite", 1, "evaluate a Bi-Encoder per language of a parallel dataset: monolingual "
                       "and cross-lingual STS, translation retrieval, [UNK] share (with --config, --role "
                       "<row>_language_suite)", "augsbert.jobs.language_suite:run", section="suite",
                       runtime=("batch_size", "model"), roles=tuple(f"{row}{ROLE_SUFFIX}" for row in ROWS),
                       seconds_per_item=0.0005, base_mem_mb=8000, group="evaluation", cache=False,
                       params=LanguageSuiteParams, plan=lambda seed_plan: plan_language_suites(seed_plan),
                       needs=("source_embeddings", *ROWS), items=lambda plan, node: test_items(plan, node),
                       evaluates=evaluated_row)
STAGES = (LANGUAGE_SUITE,)


def language_suite(seed_plan: SeedPlan, parallel: Node, model: Node) -> Node:
    """The language suite of one Bi-Encoder (a trained one, or the zero-shot base model)."""
    exp = seed_plan.config
    params = {**{k: exp["suite"][k] for k in ("batch_size", "max_length")},
              "language": exp["multilingual"]["language"]}
    inputs = {"parallel": parallel}
    if model.stage == "zero_shot":
        params["model"] = model.settings["model"]
    else:
        inputs["model"] = model
    return seed_plan.graph.add(LANGUAGE_SUITE, f"{model.name}.{params['language'] or 'all'}", params, inputs)


def plan_language_suites(seed_plan: SeedPlan) -> dict[str, Node]:
    """The language suite of the zero-shot base (a row with `models: [zero_shot]`), the teacher and the student."""
    roles = seed_plan.roles
    if "multilingual" not in roles:
        return {}
    parallel = seed_plan.graph.nodes[dict(roles["source_embeddings"].inputs)["parallel"]]
    scored = {"zero_shot", teacher_row(seed_plan), "multilingual"}
    return {f"{row}{ROLE_SUFFIX}": language_suite(seed_plan, parallel, roles[row])
            for row in ROWS if row in scored and row in roles}

