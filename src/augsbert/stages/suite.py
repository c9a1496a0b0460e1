"""The `suite` stage: a Bi-Encoder on the STS suite, topic classification, USEB, MTEB and alignment/uniformity
(job: augsbert.jobs.suite)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from ..errors import ConfigError
from ..store.fingerprints import path_digest
from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params, option, resolved, slice_of
from .base import Stage
from .data import has_topics


StsTask = Literal["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"]
STS_TASKS = list(get_args(StsTask))
UsebTask = Literal["askubuntu", "cqadupstack", "twitterpara", "scidocs"]
NAME = {"type": "string", "minLength": 1}


@dataclass(frozen=True, kw_only=True)
class TopicOptions(Params):
    """`suite.topic`: logistic regression on frozen embeddings."""

    epochs: int = option(10, "Classifier epochs.", minimum=1)
    lr: float = option(0.001, "Adam learning rate.", exclusiveMinimum=0)
    batch_size: int = option(32, "Classifier batch size.", minimum=1)
    test_fraction: float = option(0.2, "Share of sentences (per topic) held out for the F1.", exclusiveMinimum=0,
                                  exclusiveMaximum=1)
    seed: int = option(0, "Seed of the split and the classifier.", **{"$ref": "#/$defs/seed"})
    prompted: bool = option(False, """
        Also evaluate on prompted input (thesis Tables 6.14-6.17): the topic
        F1 with every sentence prompted by its true topic, and the
        target test Spearman with both sentences prompted
        (`prompted_topic_macro_f1`, `prompted_spearman`); needs topic labels.""")


@dataclass(frozen=True, kw_only=True)
class MtebOptions(Params):
    """`suite.mteb`."""

    tasks: list[str] = option([], """
        MTEB task names as MTEB spells them (STS12, SICK-R,
        STSBenchmark, SciFact, Banking77Classification, ...); an
        unknown name stops the suite job with the name.""", items=NAME, uniqueItems=True)
    hub: bool = option(True, """
        Tasks without a local copy are downloaded by MTEB from the
        Hugging Face hub (at the revision the installed mteb pins; a
        failed download fails the job). false = list them as skipped.
        Offline, a dataset already in the Hugging Face cache also loads
        with HF_HUB_OFFLINE=1.""")
    local: dict[str, str] = option({}, """
        Task -> directory with its data (relative to `data_dir`);
        default `<data_dir>/mteb/<task>/` when present. The directory
        is what `datasets.load_dataset` reads in place of the task's hub
        dataset: a copy of it (`hf download mteb/sts12-sts --repo-type
        dataset --local-dir data/raw/mteb/STS12`) or, for a one-table
        task such as STS, a file per split (`test.jsonl` with
        sentence1, sentence2, score). The task keeps MTEB's metadata
        (splits, main score, score range). Keyed by content.""", additionalProperties=NAME)


@dataclass(frozen=True, kw_only=True)
class RetrievalOptions(Params):
    """`suite.retrieval`."""

    split: Literal["test", "dev", "train"] = option(
        "test", "Which qrels file is scored (BEIR reports test; MS MARCO's is dev).")
    score_function: Literal["cos", "dot"] = option("cos", """
        Cosine of normalised embeddings, or the dot product of raw ones
        (models trained with it, e.g. TAS-B and GPL's students: BEIR's
        `dot`).""")
    without_relevant: Literal["zero", "skip"] = option("zero", """
        A judged query whose judgements are all 0: `zero` = it scores 0
        and counts in the means (pytrec_eval / trec_eval, so BEIR);
        `skip` = left out of the means. Counted either way.""")


@dataclass(frozen=True, kw_only=True)
class SuiteOptions(Params):
    """The `suite` section (its schema section is written from here: augsbert.reference.schema)."""

    SECTION = "suite"
    SECTION_DESCRIPTION = "How models are evaluated on the target test split."

    batch_size: int = option(64, "Encoding batch size.", minimum=1)
    max_length: int = option(256, """
        Maximum tokens per text for Bi-Encoder encoding (longer texts are
        truncated; Lee documents are 100-200 words, about 150-300 tokens).""", minimum=8)
    suites: list[Literal["sts", "topic", "useb", "diagnostics", "mteb", "retrieval"]] = option(
        ["sts", "topic", "useb", "diagnostics"], """
        Extra evaluations of every Bi-Encoder (zero-shot, lower bound,
        students), one `suite` job per model: `sts` = STS12-16,
        STS-B, SICK-R Spearman and their average; `topic` = frozen encoder +
        linear classifier macro-F1 on the dataset's topics (BWS);
        `useb` = AskUbuntu, CQADupStack, TwitterPara, SciDocs; `diagnostics`
        = alignment and uniformity on the target test split; `mteb` = the
        tasks of `suite.mteb.tasks` run by the `mteb` package (the
        optional extra `pip install 'augsbert[mteb]'`; not a default); `retrieval` =
        nDCG@10, MRR@10, Recall@100 on a BEIR-format dataset's qrels
        (`loader: beir`, `suite.retrieval`; not a default). Tasks whose
        data is absent are listed as skipped in the results, never dropped
        silently from an average. [] = none (no extra jobs).""", uniqueItems=True)
    sts_tasks: list[StsTask] = option(STS_TASKS, """
        STS-suite tasks and the average over them. Each is read from
        `<data_dir>/sts_suite/<task>.tsv` (header sentence1, sentence2, score; score 0-5) or, if
        that is absent, from the files as released: sts12 ... sts16 from
        `sts_suite/STS/STS<yy>-en-test/` (SentEval's `data/downstream/STS/` copied to `sts_suite/STS/`; all subsets of a year
        pooled into one Spearman, per-subset figures in the suite's metrics), stsb from
        `sts_suite/STS/STSBenchmark/sts-test.csv`, sickr from `sts_suite/SICK.txt` (rows with
        SemEval_set TEST) or `sts_suite/SICK/SICK_test_annotated.txt`; `sts_files` names other
        places.""", uniqueItems=True)
    sts_files: dict[str, Any] = option({}, """
        Per STS task, its data somewhere else (relative paths are under `data_dir`): a path, or
        `{path, format}`. The format is told from the name or header (a directory of STS.gs.*.txt
        files = `senteval`, SICK*.txt or a SemEval_set / relatedness_score header = `sick`,
        sts-*.csv = `stsbenchmark`, a sentence1/sentence2/score header = `tsv`); set `format` when
        neither tells. A missing path counts as absent data (hub or skipped, see `sts_hub`).""",
        propertyNames={"enum": STS_TASKS}, additionalProperties={
        "oneOf": [NAME, {"type": "object", "required": ["path"], "additionalProperties": False,
                         "properties": {"path": NAME,
                                        "format": {"enum": ["tsv", "senteval", "stsbenchmark", "sick"]}}}]})
    sts_hub: bool = option(False, """
        Fetch STS tasks without a local file from the Hugging Face hub (mteb/sts12-sts ...
        mteb/sickr-sts, test split). Needs internet; a failed download lists the task as skipped
        with the error.""")
    mteb: MtebOptions = option(MtebOptions, """
        The `mteb` suite (when `suites` has `mteb`; needs the mteb package: `pip install
        'augsbert[mteb]'`, else the dry run stops saying so). Each task's main score x 100 is
        `mteb_<task>` in the results, `mteb_avg` their mean (MTEB's task mean); full MTEB scores and
        MTEB's result files are in the suite artifact.""")
    retrieval: RetrievalOptions = option(RetrievalOptions, """
        The `retrieval` suite on a BEIR-format dataset (`loader: beir`): every passage and every
        judged query of the qrels split encoded, exact search of the top 100 (faiss' flat index from
        200,000 passages on), nDCG@10, MRR@10 and Recall@100 x 100 as BEIR computes them (graded
        gains; a judged query without a relevant passage scores 0, as pytrec_eval counts it:
        `without_relevant`). Another dataset lists the suite as skipped.""")
    useb_tasks: list[UsebTask] = option(list(get_args(UsebTask)), """
        USEB tasks, read from `<data_dir>/useb/data-eval/<task>/` as unzipped from the release:
        AskUbuntu MAP, CQADupStack MAP@100 (forum average), TwitterPara AP (TURL, PIT average),
        SciDocs MAP (Cite, Co-Cite, Co-Read, Co-View average); all x 100.""", uniqueItems=True)
    positive_threshold: float = option(0.8, """
        Alignment diagnostic: test pairs whose gold score (scaled to 0-1) is at least this count as
        positive pairs (SimCSE: STS-B > 4 of 5).""", minimum=0, maximum=1)
    topic: TopicOptions = option(TopicOptions, """
        Topic classification: unique sentences of all splits with their topic, a stratified
        train/test split, a linear classifier on frozen embeddings, macro-F1 x 100 on the held-out
        part.""")


@dataclass(frozen=True, kw_only=True)
class TopicTask(TopicOptions):
    """`suite.topic` as a suite node keeps it: `prompted` = the delimiter when on."""

    prompted: str | None = None


@dataclass(frozen=True, kw_only=True)
class SuiteParams(slice_of(SuiteOptions, but=("topic", "mteb", "retrieval", "positive_threshold"))):
    """The tasks `suite_tasks` found (task -> file, directory or "hub"; the others in `skipped`, with why),
    their digests, and the encoding options. `model` only for the zero-shot model (else the `model` input).
    Of the `suite` section a spec holds the encoding options and what the suites resolved: the four options a
    suite resolves are written under their names (`topic`, `positive_threshold`, `mteb`, `retrieval`: keys
    unchanged) and read into fields of their own (`topic_task`, ...: `augsbert.params.resolved`)."""

    sts: dict[str, str] = field(default_factory=dict)
    useb: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)  # key material: a task file's content
    sts_format: dict[str, str] = field(default_factory=dict)
    topic_task: TopicTask | None = resolved(None, "topic")  # None: no topic labels, or not asked
    # alignment / uniformity at `suite.positive_threshold` when the diagnostics run, else None
    diagnostics_threshold: float | None = resolved(None, "positive_threshold")
    mteb_tasks: dict[str, str] | None = resolved(None, "mteb")  # MTEB task -> its directory or "hub"
    retrieval_task: dict[str, str] | None = resolved(None, "retrieval")  # BEIR qrels: split, score_function, ...
    mteb_version: str | None = None
    model: str | None = None
    model_identity: dict[str, str] = field(default_factory=dict)
    hub_revisions: dict[str, str] = field(default_factory=dict)


# Bi-Encoder roles that get the evaluation suite (STS suite, topic, USEB, diagnostics).
SUITE_ROLES = ("zero_shot", "pretrained", "classifier", "lower_bound", "student", "gpl", "multilingual")
def hub_datasets(node: Node) -> list[str]:
    """The hub datasets of the STS suite's tasks read from the hub (`sts: {task: hub}`)."""
    from ..data.suite_files import HUB_DATASETS  # the data package imports pandas; planning does not

    return [HUB_DATASETS[task] for task, where in (node.settings.get("sts") or {}).items() if where == "hub"]


ROLE_SUFFIX = "_suite"  # a suite's role: the role of the row whose model it evaluates, suffixed


def evaluated_row(role: str) -> str:
    """The row whose model the suite in `role` evaluates (`student_suite` -> `student`)."""
    return role.removesuffix(ROLE_SUFFIX)


SUITE = Stage("suite", 2, "evaluate a Bi-Encoder on the STS suite, topic classification, USEB and "
              "alignment/uniformity (with --config, --role <row>_suite: the row whose model it scores)",
              "augsbert.jobs.suite:run",
              # the tasks run and their files enter the key by digest
              section="suite", runtime=("batch_size", "model", "sts", "useb", "mteb", "skipped"),
              roles=("student_suite", "lower_bound_suite", "pretrained_suite", "classifier_suite", "zero_shot_suite",
                     "gpl_suite", "multilingual_suite"),
              seconds_per_item=0.002, aliases=("evaluate-suite",), rule_alias="evaluate_suite", group="evaluation",
              cache=False, params=SuiteParams, raw_inputs=lambda node: local_files(node),
              plan=lambda seed_plan: plan_suites(seed_plan), needs=SUITE_ROLES, estimate="test+suites",
              hub_datasets=hub_datasets, evaluates=evaluated_row)
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
                tasks["skipped"][task] = f"no file {os.path.normpath(path)} (and suite.sts_hub is false)"
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
        raise ConfigError("suite.suites has `mteb` but suite.mteb.tasks is empty: name the MTEB "
                          "tasks to run (e.g. [STS12, SICK-R])")
    found: dict[str, str] = {}
    for name in options["tasks"]:
        path = root / (options.get("local") or {}).get(name, f"{LOCAL_DIR}/{name}")
        if path.is_dir():
            found[name] = os.path.normpath(path)
        elif options.get("hub", True):
            found[name] = "hub"
        else:
            skipped[f"mteb:{name}"] = f"no directory {os.path.normpath(path)} (and suite.mteb.hub is false)"
    return {"mteb": found, "mteb_version": version}


def suite(graph: Graph, exp: dict, data: Node, model: Node) -> Node:
    """Evaluation-suite node of one Bi-Encoder (a trained student, or the zero-shot base model)."""

    tasks = suite_tasks(graph.config, {**exp["suite"], "topic_delimiter": exp["topic_delimiter"]},
                        graph.config["datasets"][exp["dataset"]])
    params = {**tasks, **{k: exp["suite"][k] for k in ("batch_size", "max_length")},
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
    """The evaluation suite of every Bi-Encoder row of the run (`suite.suites`), role `<row>_suite`."""
    exp, roles = seed_plan.config, seed_plan.roles
    if not exp["suite"]["suites"]:
        return {}
    return {f"{role}{ROLE_SUFFIX}": suite(seed_plan.graph, exp, roles["data"], roles[role]) for role in SUITE_ROLES
            if role in roles}
