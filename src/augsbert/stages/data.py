"""The `data` stage: a dataset's raw files read into canonical parquet splits (job: augsbert.jobs.data)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..config.datasets import DatasetOptions
from ..errors import ConfigError, MissingDataError
from ..store.fingerprints import path_digest
from ..planning.graph import Graph, Node, SeedPlan
from ..params import Params, default_of
from .base import Stage
from .runs import TARGET_DATA, source, transfer
from .sizes import dataset_items


@dataclass(frozen=True, kw_only=True)
class DataParams(Params):
    """A dataset definition (config `datasets.<name>`) with its name, data folder and file digests.

    What the stage itself reads is typed here; each loader's own options (`path`, `columns`, split sizes,
    topics, ...) stay in `options`, checked by the config schema per loader and read by the loader.
    """

    OPEN = True
    dataset: str
    loader: str
    on_bad_rows: Literal["error", "skip"] = default_of(DatasetOptions, "on_bad_rows")
    data_dir: str = "."
    files: list[list[str]] | str = "missing"  # [name, digest] per raw file, or "missing"
    unlabeled: str | None = None
    topic_corpus: dict[str, Any] | None = None
    pool_checks: list[dict[str, Any]] = field(default_factory=list)  # what planned sampling stages need
    options: dict[str, Any] = field(default_factory=dict)


# loader -> hub dataset of its `download: true` layout (src/augsbert/data/loaders.py)
HUB_DATASET_OF_LOADER = {"stsb": "sentence-transformers/stsb"}


def hub_datasets(node: Node) -> list[str]:
    """The hub dataset a `download: true` dataset without local files is fetched from, if its loader has one."""
    settings = node.settings
    repo = HUB_DATASET_OF_LOADER.get(settings.get("loader"))
    return [repo] if repo and settings.get("download") and settings.get("files") == [] else []


DATA = Stage("data", 3, "read a dataset's raw files into canonical parquet splits", "augsbert.jobs.data:run",
             section="datasets", runtime=("data_dir", "path", "train", "dev", "test", "unlabeled"),
             roles=(TARGET_DATA, "source_data"), kind_options=("loader",),
             gpu=False, device=False, seconds_per_item=0.001, base_mem_mb=4000, mb_per_item=0.002,
             aliases=("prepare-data",), rule_alias="prepare_data", env="cpu", threads=1, cache=False,
             params=DataParams, raw_inputs=lambda node: raw_inputs(node), plan=lambda seed_plan: plan_data(seed_plan),
             check=lambda graph, name, exp: check_topics(graph, name, exp),
             items=lambda plan, node: dataset_items(node), estimate="read", hub_datasets=hub_datasets)
STAGES = (DATA,)


def plan_data(seed_plan: SeedPlan) -> dict[str, Node]:
    """The target's data node (`data`) and, in domain transfer, the source's (`source_data`)."""
    exp, graph = seed_plan.config, seed_plan.graph
    roles = {TARGET_DATA: data_node(graph, exp["dataset"])}
    if transfer(exp):
        roles["source_data"] = data_node(graph, source(exp))
    return roles


def check_topics(graph: Graph, name: str, exp: dict) -> None:
    """A prompting experiment (`topic_prompt`, thesis 4.4) needs data with topic labels."""
    if exp["topic_prompt"] != "none" and not has_topics(graph.config["datasets"][exp["dataset"]]):
        raise ConfigError(f"experiments.{name}.topic_prompt: {exp['topic_prompt']}, but dataset "
                          f"'{exp['dataset']}' has no topic labels (BWS, or a pairs_file with columns.topic)")


def pairs_have_topics(definition: dict) -> bool:
    """Whether a dataset's gold pairs carry a topic (BWS, or a pairs_file with a `topic` column)."""
    return definition["loader"] == "pairs_file" and bool((definition.get("columns") or {}).get("topic")) \
        or definition["loader"].startswith("bws")


def has_topics(definition: dict) -> bool:
    """Whether a dataset gives sentences topic labels: its pairs, or its `topic_corpus`."""
    return (pairs_have_topics(definition) or bool(definition.get("topic_corpus"))
            or bool((definition.get("columns") or {}).get("topic")))


def dataset_settings(config: dict, dataset: str) -> dict:
    """A data node's settings before its file digests: the dataset's definition, its name and the data folder."""
    return {"dataset": dataset, **config["datasets"][dataset], "data_dir": os.path.normpath(config["data_dir"])}


def dataset_inputs(config: dict, dataset: str) -> list[str]:
    """Raw files dataset `dataset` of `config` reads; raises MissingDataError (with instructions) if one is absent."""
    return _loader_inputs(dataset_settings(config, dataset))


def data_node(graph: Graph, dataset: str) -> Node:
    """Raw data enter the key by content (sha256 of each file), not by where they lie or when they were copied."""
    settings = dataset_settings(graph.config, dataset)
    try:
        files = _loader_inputs(settings)
    except MissingDataError:
        settings["files"] = "missing"  # the data job (if it is needed) stops with instructions
    else:
        settings["files"] = [[Path(f).name, path_digest(graph.digests, f)] for f in files]
    return graph.add(DATA, dataset, settings)


def raw_inputs(node: Node) -> list[str]:
    """Raw files a data node reads; raises MissingDataError (with instructions) if one is absent."""
    return _loader_inputs(node.settings)


def raw_inputs_of(params: dict) -> list[str]:
    """Raw files the data stage's params name (a job's spec), as planning found them."""
    return _loader_inputs(params)


def _loader_inputs(params: dict) -> list[str]:
    """The raw files of a data node's settings (`dataset_settings`), as its loader's `inputs` finds them."""
    from ..data import get_loader  # the loaders import pandas: planning reads them only for a data node

    loader = get_loader(params["loader"])
    data_dir = Path(params.get("data_dir", default_of(DataParams, "data_dir")))
    return [str(p) for p in loader.inputs(params["dataset"], params, data_dir)]


def triples_inputs(node: Node) -> list[str]:
    """The NLI triples files a pre-training or RCL entropy node reads (`pretrain.triples`), for Snakemake's DAG: a
    missing one stops the plan of a target that needs it, with its path (not the job, hours in); other targets'
    plans are not touched (the key holds the file as `missing` until it arrives)."""
    triples = node.settings.get("triples")
    paths = [triples] if isinstance(triples, str) else list(triples or [])
    for path in paths:
        if not Path(path).is_file():
            raise MissingDataError(f"{path}: no such file (pretrain.triples of {node.stage} {node.key}); put the NLI "
                                   "triples there (columns anchor, positive, negative, or SNLI / MultiNLI jsonl as "
                                   "released) or change pretrain.triples")
    return paths
