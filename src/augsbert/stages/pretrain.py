"""The `pretrain` stage: unsupervised pre-training of a sentence encoder (job: augsbert.jobs.pretrain)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Literal
from pathlib import Path

from ..errors import ConfigError
from ..store.fingerprints import path_digest
from ..store.graph import Graph, Node, SeedPlan
from ..params import Params, TrainingParams
from ..objectives import OBJECTIVES, entry, resolved
from .base import Row, Stage
from .rcl_entropy import OBJECTIVE_INPUTS
from .data import data_node, triples_inputs
from .sizes import pool_items


@dataclass(frozen=True, kw_only=True)
class PretrainParams(TrainingParams):
    """The `pretrain` stage's params: the `pretrain` section as `objectives.resolved` leaves it: the
    schedule filled from the preset, and only the options the objective (and SimCSE variant) reads. The spec is
    flat; the objective's options are its entry's options class (`options`), read as attributes here too.

    `eval_batch_size` / `eval_max_length` encode the target's dev split (checkpoint selection and the
    results row), as the zero-shot row does; `regulators` is set by the job (RCL: its entropy inputs).
    """

    objective: str
    preset: str | None = None  # the preset the plan filled the schedule from (the job reads the schedule)
    max_steps: int
    scheduler: str
    warmup_steps: int | None = None  # set: the warm-up in steps (seed 000's 910), in place of warmup_ratio
    optimizer: Literal["adamw", "rmsprop"] = "adamw"  # rmsprop: the `ct` preset (TSDAE App. B)
    pooling: Literal["cls", "mean"]
    pool: Literal["all", "train", "unlabeled", "train+unlabeled"] = "all"
    exclude_eval_sentences: bool
    held_out: float
    eval_steps: int
    eval_max_length: int | None = None  # None: the trained max_length
    selection: Literal["target_dev", "held_out_loss", "last"]
    triples: str | list[str] | None = None
    triples_digest: str | list[str] | None = None
    triples_format: Literal["triples", "nli"] | None = None
    options: Params | None = None  # the objective's own options (its entry's options class), read from the same level
    regulators: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict, where: str = "params") -> PretrainParams:
        """The flat spec: the objective's options are read (and checked) by its entry's options class."""
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected an object, got {type(data).__name__}")
        options = entry(data.get("objective")).options
        own = {f.name for f in dataclasses.fields(options)}
        unknown = sorted(set(data) - own - {f.name for f in dataclasses.fields(cls)})
        if unknown:  # an option of another objective, or of no version of the stage
            raise ConfigError(f"{where}: unknown parameter {unknown[0]!r} for objective {data['objective']!r} "
                              "(written by another version of the stage? plan it again)")
        common = super().from_json({k: v for k, v in data.items() if k not in own}, where)
        return common.replace(options=options.from_json({k: v for k, v in data.items() if k in own}, where))

    def to_json(self) -> dict:
        values = super().to_json()
        values.update(values.pop("options") or {})
        return values

    def __getattr__(self, name: str):
        # only for names the class lacks: the objective's options read as `params.temperature`
        options = self.__dict__.get("options")
        if options is not None and name in options.__dataclass_fields__:
            return getattr(options, name)
        raise AttributeError(f"{type(self).__name__} of objective {self.__dict__.get('objective')!r} has no {name!r}")


PRETRAIN = Stage("pretrain", 1, "unsupervised pre-training of a sentence encoder (pretrain.objective: SimCSE, CT, "
                 "TSDAE, Noise Matching, MLM / TSDAE multi-task) on a dataset's sentences",
                 "augsbert.jobs.pretrain:run",
                 # the triples file enters by digest
                 section="pretrain", runtime=("eval_batch_size", "model", "triples"), roles=("pretrained",),
                 kind_options=("objective",),
                 raw_inputs=lambda node: triples_inputs(node),
                 seconds_per_item=0.01, params=PretrainParams, checkpoint="unsupervised pre-trained", plan=lambda seed_plan: plan_pretrain(seed_plan),
                 needs=("data",), items=pool_items, rows={"pretrained": Row(20, "Pre-trained", "encoder after unsupervised pre-training "
                                                                                  "(pretrain.objective), no labels")},
                 check=lambda graph, name, exp: check_pretrain_use(name, exp, exp["adapt"]["variant"]),
                 gpu_sequences=2)  # two views (SimCSE, NM), two models (CT), or an encoder and its decoder (TSDAE)
STAGES = (PRETRAIN,)


def check_pretrain_use(name: str, exp: dict, variant: str) -> None:
    """Later stages may start from the pretrain stage only when there is one, and not from two checkpoints."""
    uses = {"teacher.base": exp["teacher"]["base"] == "pretrained",
            "student.base": exp["student"]["base"] == "pretrained",
            "candidates.semantic_model": exp["candidates"]["semantic_model"] == "pretrained_stage"}
    if exp["pretrain"]["objective"] == "none":
        for key, used in uses.items():
            if used:
                raise ConfigError(f"experiments.{name}.{key}: starts from the pretrain stage, but "
                                  "pretrain.objective is none; set an objective")
    clash = {"teacher.base": variant != "augsbert", "student.base": variant == "full_domain"}
    for key, adapted in clash.items():
        if uses[key] and adapted:
            raise ConfigError(f"experiments.{name}.{key}: pretrained, but adapt.variant ({variant}) already "
                              "starts it from the MLM-adapted checkpoint; choose one")
    for objective in OBJECTIVES.values():  # what each objective refuses (its own options set for another one, ...)
        objective.check(f"experiments.{name}", exp["pretrain"])


def pretrain(graph: Graph, name: str, exp: dict, seed: int, target: Node) -> Node:
    """The pretrain node: corpus = `pretrain.dataset` (or the target), evaluated on the target (`eval`)."""

    options = resolved(exp["pretrain"])
    options["model"] = options.pop("base_model") or exp["base_model"]
    options["eval_batch_size"] = exp["evaluation"]["batch_size"]
    options["eval_max_length"] = exp["evaluation"]["max_length"]  # as the zero-shot row: comparable
    corpus = options.pop("dataset") or exp["dataset"]
    if corpus not in graph.config["datasets"]:
        raise ConfigError(f"experiments.{name}.pretrain.dataset: unknown dataset '{corpus}' "
                          f"(configured: {', '.join(sorted(graph.config['datasets']))})")
    if options.get("triples_format") == "auto":  # told from each file (name or first record) when read:
        options.pop("triples_format")             # keys of configs without the option stay as they were
    if options["triples"]:
        one = isinstance(options["triples"], str)  # a list (SNLI + MultiNLI): one digest per file
        paths = [Path(graph.config["data_dir"]) / f for f in ([options["triples"]] if one else options["triples"])]
        # as a missing raw data file: its job stops with the path (a grid for NLI data not yet
        # downloaded must not break every plan), and the file's arrival changes the key
        digests = [path_digest(graph.digests, p) if p.is_file() else "missing" for p in paths]
        options["triples"] = os.path.normpath(paths[0]) if one else [os.path.normpath(p) for p in paths]
        options["triples_digest"] = digests[0] if one else digests
    else:
        options.pop("triples")
        options.pop("triples_format", None)
    inputs = {"data": data_node(graph, corpus), "eval": target}
    if options["objective"] in OBJECTIVE_INPUTS:  # artifacts of another stage (rcl: its entropy models)
        inputs.update(OBJECTIVE_INPUTS[options["objective"]](graph, corpus, options, seed, inputs))
    return graph.add(PRETRAIN, f"{corpus}.{options['objective']}.{options['pooling']}", {**options, "seed": seed},
                     inputs)


def plan_pretrain(seed_plan: SeedPlan) -> dict[str, Node]:
    """The pretrain stage's encoder (`pretrain.objective`), and RCL's entropy models (roles `rcl_entropy_<k>`)."""
    exp = seed_plan.config
    if exp["pretrain"]["objective"] == "none":
        return {}
    node = pretrain(seed_plan.graph, seed_plan.experiment, exp, seed_plan.seed, seed_plan.roles["data"])
    return {"pretrained": node, **{f"rcl_{role}": seed_plan.graph.nodes[key] for role, key in node.inputs
                                   if role.startswith("entropy_")}}
