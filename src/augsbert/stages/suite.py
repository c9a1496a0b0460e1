"""The `suite` stage: a Bi-Encoder on the STS suite, topic classification, USEB, MTEB and alignment/uniformity
(job: augsbert.jobs.suite)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError
from ..store.fingerprints import path_digest
from ..store.graph import Graph, Node, SeedPlan
from ..params import Params
from .base import Stage
from .data import has_topics


@dataclass(frozen=True, kw_only=True)
class TopicTask(Params):
    """`evaluation.topic`: logistic regression on frozen embeddings; `prompted` = the delimiter when on."""

    epochs: int
    lr: float
    batch_size: int
    test_fraction: float
    seed: int = 0
    prompted: str | None = None


@dataclass(frozen=True, kw_only=True)
class SuiteParams(Params):
    """The tasks `suite_tasks` found (task -> file, directory or "hub"; the others in `skipped`, with why),
    their digests, and the encoding options. `model` only for the zero-shot model (else the `model` input)."""

    batch_size: int
    max_length: int
    sts: dict[str, str] = field(default_factory=dict)
    useb: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # key material: a task file's content
    sts_format: dict[str, str] = field(default_factory=dict)
    topic: TopicTask | None = None
    positive_threshold: float | None = None  # the diagnostics (alignment / uniformity) when set
    mteb: dict[str, str] | None = None
    retrieval: dict[str, str] | None = None  # BEIR-format qrels: split, score_function, without_relevant
    mteb_version: str | None = None
    model: str | None = None
    model_identity: dict[str, str] = field(default_factory=dict)
    hub_revisions: dict[str, str] = field(default_factory=dict)


# Bi-Encoder roles that get the evaluation suite (STS suite, topic, USEB, diagnostics).
SUITE_ROLES = ("zero_shot", "pretrained", "classifier", "lower_bound", "student", "gpl")
def hub_datasets(node: Node) -> list[str]:
    """The hub datasets of the STS suite's tasks read from the hub (`sts: {task: hub}`)."""
    from ..data.suite_files import HUB_DATASETS  # the data package imports pandas; planning does not

    return [HUB_DATASETS[task] for task, where in (node.settings.get("sts") or {}).items() if where == "hub"]


SUITE = Stage("suite", 2, "evaluate a Bi-Encoder on the STS suite, topic classification, USEB and "
              "alignment/uniformity (--role zero_shot_suite | pretrained_suite | lower_bound_suite | student_suite)",
              "augsbert.jobs.suite:run",
              # the tasks run and their files enter the key by digest
              section="evaluation", runtime=("batch_size", "model", "sts", "useb", "mteb", "skipped"),
              roles=("student_suite", "lower_bound_suite", "pretrained_suite", "classifier_suite", "zero_shot_suite",
                     "gpl_suite"),
              seconds_per_item=0.002, aliases=("evaluate-suite",), rule_alias="evaluate_suite", group="evaluation",
              cache=False, params=SuiteParams, raw_inputs=lambda node: local_files(node),
              plan=lambda seed_plan: plan_suites(seed_plan), needs=SUITE_ROLES, estimate="test+suites",
              hub_datasets=hub_datasets)
STAGES = (SUITE,)

STS_TASKS_DIR = "sts_suite"
USEB_DIR = "useb/data-eval"


def suite_tasks(config: dict, evaluation: dict, dataset: dict) -> dict:
    """Which suite tasks can run, decided while planning so that adding a data file changes the key.

    Each task maps to its local file or directory, "hub" (STS from mteb), or
    None with the reason it is skipped in `skipped`.
    """
    root = Path(config["data_dir"])
    suites = evaluation["suites"]
    tasks: dict = {"sts": {}, "useb": {}, "skipped": {}}
    if "sts" in suites:
        from ..data.suite_files import locate_task  # the data package imports pandas: only for local tasks

        for task in evaluation["sts_tasks"]:
            override = (evaluation.get("sts_files") or {}).get(task)
            found, fmt = locate_task(root / STS_TASKS_DIR, root, task, override)
            if found:
                tasks["sts"][task] = os.path.normpath(found)
                if fmt != "tsv":  # a key only for release layouts: suites of TSV files keep their keys
                    tasks.setdefault("sts_format", {})[task] = fmt
            elif evaluation["sts_hub"]:
                tasks["sts"][task] = "hub"
            else:
                path = root / (override if isinstance(override, str) else override["path"]) if override \
                    else root / STS_TASKS_DIR / f"{task}.tsv"
                tasks["skipped"][task] = f"no file {os.path.normpath(path)} (and evaluation.sts_hub is false)"
    if "useb" in suites:
        for task in evaluation["useb_tasks"]:
            path = root / USEB_DIR / task
            if path.is_dir():
                tasks["useb"][task] = os.path.normpath(path)
            else:
                tasks["skipped"][task] = f"no directory {os.path.normpath(path)} (unzip USEB's data-eval.zip there)"
    if "topic" in suites:
        if has_topics(dataset):
            tasks["topic"] = {k: v for k, v in evaluation["topic"].items() if k != "prompted"}
            if evaluation["topic"]["prompted"]:  # a key only when on: existing suites keep their keys
                tasks["topic"]["prompted"] = evaluation.get("topic_delimiter", "¥")
        else:
            tasks["skipped"]["topic"] = "the dataset has no topic labels"
    if "diagnostics" in suites and dataset["loader"] == "beir":
        tasks["skipped"]["diagnostics"] = "a BEIR-format dataset has no test pairs"
    elif "diagnostics" in suites:
        tasks["positive_threshold"] = evaluation["positive_threshold"]
    if "retrieval" in suites:
        if dataset["loader"] == "beir":
            tasks["retrieval"] = {k: evaluation["retrieval"][k] for k in ("split", "score_function",
                                                                          "without_relevant")}
        else:
            tasks["skipped"]["retrieval"] = "the dataset is not BEIR-format (`loader: beir`)"
    if "mteb" in suites:
        tasks.update(mteb_tasks(evaluation.get("mteb") or {}, root, tasks["skipped"]))
    return tasks


def mteb_tasks(options: dict, root: Path, skipped: dict) -> dict:
    """MTEB task -> local directory or "hub"; the mteb version enters the key (it pins the hub data
    revisions and computes the scores). Checked here so a missing package stops the dry run."""
    from ..data.suite_files import LOCAL_DIR, MISSING_MTEB, mteb_version  # the data package imports pandas

    version = mteb_version()
    if version is None:
        raise ConfigError(MISSING_MTEB)
    if not options.get("tasks"):
        raise ConfigError("evaluation.suites has `mteb` but evaluation.mteb.tasks is empty: name the MTEB "
                          "tasks to run (e.g. [STS12, SICK-R])")
    found: dict[str, str] = {}
    for name in options["tasks"]:
        path = root / (options.get("local") or {}).get(name, f"{LOCAL_DIR}/{name}")
        if path.is_dir():
            found[name] = os.path.normpath(path)
        elif options.get("hub", True):
            found[name] = "hub"
        else:
            skipped[f"mteb:{name}"] = f"no directory {os.path.normpath(path)} (and evaluation.mteb.hub is false)"
    return {"mteb": found, "mteb_version": version}


def suite(graph: Graph, exp: dict, data: Node, model: Node) -> Node:
    """Evaluation-suite node of one Bi-Encoder (a trained student, or the zero-shot base model)."""

    tasks = suite_tasks(graph.config, {**exp["evaluation"], "topic_delimiter": exp["topic_delimiter"]},
                        graph.config["datasets"][exp["dataset"]])
    params = {**tasks, **{k: exp["evaluation"][k] for k in ("batch_size", "max_length")},
              "digests": {task: path if path == "hub" else path_digest(graph.digests, path)
                          for task, path in {**tasks["sts"], **tasks["useb"],
                                             **{f"mteb:{t}": p for t, p in tasks.get("mteb", {}).items()}}.items()}}
    inputs = {"data": data}
    if model.stage == "zero_shot":
        params["model"] = model.settings["model"]
    else:
        inputs["model"] = model
    return graph.add(SUITE, f"{data.name}.{model.name}", params, inputs)


def local_files(node: Node) -> list[str]:
    """Local files a suite node reads: by content in its key (a replaced file gets a new key), not Snakemake inputs."""
    params = node.settings
    paths = [p for p in [*params.get("sts", {}).values(), *params.get("mteb", {}).values()] if p != "hub"] \
        + list(params.get("useb", {}).values())
    return sorted(paths)


def plan_suites(seed_plan: SeedPlan) -> dict[str, Node]:
    """The evaluation suite of every Bi-Encoder row of the run (`evaluation.suites`), role `<row>_suite`."""
    exp, roles = seed_plan.config, seed_plan.roles
    if not exp["evaluation"]["suites"]:
        return {}
    return {f"{role}_suite": suite(seed_plan.graph, exp, roles["data"], roles[role]) for role in SUITE_ROLES
            if role in roles}
