"""The plan: validated config -> a graph of content-addressed stage nodes.

Every node is `{stage, key, params, inputs}`; `key = <readable-name>-<hash>`
where the hash covers the stage, its version, its effective params and the
keys of its inputs. Two experiments that need the same stage configuration get
the same node (and so share one artifact); changing a parameter changes the key
of that node and of every node after it, and leaves the old artifacts in place.

Plain Python, no Snakemake: the Snakefile looks nodes up by `{wildcards.key}`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .config import ConfigError, canonical_json, short_hash
from .stages.base import STAGES

ARTIFACTS = "artifacts"
SPECS = f"{ARTIFACTS}/.specs"  # the spec file of each job (a command line has a length limit)

# Settings that cannot change what a stage computes, and each stage's code version: declared once per
# stage in augsbert.stages.base (the registry), read here as plain tables.
RUNTIME_PARAMS = {stage.name: stage.runtime for stage in STAGES}
STAGE_VERSIONS = {stage.name: stage.version for stage in STAGES}
# semantic_model values that are not model references
SEMANTIC_CHOICES = ("finetuned", "pretrained", "pretrained_stage")

# Bi-Encoder roles that get the evaluation suite (STS suite, topic, USEB, diagnostics).
SUITE_ROLES = ("zero_shot", "pretrained", "classifier", "lower_bound", "student")
STS_TASKS_DIR = "sts_suite"
USEB_DIR = "useb/data-eval"

# Rows of a grid table, in thesis order, and their titles.
TABLE_ROLES = ("zero_shot", "pretrained", "classifier", "lower_bound", "teacher", "student")
ROLE_TITLES = {"zero_shot": "Zero-shot base model", "pretrained": "Pre-trained", "classifier": "Topic classifier",
               "lower_bound": "SBERT (lower bound)", "teacher": "{arch} (upper bound)"}


def pairs_have_topics(definition: dict) -> bool:
    """Whether a dataset's gold pairs carry a topic (BWS, or a pairs_file with a `topic` column)."""
    return definition["loader"] == "pairs_file" and bool((definition.get("columns") or {}).get("topic")) \
        or definition["loader"].startswith("bws")


def has_topics(definition: dict) -> bool:
    """Whether a dataset gives sentences topic labels: its pairs, or its `topic_corpus`."""
    return (pairs_have_topics(definition) or bool(definition.get("topic_corpus"))
            or bool((definition.get("columns") or {}).get("topic")))



def row_label(role: str, arch: str, values: list[str], student_title: str = "AugSBERT") -> str:
    """Thesis-style row names: "AugSBERT-BM25", "CBE (upper bound)", "SBERT (lower bound)"."""
    if role == "student":
        return "-".join([student_title, *values])
    title = ROLE_TITLES[role].format(arch=arch)
    return f"{title} [{', '.join(values)}]" if values else title


def student_loss_options(options: dict) -> dict:
    """A student section without the options its `loss` does not read (the default `cosine` reads none,
    so students planned before `student.loss` existed keep their keys)."""
    options = dict(options)
    loss = options.pop("loss", "cosine")
    used = {"cosent": ("scale",), "angle": ("scale",), "mnrl": ("scale", "positive_threshold", "hard_negatives"),
            "margin_mse": ()}.get(loss, ())
    if loss == "mnrl" and options.get("hard_negatives"):
        used += ("negative_threshold",)
    for key in ("scale", "positive_threshold", "hard_negatives", "negative_threshold"):
        if key not in used:
            options.pop(key, None)
    if loss != "cosine":
        options["loss"] = loss
    if loss in ("mnrl", "margin_mse"):
        # mnrl: in-batch negatives, length-sorted batches would change them; margin_mse: triples, which the
        # two-sided length grouping does not sort (random batches, said here so the key says it too)
        options["group_by_length"] = False
        options.pop("megabatch", None)
    return options


def inert_grouping_dropped(options: dict) -> dict:
    """A copy of a training section without `megabatch` when `group_by_length` is off (it changes nothing then)."""
    options = dict(options)
    if not options.get("group_by_length", False):
        options.pop("megabatch", None)
    return options


KEY_PATTERN = r"[A-Za-z0-9_.+]+(?:-[A-Za-z0-9_.+]+)*-[0-9a-f]{10}"


def slug(text: str) -> str:
    """A short readable name for a key: the last path component, filesystem-safe."""
    last = str(text).rstrip("/").split("/")[-1] or "x"
    return re.sub(r"[^A-Za-z0-9_.+-]+", "_", last)[:60]


@dataclass(frozen=True)
class Node:
    stage: str
    name: str
    params_json: str  # canonical JSON, so the node is hashable and immutable
    inputs: tuple[tuple[str, str], ...] = ()  # (role, upstream key)
    # settings outside the key (RUNTIME_PARAMS); a node shared by experiments keeps the first one's
    runtime_json: str = field(default="{}", compare=False)

    @cached_property
    def params(self) -> dict:
        """What the key covers."""
        return json.loads(self.params_json)

    @cached_property
    def settings(self) -> dict:
        """What the job receives as its params: the keyed params plus the runtime settings."""
        return {**self.params, **json.loads(self.runtime_json)}

    @cached_property
    def key(self) -> str:
        material = {
            "stage": self.stage,
            "version": STAGE_VERSIONS[self.stage],
            "params": self.params,
            "inputs": dict(self.inputs),
        }
        return f"{self.name}-{short_hash(material)}"

    @property
    def path(self) -> str:
        return f"{ARTIFACTS}/{self.stage}/{self.key}"


def make_node(stage: str, name: str, params: dict, inputs: dict[str, Node] | None = None,
              runtime: dict | None = None) -> Node:
    return Node(
        stage=stage,
        name=slug(name),
        params_json=canonical_json(params),
        inputs=tuple(sorted((role, node.key) for role, node in (inputs or {}).items())),
        runtime_json=canonical_json(runtime or {}),
    )


def write_spec(path: Path, text: str) -> str:
    """Write `text` to `path` atomically unless it already holds exactly that; return the path."""
    try:
        if path.read_text() == text:
            return str(path)
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    return str(path)


@dataclass
class ExperimentPlan:
    name: str
    config: dict  # effective experiment config (merged, defaults filled)
    dataset: dict  # the dataset definition it uses
    seeds: list[int]
    runs: dict[int, dict[str, str]] = field(default_factory=dict)  # seed -> role -> key

    @property
    def config_hash(self) -> str:
        return short_hash({"experiment": self.config, "dataset": self.dataset, "seeds": self.seeds})


class Experiments(Mapping):
    """The configured experiments by name; each is validated and planned when first looked up."""

    def __init__(self, plan: "Plan"):
        self._plan = plan

    def __getitem__(self, name: str) -> ExperimentPlan:
        if name not in self:
            raise KeyError(name)
        return self._plan.experiment(name)

    def __contains__(self, name: object) -> bool:
        return name in (self._plan.config.get("experiments") or {})

    def __iter__(self) -> Iterator[str]:
        return iter(self._plan.config.get("experiments") or {})

    def __len__(self) -> int:
        return len(self._plan.config.get("experiments") or {})


class Plan:
    """The nodes of the experiments asked for, indexed by key.

    Planning is lazy: an experiment is validated and planned when it is first looked up
    (`experiment`, `experiments[name]`, a grid's cells), so a dry run of one target reads the
    data and models of that target only. A key nobody has planned yet (a job started by key,
    as on a cluster) plans every experiment once to find it.
    """

    def __init__(self, config: dict):
        from .fingerprints import DigestCache

        self.config = config
        self.nodes: dict[str, Node] = {}
        self.planned: dict[str, ExperimentPlan] = {}
        self.experiments = Experiments(self)
        self.digests = DigestCache()
        self._identities: dict[str, str] = {}
        self._pool_sizes: dict[tuple, int | None] = {}  # (data key, pool, exclude_eval) -> unique sentences
        self.pool_checks: dict[str, list[dict]] = {}  # data key -> sampling needs of the experiments using it
        self._users: dict[str, set[str]] = {}  # node key -> planned experiments that use it

    def plan_all(self) -> None:
        """Plan every configured experiment (what `node` falls back to for an unknown key)."""
        for name in self.experiments:
            self.experiment(name)

    # -- building
    def _add(self, node: Node) -> Node:
        self.nodes.setdefault(node.key, node)
        return node

    def model_identity(self, ref: str) -> str:
        from .fingerprints import model_identity

        if ref not in self._identities:
            self._identities[ref] = model_identity(ref, self.digests, self.config.get("hub_revisions"))
        return self._identities[ref]

    def _node(self, stage: str, name: str, settings: dict, inputs: dict[str, Node] | None = None) -> Node:
        """Add the node of `stage` with `settings`: runtime settings leave the key, models enter it by identity."""
        runtime = {k: settings[k] for k in RUNTIME_PARAMS[stage] if k in settings}
        params = {k: v for k, v in settings.items() if k not in runtime}
        refs = {k: runtime[k] for k in ("model", "semantic_model")
                if isinstance(runtime.get(k), str) and runtime[k] not in SEMANTIC_CHOICES}
        if refs:
            params["model_identity"] = {k: self.model_identity(ref) for k, ref in refs.items()}
            revisions = {ref: self.config["hub_revisions"][ref] for ref in refs.values()
                         if ref in self.config.get("hub_revisions", {})}
            if revisions:
                runtime["hub_revisions"] = revisions
        if "semantic_model" in runtime and runtime["semantic_model"] in SEMANTIC_CHOICES:
            params["semantic_model"] = runtime.pop("semantic_model")  # a choice, not a reference
        return self._add(make_node(stage, name, params, inputs, runtime))

    def data_node(self, dataset: str) -> Node:
        """Raw data enter the key by content (sha256 of each file), not by where they lie or when they were copied."""
        from .data import MissingDataError, get_loader
        from .fingerprints import path_digest

        definition = self.config["datasets"][dataset]
        settings = {"dataset": dataset, **definition, "data_dir": os.path.normpath(self.config["data_dir"])}
        try:
            files = get_loader(definition["loader"]).inputs(dataset, settings, Path(settings["data_dir"]))
        except MissingDataError:
            settings["files"] = "missing"  # the data job (if it is needed) stops with instructions
        else:
            settings["files"] = [[Path(f).name, path_digest(self.digests, f)] for f in files]
        return self._node("data", dataset, settings)

    def _plan_experiment(self, name: str, exp: dict) -> ExperimentPlan:
        """Nodes of one experiment, per seed.

        In-domain the teacher and the lower bound learn the target's gold; with
        `source` (domain transfer) they learn the source's gold and are tested
        on the target, and no target label enters any trained model: silver
        candidates come from the target's train *sentences*, the teacher's gold
        (for KDE references, re-labelling and `use_gold_labels`) is the
        source's, and the student is selected on the source dev split (or the
        last epoch) unless `student.selection: target_dev` says otherwise.
        """
        self._check_models(name, exp)
        dataset = exp["dataset"]
        source = exp["source"] or dataset
        transfer = source != dataset
        plan = ExperimentPlan(name, exp, self.config["datasets"][dataset], list(exp["seeds"] or self.config["seeds"]))
        data = self.data_node(dataset)
        gold = self.data_node(source)
        trained_on = {"data": gold, **({"eval": data} if transfer else {})}
        selection = self.student_selection(name, exp)
        wanted = exp["models"]
        sampling = exp["sampling"]
        strategies = [s for s in sampling["strategies"] if s != "none"]
        encoding = {k: exp["evaluation"][k] for k in ("batch_size", "max_length")}
        zero_shot = self._node("zero_shot", f"{dataset}.{slug(exp['base_model'])}",
                               {"model": exp["base_model"], **encoding}, {"data": data})
        variant = exp["adapt_mlm"]["variant"]
        if strategies and "student" in wanted:
            self._check_pool(name, sampling, data)
            # the data job checks the same when it has made the tables, before any training starts
            self.pool_checks.setdefault(data.key, []).append({"experiment": name, "sampling": {
                k: sampling[k] for k in ("strategies", "top_k", "candidate_pool", "pool", "exclude_eval_sentences")}})
        self._check_pretrain_use(name, exp, variant)
        prompt = self._topic_prompt(name, exp, gold)
        for seed in plan.seeds:
            roles = {"data": data, **({"source_data": gold} if transfer else {})}
            adapted = self._adapt(exp, dataset, seed, data, prompt) if variant != "augsbert" else None
            if adapted is not None:
                roles["adapt"] = adapted
            pretrained = self._pretrain(name, exp, seed, data) if exp["pretrain"]["objective"] != "none" else None
            if pretrained is not None:
                roles["pretrained"] = pretrained
                roles.update({f"rcl_{role}": self.nodes[key] for role, key in pretrained.inputs  # RCL's entropy models
                              if role.startswith("entropy_")})
            lower_bound = self._student(exp, source, seed, {**trained_on, **self._dev_input(selection, data, transfer)},
                                        selection, gold_only=True)
            if "zero_shot" in wanted:
                roles["zero_shot"] = zero_shot
            if "classifier" in wanted:
                roles["classifier"] = self._classifier(name, exp, dataset, seed, data)
            if "lower_bound" in wanted:
                roles["lower_bound"] = lower_bound
            if "teacher" in wanted or "student" in wanted:
                init = adapted or (pretrained if exp["teacher"]["base"] == "pretrained" else None)
                teacher = self._teacher(exp, source, seed, {**trained_on, **({"init": init} if init else {})},
                                        prompt if pairs_have_topics(self.config["datasets"][source]) else None)
                if "teacher" in wanted:
                    roles["teacher"] = teacher
            if "student" not in wanted:
                plan.runs[seed] = {role: node.key for role, node in roles.items()}
                continue
            label_inputs = {"teacher": teacher, "gold": gold}
            if strategies:
                roles["candidates"] = label_inputs["candidates"] = self._candidates(
                    exp, dataset, seed, data, lower_bound, strategies, pretrained)
            if "target_pairs" in strategies and not transfer:
                raise ConfigError(f"experiments.{name}.sampling.strategies: target_pairs is for domain transfer "
                                  "(`source` set); in-domain, silver.relabel_gold re-labels the train pairs")
            if not (strategies or exp["silver"]["relabel_gold"]):
                raise ConfigError(f"experiments.{name}: the student gets no teacher labels (sampling.strategies is "
                                  "[none] and silver.relabel_gold is false); it would just be the lower bound")
            labels_params = {**exp["silver"], "kde_reference": sampling["kde_reference"], "seed": seed}
            if prompt:  # the teacher scores prompted pairs (prompted and hidden); topics of the target's texts
                labels_params["topic_prompt"] = prompt
                label_inputs["topics"] = data
            shards = sampling.get("shards", 1)
            if strategies and shards > 1:  # N label_shard nodes score row ranges of the candidates; labels merges
                roles["pool_index"] = self.nodes[dict(roles["candidates"].inputs)["index"]]
                for i in range(shards):
                    roles[f"candidate_shard_{i}"] = self.nodes[dict(roles["candidates"].inputs)[f"shard_{i}"]]
                    roles[f"label_shard_{i}"] = label_inputs[f"label_shard_{i}"] = self._node(
                        "label_shard", f"{dataset}.{exp['teacher']['arch']}.{i + 1}of{shards}",
                        {**{k: labels_params[k] for k in ("batch_size", "topic_prompt") if k in labels_params},
                         "shards": shards, "shard": i},
                        {k: v for k, v in label_inputs.items() if k in ("teacher", "candidates", "topics")})
                labels_params["shards"] = shards
            roles["labels"] = self._node("labels", f"{dataset}.{exp['teacher']['arch']}", labels_params, label_inputs)
            # the student's gold (use_gold_labels) and default dev split are the teacher's: the source's in transfer
            student_inputs = {**trained_on, "labels": roles["labels"], **self._dev_input(selection, data, transfer)}
            if variant == "full_domain":
                student_inputs["init"] = adapted
            elif exp["student"]["base"] == "pretrained":
                student_inputs["init"] = pretrained
            roles["student"] = self._student(exp, dataset, seed, student_inputs, selection,
                                             prompt=prompt if exp["topic_prompt"] == "prompted" else None)
            plan.runs[seed] = {role: node.key for role, node in roles.items()}
        for roles in plan.runs.values():
            for role in SUITE_ROLES:
                if role in roles and exp["evaluation"]["suites"]:
                    roles[f"{role}_suite"] = self._suite(exp, data, self.nodes[roles[role]]).key
        return plan

    @staticmethod
    def student_selection(name: str, exp: dict) -> str:
        """How Bi-Encoders pick their epoch: `target_dev`, `source_dev` (transfer default) or `last`."""
        transfer = bool(exp["source"]) and exp["source"] != exp["dataset"]
        selection = exp["student"]["selection"] or ("source_dev" if transfer else "target_dev")
        if selection == "source_dev" and not transfer:
            selection = "target_dev"  # in-domain the teacher's data is the target: one and the same split
        if selection == "last" and exp["student"]["seed_optimization"]["trials"] > 0:
            raise ConfigError(f"experiments.{name}.student.seed_optimization.trials: seed optimisation compares "
                              "seeds on a dev split, but student.selection is `last`; set trials to 0 or choose "
                              "a dev split")
        return selection

    @staticmethod
    def _dev_input(selection: str, target: Node, transfer: bool) -> dict[str, Node]:
        """A transfer model selected by `target_dev` reads the target's dev split (else that of `data`)."""
        return {"dev": target} if selection == "target_dev" and transfer else {}

    @staticmethod
    def _check_models(name: str, exp: dict) -> None:
        """Fail while planning (not hours later in a job) on a model path that does not exist."""
        from .models.resolve import ModelResolutionError, reference_kind

        refs = {"base_model": exp["base_model"], "teacher.base_model": exp["teacher"]["base_model"],
                "student.base_model": exp["student"]["base_model"], "pretrain.base_model": exp["pretrain"]["base_model"]}
        if exp["sampling"]["semantic_model"] not in SEMANTIC_CHOICES:
            refs["sampling.semantic_model"] = exp["sampling"]["semantic_model"]
        for key, ref in refs.items():
            if ref is None:
                continue
            try:
                reference_kind(ref)
            except ModelResolutionError as err:
                raise ConfigError(f"experiments.{name}.{key}: {err}") from None

    def _check_pool(self, name: str, sampling: dict, data: Node) -> None:
        """Fail while planning when `top_k` (or a KDE candidate count) exceeds the sentence pool.

        The pool is known only from the data, so this runs once the data artifact exists (any
        later plan: the next dry run, the CLI); before that the sampling stage checks the same
        thing before it encodes anything.
        """
        from .data import DataError
        from .stages.common import pool_too_small, target_pool

        if not (Path(data.path) / "train.parquet").is_file():
            return
        pool = (data.key, sampling["pool"], sampling["exclude_eval_sentences"])
        if pool not in self._pool_sizes:
            try:
                self._pool_sizes[pool] = len(target_pool(data.path, *pool[1:])[0])
            except DataError:  # e.g. no unlabeled corpus: the sampling stage says so with its own message
                self._pool_sizes[pool] = None
        if self._pool_sizes[pool] is not None:
            problem = pool_too_small(sampling, self._pool_sizes[pool], prefix=f"experiments.{name}.")
            if problem:
                raise ConfigError(problem)

    def _candidates(self, exp: dict, dataset: str, seed: int, data: Node, encoder: Node,
                    strategies: list[str], pretrained: Node | None = None) -> Node:
        sampling = dict(exp["sampling"])
        sampling["strategies"] = strategies
        needs_encoder = any(s.startswith("semantic_search") or s == "iterative_kde" for s in strategies)
        inputs = {"data": data}
        if needs_encoder and sampling["semantic_model"] == "finetuned":
            inputs["encoder"] = encoder
        elif needs_encoder and sampling["semantic_model"] == "pretrained_stage":
            inputs["encoder"] = pretrained
        if not needs_encoder:  # encoder options cannot change BM25/random/KDE/target-pair candidates
            for key in ("semantic_model", "exact", "batch_size", "max_length"):
                sampling.pop(key)
        if not any(s in ("kde", "iterative_kde") for s in strategies):
            sampling.pop("candidate_pool")
        sampling.pop("kde_reference")  # used when labelling
        shards = sampling.pop("shards", 1)  # a key only when > 1: unsharded candidates keep their keys
        params = {**sampling, "model": exp["base_model"], "seed": seed}
        name = f"{dataset}.{'+'.join(strategies)}"
        if shards == 1:
            return self._node("candidates", name, params, inputs)
        # sampling.shards > 1: one pool (+ semantic index) node, N shard nodes over query rows, the merge
        # keyed by what the index holds, not by the strategies: experiments that differ in those share it
        index_params = {k: params[k] for k in ("pool", "exclude_eval_sentences", "semantic_model", "exact",
                                               "batch_size", "max_length") if k in params}
        if needs_encoder:
            index_params.update(model=params["model"], least_index="semantic_search_least" in strategies)
        index = self._node("pool_index", f"{dataset}.{params['pool']}", index_params, inputs)
        shard_nodes = {f"shard_{i}": self._node("candidate_shard", f"{name}.{i + 1}of{shards}",
                                                {**params, "shards": shards, "shard": i}, {"index": index})
                       for i in range(shards)}
        return self._node("candidates", name, {**params, "shards": shards},
                          {"data": data, "index": index, **shard_nodes})

    def suite_tasks(self, evaluation: dict, dataset: dict) -> dict:
        """Which suite tasks can run, decided while planning so that adding a data file changes the key.

        Each task maps to its local file or directory, "hub" (STS from mteb), or
        None with the reason it is skipped in `skipped`.
        """
        root = Path(self.config["data_dir"])
        suites = evaluation["suites"]
        tasks: dict = {"sts": {}, "useb": {}, "skipped": {}}
        if "sts" in suites:
            from .evaluation.sts_suite import locate_task

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
        if "diagnostics" in suites:
            tasks["positive_threshold"] = evaluation["positive_threshold"]
        if "mteb" in suites:
            tasks.update(self._mteb_tasks(evaluation.get("mteb") or {}, root, tasks["skipped"]))
        return tasks

    @staticmethod
    def _mteb_tasks(options: dict, root: Path, skipped: dict) -> dict:
        """MTEB task -> local directory or "hub"; the mteb version enters the key (it pins the hub data
        revisions and computes the scores). Checked here so a missing package stops the dry run."""
        from .evaluation.mteb_suite import LOCAL_DIR, MISSING_MTEB, mteb_version

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

    def _suite(self, exp: dict, data: Node, model: Node) -> Node:
        """Evaluation-suite node of one Bi-Encoder (a trained student, or the zero-shot base model)."""
        from .fingerprints import path_digest

        tasks = self.suite_tasks({**exp["evaluation"], "topic_delimiter": exp["topic_delimiter"]},
                                 self.config["datasets"][exp["dataset"]])
        params = {**tasks, **{k: exp["evaluation"][k] for k in ("batch_size", "max_length")},
                  "digests": {task: path if path == "hub" else path_digest(self.digests, path)
                              for task, path in {**tasks["sts"], **tasks["useb"],
                                                 **{f"mteb:{t}": p for t, p in tasks.get("mteb", {}).items()}}.items()}}
        inputs = {"data": data}
        if model.stage == "zero_shot":
            params["model"] = model.settings["model"]
        else:
            inputs["model"] = model
        return self._node("suite", f"{data.name}.{model.name}", params, inputs)

    def local_files(self, key: str) -> list[str]:
        """Raw files a suite node reads (Snakemake inputs, so a replaced file reruns it)."""
        params = self.node(key).settings
        paths = [p for p in [*params.get("sts", {}).values(), *params.get("mteb", {}).values()] if p != "hub"] \
            + list(params.get("useb", {}).values())
        return sorted(paths)

    def _topic_prompt(self, name: str, exp: dict, gold: Node) -> str | None:
        """The topic delimiter when the experiment prompts (thesis 4.4), else None; checks the data has topics."""
        if exp["topic_prompt"] == "none":
            return None
        if not has_topics(self.config["datasets"][exp["dataset"]]):
            raise ConfigError(f"experiments.{name}.topic_prompt: {exp['topic_prompt']}, but dataset "
                              f"'{exp['dataset']}' has no topic labels (BWS, or a pairs_file with columns.topic)")
        return exp["topic_delimiter"]

    def _classifier(self, name: str, exp: dict, dataset: str, seed: int, data: Node) -> Node:
        """The topic-classifier baseline (thesis 5.6.1): trained on the target's topics, prompted or not."""
        if not has_topics(self.config["datasets"][dataset]):
            raise ConfigError(f"experiments.{name}.models: classifier learns topics, but dataset '{dataset}' has "
                              "no topic labels (BWS, or a pairs_file with columns.topic)")
        params = {**exp["classifier"], "model": exp["base_model"], "seed": seed,
                  "eval_batch_size": exp["evaluation"]["batch_size"],
                  "exclude_eval_sentences": exp["sampling"]["exclude_eval_sentences"]}
        if exp["topic_prompt"] == "prompted":
            params["topic_prompt"] = exp["topic_delimiter"]
        return self._node("classifier", f"{dataset}.topics", params, {"data": data})

    def _adapt(self, exp: dict, dataset: str, seed: int, data: Node, prompt: str | None = None) -> Node:
        options = inert_grouping_dropped({k: v for k, v in exp["adapt_mlm"].items() if k != "variant"})
        params = {**options, "model": exp["teacher"]["base_model"] or exp["base_model"],
                  "pool": exp["sampling"]["pool"], "exclude_eval_sentences": exp["sampling"]["exclude_eval_sentences"],
                  "seed": seed}
        if prompt:  # MLM on prompted pairs, prompt tokens never masked (thesis 4.4.3)
            params["topic_prompt"] = prompt
        return self._node("adapt", f"{dataset}.mlm", params, {"data": data})

    @staticmethod
    def _from_adapted(inputs: dict[str, Node]) -> bool:
        return "init" in inputs and inputs["init"].stage == "adapt"

    @staticmethod
    def _check_pretrain_use(name: str, exp: dict, variant: str) -> None:
        """Later stages may start from the pretrain stage only when there is one, and not from two checkpoints."""
        uses = {"teacher.base": exp["teacher"]["base"] == "pretrained",
                "student.base": exp["student"]["base"] == "pretrained",
                "sampling.semantic_model": exp["sampling"]["semantic_model"] == "pretrained_stage"}
        if exp["pretrain"]["objective"] == "none":
            for key, used in uses.items():
                if used:
                    raise ConfigError(f"experiments.{name}.{key}: starts from the pretrain stage, but "
                                      "pretrain.objective is none; set an objective")
        clash = {"teacher.base": variant != "augsbert", "student.base": variant == "full_domain"}
        for key, adapted in clash.items():
            if uses[key] and adapted:
                raise ConfigError(f"experiments.{name}.{key}: pretrained, but adapt_mlm.variant ({variant}) already "
                                  "starts it from the MLM-adapted checkpoint; choose one")
        if exp["pretrain"]["objective"] == "simcse_sup" and not exp["pretrain"]["triples"]:
            raise ConfigError(f"experiments.{name}.pretrain.triples: simcse_sup learns from NLI triples; name a "
                              "file with columns anchor, positive, negative")
        park = exp["pretrain"].get("simcse_variant", "none")  # seed 001's SimCSE variants: simcse only
        if park != "none" and exp["pretrain"]["objective"] not in ("simcse", "none"):
            raise ConfigError(f"experiments.{name}.pretrain.simcse_variant: {park} is a variant of objective "
                              f"simcse (seed 001), not of {exp['pretrain']['objective']}")

    def _pretrain(self, name: str, exp: dict, seed: int, target: Node) -> Node:
        """The pretrain node: corpus = `pretrain.dataset` (or the target), evaluated on the target (`eval`)."""
        from .fingerprints import path_digest
        from .pretraining.objectives import resolved

        options = resolved(exp["pretrain"])
        options["model"] = options.pop("base_model") or exp["base_model"]
        options["eval_batch_size"] = exp["evaluation"]["batch_size"]
        options["eval_max_length"] = exp["evaluation"]["max_length"]  # as the zero-shot row: comparable
        corpus = options.pop("dataset") or exp["dataset"]
        if corpus not in self.config["datasets"]:
            raise ConfigError(f"experiments.{name}.pretrain.dataset: unknown dataset '{corpus}' "
                              f"(configured: {', '.join(sorted(self.config['datasets']))})")
        if options.get("triples_format") == "auto":  # told from each file (name or first record) when read:
            options.pop("triples_format")             # keys of configs without the option stay as they were
        if options["triples"]:
            one = isinstance(options["triples"], str)  # a list (SNLI + MultiNLI): one digest per file
            paths = [Path(self.config["data_dir"]) / f for f in ([options["triples"]] if one else options["triples"])]
            # as a missing raw data file: its job stops with the path (a grid for NLI data not yet
            # downloaded must not break every plan), and the file's arrival changes the key
            digests = [path_digest(self.digests, p) if p.is_file() else "missing" for p in paths]
            options["triples"] = os.path.normpath(paths[0]) if one else [os.path.normpath(p) for p in paths]
            options["triples_digest"] = digests[0] if one else digests
        else:
            options.pop("triples")
            options.pop("triples_format", None)
        inputs = {"data": self.data_node(corpus), "eval": target}
        if options["objective"] == "rcl":
            inputs.update(self._rcl_entropy(corpus, options, seed, inputs))
            for key in ("rcl_patience", "rcl_eval_steps", "rcl_entropy_max_steps"):  # in the entropy keys only
                options.pop(key)
        return self._node("pretrain", f"{corpus}.{options['objective']}.{options['pooling']}", {**options, "seed": seed},
                          inputs)

    # what trains an entropy model: the final model's own options (selection, the other φ values) stay out
    RCL_ENTROPY_KEYS = ("model", "pooling", "max_length", "batch_size", "lr", "warmup_ratio", "weight_decay",
                        "scheduler", "group_by_length", "megabatch", "held_out", "exclude_eval_sentences",
                        "eval_batch_size", "config_kwargs")

    def _rcl_entropy(self, corpus: str, options: dict, seed: int, inputs: dict[str, Node]) -> dict[str, Node]:
        """One `rcl_entropy` node per φ of `rcl_phis` (seed 002 Algorithm 1), as inputs entropy_0, entropy_1, ..."""
        params = {k: options[k] for k in self.RCL_ENTROPY_KEYS if k in options}
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
        return {f"entropy_{i}": self._node("rcl_entropy", f"{name}.phi{phi:g}", {**params, "phi": phi}, entropy_inputs)
                for i, phi in enumerate(options["rcl_phis"])}

    def _teacher(self, exp: dict, dataset: str, seed: int, inputs: dict[str, Node], prompt: str | None = None) -> Node:
        options = inert_grouping_dropped(exp["teacher"])
        model = options.pop("base_model") or exp["base_model"]
        options.pop("base")  # the start point is the `init` input (pretrained) or `model`
        if options["freeze_embeddings"] is None:  # thesis 5.4.3: freeze when starting from an adapted checkpoint
            options["freeze_embeddings"] = self._from_adapted(inputs)
        if options["arch"] == "cbe":  # Cross-Encoder-only options must not change a CBE's key
            options.pop("loss")
            options.pop("activation")
        params = {**options, "model": model, "seed": seed}
        if prompt:  # its gold pairs carry topics: trained and tested on prompted pairs
            params["topic_prompt"] = prompt
        return self._node("teacher", f"{dataset}.{options['arch']}", params, inputs)

    def _student(self, exp: dict, dataset: str, seed: int, inputs: dict[str, Node], selection: str,
                 gold_only: bool = False, prompt: str | None = None) -> Node:
        options = student_loss_options(inert_grouping_dropped(exp["student"]))
        model = options.pop("base_model") or exp["base_model"]
        options.pop("base")  # the start point is the `init` input (pretrained / adapted) or `model`
        if options["freeze_embeddings"] is None:
            options["freeze_embeddings"] = self._from_adapted(inputs)
        if gold_only:
            options["use_gold_labels"] = True
        options["selection"] = selection
        params = {**options, "model": model, "seed": seed}
        if prompt:  # `prompted`: the student sees the prompts too (`hidden`: plain texts, same scores)
            params["topic_prompt"] = prompt
        return self._node("student", f"{dataset}.be", params, inputs)

    # -- lookups used by the Snakefile and the CLI
    def node(self, key: str) -> Node:
        if key not in self.nodes and len(self.planned) < len(self.experiments):
            self.plan_all()
        try:
            return self.nodes[key]
        except KeyError:
            raise ConfigError(
                f"no planned stage has key '{key}': the config changed since that path was requested, "
                "or the path is mistyped (request results/<experiment>.json instead)"
            ) from None

    def experiment(self, name: str) -> ExperimentPlan:
        """The plan of experiment `name`, validated and planned on first use."""
        if name not in self.planned:
            from .config import validated_experiment

            if name not in self.experiments:
                known = ", ".join(sorted(self.experiments)) or "none"
                raise ConfigError(f"unknown experiment '{name}' (configured: {known})")
            plan = self._plan_experiment(name, validated_experiment(self.config, name))
            self.planned[name] = plan
            for roles in plan.runs.values():
                for key in roles.values():
                    self._users.setdefault(key, set()).add(name)
            self.digests.save()
        return self.planned[name]

    def input_paths(self, key: str) -> dict[str, str]:
        return {role: self.nodes[k].path for role, k in self.node(key).inputs}

    def spec(self, key: str) -> dict:
        """What a stage job receives: the node's settings (keyed params + runtime settings), inputs as paths."""
        node = self.node(key)
        params, runtime = node.settings, sorted(json.loads(node.runtime_json))
        if key in self.pool_checks:  # what the planned sampling stages will need of this data
            params, runtime = {**params, "pool_checks": self.pool_checks[key]}, sorted([*runtime, "pool_checks"])
        return {"stage": node.stage, "key": key, "params": params, "inputs": self.input_paths(key), "runtime": runtime,
                "experiments": self.users(key)}

    def users(self, key: str) -> list[str]:
        """The planned experiments, by name, whose runs use node `key` (tracker runs are named after the first)."""
        return sorted(self._users.get(key, ()))

    def spec_json(self, key: str) -> str:
        return canonical_json(self.spec(key))

    def spec_file(self, key: str) -> str:
        """`@<path>` of the job's spec file (artifacts/.specs/<stage>/<key>.json), written if it changed.

        A spec goes by file, not on the command line, so no config is too long
        for a shell; the path depends only on the key, so runtime settings in
        the file never trigger Snakemake's params rerun.
        """
        node = self.node(key)
        return "@" + write_spec(Path(SPECS) / node.stage / f"{key}.json", self.spec_json(key))

    def experiment_spec(self, name: str) -> dict:
        exp = self.experiment(name)
        return {
            "experiment": name,
            "config": exp.config,
            "dataset": exp.dataset,
            "config_hash": exp.config_hash,
            "seeds": exp.seeds,
            "runs": {
                str(seed): {role: {"key": key, "stage": self.nodes[key].stage, "path": self.nodes[key].path}
                            for role, key in roles.items()}
                for seed, roles in exp.runs.items()
            },
        }

    def grid_spec(self, name: str) -> dict:
        """The table layout of a grid: rows = (role, axis values), columns = the grid's columns.

        A model shared by several cells (the lower bound of every sampling
        variant, the teacher of every student of one teacher, ...) has the same
        node keys there, so it becomes one row labelled only by the axis values
        it depends on.
        """
        from .grids import cells

        grids = self.config.get("grids") or {}
        if name not in grids:
            raise ConfigError(f"unknown grid '{name}' (configured: {', '.join(sorted(grids)) or 'none'})")
        grid = grids[name]
        columns = list(grid["columns"])
        by_combo: dict[tuple, dict[str, str]] = {}
        for cell in cells(name, grid):
            by_combo.setdefault(cell.combo, {})[cell.column] = cell.experiment
        varying = [axis for axis, values in (grid.get("axes") or {}).items() if len(values) > 1]
        rows = []
        for role in TABLE_ROLES:
            groups: dict[tuple, list[tuple]] = {}
            for combo, experiments in by_combo.items():
                signature = tuple(
                    tuple(self.experiments[experiments[c]].runs[s].get(role) for s in self.experiments[experiments[c]].seeds)
                    for c in columns)
                if any(k for keys in signature for k in keys):
                    groups.setdefault(signature, []).append(combo)
            for combos in groups.values():
                first = by_combo[combos[0]]
                arch = self.experiments[first[columns[0]]].config["teacher"]["arch"].upper()
                # an axis that sets the teacher's arch is already in a teacher row's title ("CE (upper bound)")
                fixed = [grid["labels"].get(value, value) for axis, value in combos[0]
                         if axis in varying and all(dict(c)[axis] == value for c in combos)
                         and not (role == "teacher" and "arch" in ((grid["axes"][axis][value] or {}).get("teacher") or {}))]
                rows.append({"label": row_label(role, arch, fixed, grid["student_title"]), "role": role,
                             "cells": {c: first[c] for c in columns}})
        return {"grid": name, "description": grid["description"], "metrics": grid["metrics"], "columns": columns,
                "rows": rows, "experiments": sorted({e for exps in by_combo.values() for e in exps.values()})}

    def experiment_spec_file(self, name: str) -> str:
        """`@<path>` of an experiment's spec file (artifacts/.specs/results/<name>.json)."""
        return "@" + write_spec(Path(SPECS) / "results" / f"{name}.json", canonical_json(self.experiment_spec(name)))

    def grid_spec_file(self, name: str) -> str:
        """`@<path>` of a grid's spec file (artifacts/.specs/tables/<name>.json)."""
        return "@" + write_spec(Path(SPECS) / "tables" / f"{name}.json", canonical_json(self.grid_spec(name)))

    def experiment_inputs(self, name: str) -> list[str]:
        exp = self.experiment(name)
        return sorted({self.nodes[k].path for roles in exp.runs.values() for k in roles.values()})

    def raw_inputs(self, key: str) -> list[str]:
        """Raw files a data node reads; raises MissingDataError (with instructions) if one is absent."""
        from .data import get_loader

        node = self.node(key)
        params = node.settings
        loader = get_loader(params["loader"])
        return [str(p) for p in loader.inputs(params["dataset"], params, Path(params.get("data_dir", ".")))]
