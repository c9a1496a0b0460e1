"""The plan: validated config -> the experiments' graphs of content-addressed stage nodes.

`augsbert.planning.graph` says what a node and its key are; each stage's planning hook
(`augsbert.stages.<module>`) says which options and inputs its node has and which roles it fills; this
module runs the hooks over the registry for one experiment (which roles a run has, per seed) and answers
the Snakefile's and the CLI's lookups (a node's spec, an experiment's spec). It names no stage: what
differs between stages is in their declarations (augsbert.stages.base).

Plain Python, no Snakemake: the Snakefile looks nodes up by `{wildcards.key}`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .store.keys import canonical_json, short_hash
from .config.load import ConfigError, validated_experiment
from .config.names import unknown_name
from .store.model_refs import ModelResolutionError, reference_kind
from .stages import REGISTRY, planning_order
from .planning.graph import SEMANTIC_CHOICES, SPECS, Graph, Node, SeedPlan, write_spec

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


class Plan(Graph):
    """The nodes of the experiments asked for, indexed by key.

    Planning is lazy: an experiment is validated and planned when it is first looked up
    (`experiment`, `experiments[name]`, a grid's cells), so a dry run of one target reads the
    data and models of that target only. A key nobody has planned yet (a job started by key,
    as on a cluster) plans every experiment once to find it.
    """

    def __init__(self, config: dict):
        super().__init__(config)
        self.planned: dict[str, ExperimentPlan] = {}
        self.experiments = Experiments(self)
        self._users: dict[str, set[str]] = {}  # node key -> planned experiments that use it

    def plan_all(self) -> None:
        """Plan every configured experiment (what `node` falls back to for an unknown key)."""
        for name in self.experiments:
            self.experiment(name)

    def _plan_experiment(self, name: str, exp: dict) -> ExperimentPlan:
        """Nodes of one experiment, per seed: every stage's `check` once, then, for each seed, every stage's
        planning hook in the registry's planning order (augsbert.stages.planning_order), each seeing the roles
        planned before it (augsbert.stages.base says what a hook returns)."""
        self._check_models(name, exp)
        seeds = list(exp["seeds"] or self.config["seeds"])
        plan = ExperimentPlan(name, exp, self.config["datasets"][exp["dataset"]], seeds)
        for declared in REGISTRY.values():
            if declared.check is not None:
                declared.check(self, name, exp)
        order = planning_order()
        for seed in plan.seeds:
            seed_plan = SeedPlan(self, name, exp, seed, {})
            for declared in order:
                seed_plan.roles.update(declared.plan(seed_plan))
            plan.runs[seed] = {role: node.key for role, node in seed_plan.roles.items()}
        return plan

    @staticmethod
    def _check_models(name: str, exp: dict) -> None:
        """Fail while planning (not hours later in a job) on a model path that does not exist: every
        `base_model`, `cross_base_model` and `semantic_model` of the experiment, at any depth, that names a
        model (not a choice such as `pretrained` or `finetuned`)."""
        for key, ref in _model_references(exp):
            try:
                reference_kind(ref)
            except ModelResolutionError as err:
                raise ConfigError(f"experiments.{name}.{key}: {err}") from None

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
            if name not in self.experiments:
                raise ConfigError(unknown_name(name, "experiment", self.experiments))
            exp = validated_experiment(self.config, name)
            check_parallel_batches(name, exp, self.config.get("gpus", 1))
            plan = self._plan_experiment(name, exp)
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

    def experiment_specs(self, names: list[str]) -> dict[str, dict]:
        """experiment_spec of each of `names`, their planning warnings said after all are planned (a mistake found
        on the way ends with its one line alone)."""
        self.hold_warnings = True
        specs = {name: self.experiment_spec(name) for name in names}
        self.say_warnings()
        return specs

    def experiment_spec_file(self, name: str) -> str:
        """`@<path>` of an experiment's spec file (artifacts/.specs/results/<name>.json)."""
        return "@" + write_spec(Path(SPECS) / "results" / f"{name}.json", canonical_json(self.experiment_spec(name)))

    def experiment_inputs(self, name: str) -> list[str]:
        exp = self.experiment(name)
        return sorted({self.nodes[k].path for roles in exp.runs.values() for k in roles.values()})

    def raw_inputs(self, key: str) -> list[str]:
        """Raw files node `key` reads, by content in its key (its stage's `raw_inputs`); raises MissingDataError
        (with instructions) if one is absent."""
        node = self.node(key)
        declared = REGISTRY[node.stage]
        return declared.raw_inputs(node) if declared.raw_inputs else []



MODEL_KEYS = ("base_model", "cross_base_model", "semantic_model")
NOT_REFERENCES = {*SEMANTIC_CHOICES, "pretrained"}  # choices in those keys that name no model


def _model_references(section: dict, prefix: str = "") -> list[tuple[str, str]]:
    """(dotted key, model reference) of every model key in an experiment config, at any depth."""
    found = []
    for key, value in section.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            found += _model_references(value, f"{path}.")
        elif isinstance(value, list):
            for k, item in enumerate(value):
                if isinstance(item, dict):
                    found += _model_references(item, f"{path}[{k}].")
        elif key in MODEL_KEYS and isinstance(value, str) and value not in NOT_REFERENCES:
            found.append((path, value))
    return found


def check_parallel_batches(name: str, exp: dict, gpus: int) -> None:
    """With `gpus` > 1 the global batch of every stage that trains data-parallel (Stage.data_parallel:
    augsbert.training.distributed) must split evenly over the processes."""
    if gpus <= 1:
        return
    for section in dict.fromkeys(s.section for s in REGISTRY.values() if s.data_parallel and s.section):
        size = (exp.get(section) or {}).get("batch_size")
        if size is not None and size % gpus:
            raise ConfigError(f"experiments.{name}.{section}.batch_size: {size} is the global batch of {gpus} "
                              f"processes (gpus: {gpus}) and must be a multiple of {gpus}")
