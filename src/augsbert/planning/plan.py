"""The plan: validated config -> the experiments' graphs of content-addressed stage nodes.

`augsbert.store.graph` says what a node and its key are; each stage's planning hook
(`augsbert.stages.<module>`) says which options and inputs its node has; this module wires the
hooks into one experiment (which roles a run has, per seed) and answers the Snakefile's and the
CLI's lookups (a node's spec, an experiment's or a grid's layout).

Plain Python, no Snakemake: the Snakefile looks nodes up by `{wildcards.key}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config.load import ConfigError, canonical_json, short_hash, unknown_name
from ..store.graph import SEMANTIC_CHOICES, SPECS, Graph, Node, SeedPlan, write_spec
from ..stages import REGISTRY
from ..stages.adapt import adapt, check_adapt_pairs
from ..stages.candidates import candidates, check_pool
from ..stages.ensemble import MEMBER_ROLE, check_members, member_config, member_inputs, member_seed, teacher_ensemble
from ..stages.gold_subset import gold_subset
from ..stages.classifier import classifier
from ..stages.labels import labels
from ..stages.prepare_data import data_node, has_topics, pairs_have_topics, raw_inputs
from ..stages.pretrain import check_pretrain_use, pretrain
from ..stages.suite import SUITE_ROLES, local_files, suite
from ..stages.train import dev_input, student, student_selection, teacher
from ..stages.trans_encoder import check_pairs, trans_encoder
from ..stages.zero_shot import zero_shot

# Rows of a grid table, in thesis order, and their titles.
TABLE_ROLES = ("zero_shot", "pretrained", "classifier", "lower_bound", "teacher", "student", "gpl")
ROLE_TITLES = {"zero_shot": "Zero-shot base model", "pretrained": "Pre-trained", "classifier": "Topic classifier",
               "lower_bound": "SBERT (lower bound)", "teacher": "{arch} (upper bound)", "gpl": "GPL"}


def row_label(role: str, arch: str, values: list[str], student_title: str = "AugSBERT") -> str:
    """Thesis-style row names: "AugSBERT-BM25", "CBE (upper bound)", "SBERT (lower bound)"; numbered roles:
    "Teacher member 2 (CE)", "Trans-Encoder round 1: CE cross (mutual)"."""
    if role == "student":  # an empty title: the axis values alone ("DomainSBERT")
        return "-".join(part for part in [student_title, *values] if part)
    title = numbered_title(role, arch) or ROLE_TITLES[role].format(arch=arch)
    return f"{title} [{', '.join(values)}]" if values else title


def numbered_title(role: str, arch: str) -> str | None:
    """The title of an ensemble member's or a Trans-Encoder round's row (`arch`: that model's), else None."""
    match = re.fullmatch(r"teacher_member_(\d+)", role)
    if match:
        return f"Teacher member {int(match[1]) + 1} ({arch})"
    match = re.fullmatch(r"te_(cross|bi)_(\d+)(_mutual)?", role)
    if match:
        model = f"{arch} cross" if match[1] == "cross" else "Bi-Encoder"
        return f"Trans-Encoder round {match[2]}: {model}{' (mutual)' if match[3] else ''}"
    return None


def numbered_roles(roles) -> list[str]:
    """Ensemble members and Trans-Encoder rounds among `roles`, in table order (members; rounds, cross first)."""
    found = sorted({r for r in roles if numbered_title(r, "")},
                   key=lambda r: (r.startswith("te_"), [int(n) for n in re.findall(r"\d+", r)], r.startswith("te_bi"),
                                  r.endswith("_mutual")))
    return found


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

    def data_node(self, dataset: str) -> Node:
        return data_node(self, dataset)

    def _plan_experiment(self, name: str, exp: dict) -> ExperimentPlan:
        """Nodes of one experiment, per seed.

        In-domain the teacher and the lower bound learn the target's gold; with
        `source` (domain transfer) they learn the source's gold and are tested
        on the target, and no target label enters any trained model: silver
        candidates come from the target's train *sentences*, the teacher's gold
        (for KDE references, re-labelling and `use_gold_labels`) is the
        source's, and the student is selected on the source dev split (or the
        last epoch) unless `student.selection: target_dev` says otherwise.

        After the built-in chain, every declared stage with a `plan` hook (a stage added
        outside it, README "Development") is asked per seed which roles it adds.
        """
        self._check_models(name, exp)
        dataset = exp["dataset"]
        source = exp["source"] or dataset
        transfer = source != dataset
        plan = ExperimentPlan(name, exp, self.config["datasets"][dataset], list(exp["seeds"] or self.config["seeds"]))
        data = data_node(self, dataset)
        gold = data_node(self, source)
        trained_on = {"data": gold, **({"eval": data} if transfer else {})}
        selection = student_selection(name, exp)
        wanted = exp["models"]
        sampling = exp["sampling"]
        strategies = [s for s in sampling["strategies"] if s != "none"]
        zero_shot_node = zero_shot(self, exp, dataset, data)
        variant = exp["adapt_mlm"]["variant"]
        if strategies and "student" in wanted:
            check_pool(self, name, sampling, data)
            # the data job checks the same when it has made the tables, before any training starts
            self.pool_checks.setdefault(data.key, []).append({"experiment": name, "sampling": {
                k: sampling[k] for k in ("strategies", "top_k", "candidate_pool", "pool", "exclude_eval_sentences")}})
        check_pretrain_use(name, exp, variant)
        check_adapt_pairs(name, exp, strategies)
        if "trans_encoder" in wanted:
            check_pairs(name, exp)
        prompt = self._topic_prompt(name, exp)
        hooks = [s for s in REGISTRY.values() if s.plan is not None]
        few_labels = exp["gold_fraction"] < 1
        for seed in plan.seeds:
            roles = {"data": data, **({"source_data": gold} if transfer else {})}
            if few_labels:  # gold_fraction: a seeded subset of the gold stands for the gold in every trained model
                roles["gold_subset"] = subset = gold_subset(self, source, exp["gold_fraction"], seed, gold)
                trained_on = {"data": subset, **({"eval": data} if transfer else {})}
            # what sampling and labelling read as the target: the subset in-domain (its unlabelled pairs)
            target = roles.get("gold_subset", data) if not transfer else data
            seed_gold = roles.get("gold_subset", gold)
            pretrained = pretrain(self, name, exp, seed, data) if exp["pretrain"]["objective"] != "none" else None
            lower_bound = student(self, exp, source, seed, {**trained_on, **dev_input(selection, data, transfer)},
                                  selection, gold_only=True)
            # adapt_mlm.pairs: candidates (thesis 4.3.1): the candidates come first, MLM trains on the pairs the
            # teacher will label
            silver_first = candidates(self, exp, dataset, seed, target, lower_bound, strategies, pretrained) \
                if variant != "augsbert" and exp["adapt_mlm"]["pairs"] == "candidates" else None
            adapted = adapt(self, exp, dataset, seed, data, prompt, silver_first) if variant != "augsbert" else None
            if silver_first is not None:
                roles["candidates"] = silver_first
            if adapted is not None:
                roles["adapt"] = adapted
            if pretrained is not None:
                roles["pretrained"] = pretrained
                roles.update({f"rcl_{role}": self.nodes[key] for role, key in pretrained.inputs  # RCL's entropy models
                              if role.startswith("entropy_")})
            if "zero_shot" in wanted:
                roles["zero_shot"] = zero_shot_node
            if "classifier" in wanted:
                roles["classifier"] = classifier(self, name, exp, dataset, seed, data)
            if "lower_bound" in wanted:
                roles["lower_bound"] = lower_bound
            members: list = []
            if "teacher" in wanted or "student" in wanted:
                teacher_prompt = prompt if pairs_have_topics(self.config["datasets"][source]) else None
                if exp["teacher"]["ensemble"]:  # teacher.ensemble: each member a teacher, their scores combined
                    members = [self._teacher(name, member_config(exp, m), source, member_seed(seed, m.get("seed", 0)),
                                             trained_on, adapted, pretrained, teacher_prompt)
                               for m in exp["teacher"]["ensemble"]]
                    check_members(name, members)
                    roles.update({MEMBER_ROLE.format(k): m for k, m in enumerate(members)})
                    teacher_node = teacher_ensemble(self, exp, source, members, trained_on)
                else:
                    teacher_node = self._teacher(name, exp, source, seed, trained_on, adapted, pretrained,
                                                 teacher_prompt)
                if "teacher" in wanted:
                    roles["teacher"] = teacher_node
            if "student" in wanted:
                label_inputs = {"teacher": teacher_node, "gold": seed_gold, **member_inputs(members)}
                if strategies:
                    roles["candidates"] = label_inputs["candidates"] = candidates(
                        self, exp, dataset, seed, target, lower_bound, strategies, pretrained)
                if "target_pairs" in strategies and not (transfer or few_labels):
                    raise ConfigError(f"experiments.{name}.sampling.strategies: target_pairs is for domain transfer "
                                      "(`source` set) or few labels (`gold_fraction` < 1: the train pairs left "
                                      "unlabelled); in-domain, silver.relabel_gold re-labels the train pairs")
                if not (strategies or exp["silver"]["relabel_gold"]):
                    raise ConfigError(f"experiments.{name}: the student gets no teacher labels (sampling.strategies "
                                      "is [none] and silver.relabel_gold is false); it would just be the lower bound")
                roles["labels"] = labels(self, exp, dataset, seed, label_inputs, roles, data, prompt)
                # the student's gold (use_gold_labels) and default dev split are the teacher's: the source's in transfer
                student_inputs = {**trained_on, "labels": roles["labels"], **dev_input(selection, data, transfer)}
                if variant == "full_domain":
                    student_inputs["init"] = adapted
                elif exp["student"]["base"] == "pretrained":
                    student_inputs["init"] = pretrained
                roles["student"] = student(self, exp, dataset, seed, student_inputs, selection,
                                           prompt=prompt if exp["topic_prompt"] == "prompted" else None)
            if "trans_encoder" in wanted:  # unlabelled pairs: the target's train pairs or the sampled candidates
                te_pairs = data
                if exp["trans_encoder"]["pairs"] == "candidates":
                    te_pairs = roles.get("candidates") or candidates(self, exp, dataset, seed, target, lower_bound,
                                                                     strategies, pretrained)
                roles.update(trans_encoder(self, name, exp, dataset, seed, data, te_pairs, pretrained))
            for hook in hooks:
                roles.update(hook.plan(SeedPlan(self, name, exp, seed, dict(roles))))
            plan.runs[seed] = {role: node.key for role, node in roles.items()}
        for roles in plan.runs.values():
            for role in SUITE_ROLES:
                if role in roles and exp["evaluation"]["suites"]:
                    roles[f"{role}_suite"] = suite(self, exp, data, self.nodes[roles[role]]).key
        return plan

    def _teacher(self, name: str, exp: dict, source: str, seed: int, trained_on: dict[str, Node],
                 adapted: Node | None, pretrained: Node | None, prompt: str | None) -> Node:
        """The teacher node of `exp`'s teacher section (one ensemble member's, or the single teacher's)."""
        if exp["teacher"]["base"] == "pretrained" and pretrained is None:
            raise ConfigError(f"experiments.{name}.teacher.base: pretrained, but `pretrain.objective` is none")
        init = adapted or (pretrained if exp["teacher"]["base"] == "pretrained" else None)
        return teacher(self, exp, source, seed, {**trained_on, **({"init": init} if init else {})}, prompt)

    @staticmethod
    def _check_models(name: str, exp: dict) -> None:
        """Fail while planning (not hours later in a job) on a model path that does not exist."""
        from ..models.resolve import ModelResolutionError, reference_kind

        refs = {"base_model": exp["base_model"], "teacher.base_model": exp["teacher"]["base_model"],
                "student.base_model": exp["student"]["base_model"], "pretrain.base_model": exp["pretrain"]["base_model"]}
        if exp["sampling"]["semantic_model"] not in SEMANTIC_CHOICES:
            refs["sampling.semantic_model"] = exp["sampling"]["semantic_model"]
        for k, member in enumerate(exp["teacher"]["ensemble"]):
            refs[f"teacher.ensemble[{k}].base_model"] = member.get("base_model")
        te = exp["trans_encoder"]
        refs.update({"trans_encoder.cross.base_model": te["cross"].get("base_model"),
                     "trans_encoder.bi.base_model": te["bi"].get("base_model")})
        for key in ("base_model", "cross_base_model") if te["mutual"] else ():
            if te["mutual"][key] != "pretrained":  # `pretrained`: the pretrain stage's encoder
                refs[f"trans_encoder.mutual.{key}"] = te["mutual"][key]
        for key, ref in refs.items():
            if ref is None:
                continue
            try:
                reference_kind(ref)
            except ModelResolutionError as err:
                raise ConfigError(f"experiments.{name}.{key}: {err}") from None

    def _topic_prompt(self, name: str, exp: dict) -> str | None:
        """The topic delimiter when the experiment prompts (thesis 4.4), else None; checks the data has topics."""
        if exp["topic_prompt"] == "none":
            return None
        if not has_topics(self.config["datasets"][exp["dataset"]]):
            raise ConfigError(f"experiments.{name}.topic_prompt: {exp['topic_prompt']}, but dataset "
                              f"'{exp['dataset']}' has no topic labels (BWS, or a pairs_file with columns.topic)")
        return exp["topic_delimiter"]

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
            from ..config.load import validated_experiment

            if name not in self.experiments:
                raise ConfigError(unknown_name(name, "experiment", self.experiments))
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
        from ..config.grids import cells

        grids = self.config.get("grids") or {}
        if name not in grids:
            raise ConfigError(unknown_name(name, "grid", grids))
        grid = grids[name]
        columns = list(grid["columns"])
        by_combo: dict[tuple, dict[str, str]] = {}
        for cell in cells(name, grid):
            by_combo.setdefault(cell.combo, {})[cell.column] = cell.experiment
        varying = [axis for axis, values in (grid.get("axes") or {}).items() if len(values) > 1]
        rows = []
        planned = {r for exps in by_combo.values() for e in exps.values() for roles in self.experiments[e].runs.values()
                   for r in roles}
        numbered = numbered_roles(planned)
        # members after the teacher (the ensemble), Trans-Encoder rounds at the end
        table_roles = [*TABLE_ROLES[:TABLE_ROLES.index("student")], *[r for r in numbered if not r.startswith("te_")],
                       "student", *[r for r in numbered if r.startswith("te_")], "gpl"]
        for role in table_roles:
            groups: dict[tuple, list[tuple]] = {}
            for combo, experiments in by_combo.items():
                signature = tuple(
                    tuple(self.experiments[experiments[c]].runs[s].get(role) for s in self.experiments[experiments[c]].seeds)
                    for c in columns)
                if any(k for keys in signature for k in keys):
                    groups.setdefault(signature, []).append(combo)
            for combos in groups.values():
                first = by_combo[combos[0]]
                arch = self._arch_title(role, self.experiments[first[columns[0]]])
                # an axis that sets the teacher's arch is already in a teacher row's title ("CE (upper bound)")
                fixed = [grid["labels"].get(value, value) for axis, value in combos[0]
                         if axis in varying and all(dict(c)[axis] == value for c in combos)
                         and not (role == "teacher" and "arch" in ((grid["axes"][axis][value] or {}).get("teacher") or {}))]
                rows.append({"label": row_label(role, arch, fixed, grid["student_title"]), "role": role,
                             "cells": {c: first[c] for c in columns}})
        return {"grid": name, "description": grid["description"], "metrics": grid["metrics"], "columns": columns,
                "rows": rows, "experiments": sorted({e for exps in by_combo.values() for e in exps.values()})}

    def _arch_title(self, role: str, exp: ExperimentPlan) -> str:
        """What a row title says of the model's architecture: the teacher's arch (or its ensemble), a member's or a
        Trans-Encoder cross model's own."""
        key = exp.runs[exp.seeds[0]].get(role)
        node = self.nodes[key] if key else None
        if node is not None and node.stage == "teacher_ensemble":
            archs = "+".join(self.nodes[k].params["arch"].upper() for r, k in node.inputs if r.startswith("member_"))
            return f"Ensemble {archs} ({node.params['combine']})"
        if node is not None and node.stage == "teacher" and role != "teacher":
            return node.params["arch"].upper()
        return exp.config["teacher"]["arch"].upper()

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
        return raw_inputs(self.node(key))

    def local_files(self, key: str) -> list[str]:
        """Raw files a suite node reads (by content in its key: a replaced file gets a new key; not Snakemake
        inputs, so a moved one reruns nothing)."""
        return local_files(self.node(key))
