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
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from .config import ConfigError, canonical_json, short_hash

ARTIFACTS = "artifacts"

# Bump a stage's version when its code changes what it computes: its key (and
# every key downstream) changes, so old artifacts are not reused by mistake.
STAGE_VERSIONS = {"data": 2, "zero_shot": 2, "adapt": 1, "teacher": 2, "candidates": 1, "labels": 3,
                  "student": 2, "suite": 1}

# Bi-Encoder roles that get the evaluation suite (STS suite, topic, USEB, diagnostics).
SUITE_ROLES = ("zero_shot", "lower_bound", "student")
STS_TASKS_DIR = "sts_suite"
USEB_DIR = "useb/data-eval"

# Rows of a grid table, in thesis order, and their titles.
TABLE_ROLES = ("zero_shot", "lower_bound", "teacher", "student")
ROLE_TITLES = {"zero_shot": "Zero-shot base model", "lower_bound": "SBERT (lower bound)",
               "teacher": "{arch} (upper bound)"}



def row_label(role: str, arch: str, values: list[str], student_title: str = "AugSBERT") -> str:
    """Thesis-style row names: "AugSBERT-BM25", "CBE (upper bound)", "SBERT (lower bound)"."""
    if role == "student":
        return "-".join([student_title, *values])
    title = ROLE_TITLES[role].format(arch=arch)
    return f"{title} [{', '.join(values)}]" if values else title


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

    @cached_property
    def params(self) -> dict:
        return json.loads(self.params_json)

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


def make_node(stage: str, name: str, params: dict, inputs: dict[str, Node] | None = None) -> Node:
    return Node(
        stage=stage,
        name=slug(name),
        params_json=canonical_json(params),
        inputs=tuple(sorted((role, node.key) for role, node in (inputs or {}).items())),
    )


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


class Plan:
    """All nodes of all experiments, indexed by key."""

    def __init__(self, config: dict):
        self.config = config
        self.nodes: dict[str, Node] = {}
        self.experiments: dict[str, ExperimentPlan] = {}
        for name, exp in config.get("experiments", {}).items():
            self.experiments[name] = self._plan_experiment(name, exp)

    # -- building
    def _add(self, node: Node) -> Node:
        self.nodes.setdefault(node.key, node)
        return node

    def data_node(self, dataset: str) -> Node:
        definition = self.config["datasets"][dataset]
        params = {"dataset": dataset, **definition}
        if definition["loader"] != "lee" or definition.get("unlabeled"):  # Lee ships in gensim, not in data_dir
            params["data_dir"] = os.path.normpath(self.config["data_dir"])
        return self._add(make_node("data", dataset, params))

    def _plan_experiment(self, name: str, exp: dict) -> ExperimentPlan:
        """Nodes of one experiment, per seed.

        In-domain the teacher and the lower bound learn the target's gold; with
        `source` (domain transfer) they learn the source's gold and are tested
        on the target. Silver candidates always come from the target's train
        sentences.
        """
        self._check_models(name, exp)
        dataset = exp["dataset"]
        source = exp["source"] or dataset
        plan = ExperimentPlan(name, exp, self.config["datasets"][dataset], list(exp["seeds"] or self.config["seeds"]))
        data = self.data_node(dataset)
        gold = self.data_node(source)
        trained_on = {"data": gold, **({"eval": data} if source != dataset else {})}
        wanted = exp["models"]
        sampling = exp["sampling"]
        strategies = [s for s in sampling["strategies"] if s != "none"]
        encoding = {k: exp["evaluation"][k] for k in ("batch_size", "max_length")}
        zero_shot = self._add(make_node(
            "zero_shot", f"{dataset}.{slug(exp['base_model'])}", {"model": exp["base_model"], **encoding},
            {"data": data}))
        variant = exp["adapt_mlm"]["variant"]
        for seed in plan.seeds:
            roles = {"data": data, **({"source_data": gold} if source != dataset else {})}
            adapted = self._adapt(exp, dataset, seed, data) if variant != "augsbert" else None
            if adapted is not None:
                roles["adapt"] = adapted
            lower_bound = self._student(exp, source, seed, trained_on, gold_only=True)
            if "zero_shot" in wanted:
                roles["zero_shot"] = zero_shot
            if "lower_bound" in wanted:
                roles["lower_bound"] = lower_bound
            if "teacher" in wanted or "student" in wanted:
                teacher = self._teacher(exp, source, seed, {**trained_on, **({"init": adapted} if adapted else {})})
                if "teacher" in wanted:
                    roles["teacher"] = teacher
            if "student" not in wanted:
                plan.runs[seed] = {role: node.key for role, node in roles.items()}
                continue
            label_inputs = {"teacher": teacher, "gold": gold}
            if strategies:
                roles["candidates"] = label_inputs["candidates"] = self._candidates(
                    exp, dataset, seed, data, lower_bound, strategies)
            if "target_pairs" in strategies and source == dataset:
                raise ConfigError(f"experiments.{name}.sampling.strategies: target_pairs is for domain transfer "
                                  "(`source` set); in-domain, silver.relabel_gold re-labels the train pairs")
            if not (strategies or exp["silver"]["relabel_gold"]):
                raise ConfigError(f"experiments.{name}: the student gets no teacher labels (sampling.strategies is "
                                  "[none] and silver.relabel_gold is false); it would just be the lower bound")
            labels_params = {**exp["silver"], "kde_reference": sampling["kde_reference"], "seed": seed}
            roles["labels"] = self._add(make_node(
                "labels", f"{dataset}.{exp['teacher']['arch']}", labels_params, label_inputs))
            student_inputs = {"data": data, "labels": roles["labels"]}
            if variant == "full_domain":
                student_inputs["init"] = adapted
            roles["student"] = self._student(exp, dataset, seed, student_inputs)
            plan.runs[seed] = {role: node.key for role, node in roles.items()}
        for roles in plan.runs.values():
            for role in SUITE_ROLES:
                if role in roles and exp["evaluation"]["suites"]:
                    roles[f"{role}_suite"] = self._suite(exp, data, self.nodes[roles[role]]).key
        return plan

    @staticmethod
    def _check_models(name: str, exp: dict) -> None:
        """Fail while planning (not hours later in a job) on a model path that does not exist."""
        from .models.resolve import ModelResolutionError, reference_kind

        refs = {"base_model": exp["base_model"], "teacher.base_model": exp["teacher"]["base_model"],
                "student.base_model": exp["student"]["base_model"]}
        if exp["sampling"]["semantic_model"] not in ("finetuned", "pretrained"):
            refs["sampling.semantic_model"] = exp["sampling"]["semantic_model"]
        for key, ref in refs.items():
            if ref is None:
                continue
            try:
                reference_kind(ref)
            except ModelResolutionError as err:
                raise ConfigError(f"experiments.{name}.{key}: {err}") from None

    def _candidates(self, exp: dict, dataset: str, seed: int, data: Node, encoder: Node,
                    strategies: list[str]) -> Node:
        sampling = dict(exp["sampling"])
        sampling["strategies"] = strategies
        needs_encoder = any(s.startswith("semantic_search") or s == "iterative_kde" for s in strategies)
        inputs = {"data": data}
        if needs_encoder and sampling["semantic_model"] == "finetuned":
            inputs["encoder"] = encoder
        if not needs_encoder:  # encoder options cannot change BM25/random/KDE/target-pair candidates
            for key in ("semantic_model", "exact", "batch_size", "max_length"):
                sampling.pop(key)
        if not any(s in ("kde", "iterative_kde") for s in strategies):
            sampling.pop("candidate_pool")
        sampling.pop("kde_reference")  # used when labelling
        params = {**sampling, "model": exp["base_model"], "seed": seed}
        return self._add(make_node("candidates", f"{dataset}.{'+'.join(strategies)}", params, inputs))

    def suite_tasks(self, evaluation: dict, dataset: dict) -> dict:
        """Which suite tasks can run, decided while planning so that adding a data file changes the key.

        Each task maps to its local file or directory, "hub" (STS from mteb), or
        None with the reason it is skipped in `skipped`.
        """
        root = Path(self.config["data_dir"])
        suites = evaluation["suites"]
        tasks: dict = {"sts": {}, "useb": {}, "skipped": {}}
        if "sts" in suites:
            for task in evaluation["sts_tasks"]:
                path = root / STS_TASKS_DIR / f"{task}.tsv"
                if path.is_file():
                    tasks["sts"][task] = os.path.normpath(path)
                elif evaluation["sts_hub"]:
                    tasks["sts"][task] = "hub"
                else:
                    tasks["skipped"][task] = f"no file {os.path.normpath(path)} (and evaluation.sts_hub is false)"
        if "useb" in suites:
            for task in evaluation["useb_tasks"]:
                path = root / USEB_DIR / task
                if path.is_dir():
                    tasks["useb"][task] = os.path.normpath(path)
                else:
                    tasks["skipped"][task] = f"no directory {os.path.normpath(path)} (unzip USEB's data-eval.zip there)"
        if "topic" in suites:
            has_topics = dataset["loader"].startswith("bws") or bool((dataset.get("columns") or {}).get("topic"))
            if has_topics:
                tasks["topic"] = evaluation["topic"]
            else:
                tasks["skipped"]["topic"] = "the dataset has no topic labels"
        if "diagnostics" in suites:
            tasks["positive_threshold"] = evaluation["positive_threshold"]
        return tasks

    def _suite(self, exp: dict, data: Node, model: Node) -> Node:
        """Evaluation-suite node of one Bi-Encoder (a trained student, or the zero-shot base model)."""
        params = {**self.suite_tasks(exp["evaluation"], self.config["datasets"][exp["dataset"]]),
                  **{k: exp["evaluation"][k] for k in ("batch_size", "max_length")}}
        inputs = {"data": data}
        if model.stage == "zero_shot":
            params["model"] = model.params["model"]
        else:
            inputs["model"] = model
        return self._add(make_node("suite", f"{data.name}.{model.name}", params, inputs))

    def local_files(self, key: str) -> list[str]:
        """Raw files a suite node reads (Snakemake inputs, so a replaced file reruns it)."""
        params = self.node(key).params
        paths = [p for p in params.get("sts", {}).values() if p != "hub"] + list(params.get("useb", {}).values())
        return sorted(paths)

    def _adapt(self, exp: dict, dataset: str, seed: int, data: Node) -> Node:
        options = {k: v for k, v in exp["adapt_mlm"].items() if k != "variant"}
        params = {**options, "model": exp["teacher"]["base_model"] or exp["base_model"],
                  "pool": exp["sampling"]["pool"], "exclude_eval_sentences": exp["sampling"]["exclude_eval_sentences"],
                  "seed": seed}
        return self._add(make_node("adapt", f"{dataset}.mlm", params, {"data": data}))

    def _teacher(self, exp: dict, dataset: str, seed: int, inputs: dict[str, Node]) -> Node:
        options = dict(exp["teacher"])
        model = options.pop("base_model") or exp["base_model"]
        if options["freeze_embeddings"] is None:  # thesis 5.4.3: freeze when starting from an adapted checkpoint
            options["freeze_embeddings"] = "init" in inputs
        if options["arch"] == "cbe":  # Cross-Encoder-only options must not change a CBE's key
            options.pop("loss")
            options.pop("activation")
        params = {**options, "model": model, "seed": seed}
        return self._add(make_node("teacher", f"{dataset}.{options['arch']}", params, inputs))

    def _student(self, exp: dict, dataset: str, seed: int, inputs: dict[str, Node], gold_only: bool = False) -> Node:
        options = dict(exp["student"])
        model = options.pop("base_model") or exp["base_model"]
        if options["freeze_embeddings"] is None:
            options["freeze_embeddings"] = "init" in inputs
        if gold_only:
            options["use_gold_labels"] = True
        params = {**options, "model": model, "seed": seed}
        return self._add(make_node("student", f"{dataset}.be", params, inputs))

    # -- lookups used by the Snakefile and the CLI
    def node(self, key: str) -> Node:
        try:
            return self.nodes[key]
        except KeyError:
            raise ConfigError(
                f"no planned stage has key '{key}': the config changed since that path was requested, "
                "or the path is mistyped (request results/<experiment>.json instead)"
            ) from None

    def experiment(self, name: str) -> ExperimentPlan:
        try:
            return self.experiments[name]
        except KeyError:
            known = ", ".join(sorted(self.experiments)) or "none"
            raise ConfigError(f"unknown experiment '{name}' (configured: {known})") from None

    def input_paths(self, key: str) -> dict[str, str]:
        return {role: self.nodes[k].path for role, k in self.node(key).inputs}

    def spec(self, key: str) -> dict:
        """What a stage job receives: the node, with its inputs as artifact paths."""
        node = self.node(key)
        return {"stage": node.stage, "key": key, "params": node.params, "inputs": self.input_paths(key)}

    def spec_json(self, key: str) -> str:
        return canonical_json(self.spec(key))

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

    def experiment_inputs(self, name: str) -> list[str]:
        exp = self.experiment(name)
        return sorted({self.nodes[k].path for roles in exp.runs.values() for k in roles.values()})

    def raw_inputs(self, key: str) -> list[str]:
        """Raw files a data node reads; raises MissingDataError (with instructions) if one is absent."""
        from .data import get_loader

        node = self.node(key)
        params = node.params
        loader = get_loader(params["loader"])
        return [str(p) for p in loader.inputs(params["dataset"], params, Path(params.get("data_dir", ".")))]
