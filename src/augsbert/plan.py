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
STAGE_VERSIONS = {"data": 2, "zero_shot": 2, "adapt": 1, "teacher": 2, "candidates": 1, "labels": 2,
                  "student": 2}

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
        plan = ExperimentPlan(name, exp, self.config["datasets"][dataset], list(self.config["seeds"]))
        data = self.data_node(dataset)
        gold = self.data_node(source)
        trained_on = {"data": gold, **({"eval": data} if source != dataset else {})}
        wanted = exp["models"]
        sampling = exp["sampling"]
        strategies = [s for s in sampling["strategies"] if s != "none"]
        zero_shot = self._add(make_node(
            "zero_shot", f"{dataset}.{slug(exp['base_model'])}", {"model": exp["base_model"], **exp["evaluation"]},
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
        if not needs_encoder:  # encoder options cannot change BM25/random/KDE candidates
            for key in ("semantic_model", "exact", "batch_size", "max_length"):
                sampling.pop(key)
        if not any(s in ("kde", "iterative_kde") for s in strategies):
            sampling.pop("candidate_pool")
        sampling.pop("kde_reference")  # used when labelling
        params = {**sampling, "model": exp["base_model"], "seed": seed}
        return self._add(make_node("candidates", f"{dataset}.{'+'.join(strategies)}", params, inputs))

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
