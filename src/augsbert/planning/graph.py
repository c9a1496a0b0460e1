"""The graph of content-addressed stage nodes: what a node is, how its key is made, how it is added.

Every node is `{stage, key, params, inputs}`; `key = <readable-name>-<hash>` where the hash covers
the stage, its version, its effective params and the keys of its inputs. Two experiments that need
the same stage configuration get the same node (and so share one artifact); changing a parameter
changes the key of that node and of every node after it, and leaves the old artifacts in place.

`Graph` holds the nodes of a config and adds them; each stage's planning hook
(`augsbert.stages.<module>`) decides what its node's params and inputs are, and `augsbert.plan`
wires the hooks into experiments.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..store.keys import KEY_PATTERN, canonical_json, short_hash
from ..store.fingerprints import DigestCache, model_identity

if TYPE_CHECKING:  # the declarations import this module (their planning hooks add nodes)
    from ..stages.base import Stage

ARTIFACTS = "artifacts"
SPECS = f"{ARTIFACTS}/.specs"  # the spec file of each job (a command line has a length limit)
# semantic_model values that are not model references
SEMANTIC_CHOICES = ("finetuned", "pretrained", "pretrained_stage")
PLAN_WARNINGS_SAID = "AUGSBERT_PLAN_WARNINGS_SAID"  # "1": this process' planning warnings were printed already


def slug(text: str) -> str:
    """A short readable name for a key: the last path component, filesystem-safe."""
    last = str(text).rstrip("/").split("/")[-1] or "x"
    name = re.sub(r"[^A-Za-z0-9_.+-]+", "_", last)[:60]
    # a key is dash-separated words (store.keys.KEY_PATTERN): the cut at 60 characters may end on a '-', and a
    # model name may hold '--' or start with '-'; such a name made a key no rule's wildcard accepts
    return re.sub(r"-{2,}", "-", name).strip("-") or "x"


def key_hash(stage: str, version: int, params: dict, inputs: dict[str, str]) -> str:
    """The hash part of a key: stage, its version, the keyed params and the input keys (role -> key)."""
    return short_hash({"stage": stage, "version": version, "params": params, "inputs": inputs})


@dataclass(frozen=True)
class Node:
    stage: str
    version: int  # the stage's code version (Stage.version): part of the key
    name: str
    params_json: str  # canonical JSON, so the node is hashable and immutable
    inputs: tuple[tuple[str, str], ...] = ()  # (role, upstream key)
    # settings outside the key (Stage.runtime); a node shared by experiments keeps the first one's
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
        return f"{self.name}-{key_hash(self.stage, self.version, self.params, dict(self.inputs))}"

    @property
    def path(self) -> str:
        return f"{ARTIFACTS}/{self.stage}/{self.key}"


def write_spec(path: Path, text: str) -> str:
    """Write `text` to `path` atomically unless it already holds exactly that; return the path."""
    try:
        if path.read_text() == text:
            return str(path)
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a write cut short (a full disk) leaves no partial file behind
        raise
    return str(path)


class Graph:
    """The nodes planned so far, indexed by key, and what adding one needs (model and file digests)."""

    def __init__(self, config: dict):
        self.config = config
        self.nodes: dict[str, Node] = {}
        self.digests = DigestCache()
        self._identities: dict[str, str] = {}
        self.pool_sizes: dict[tuple, int | None] = {}  # (data key, pool, exclude_eval) -> unique sentences
        self.pool_checks: dict[str, list[dict]] = {}  # data key -> sampling needs of the experiments using it
        # a person's rounds (active.annotator: file) planned past a file not there yet, as if filled: the whole
        # experiment, for its estimate only (augsbert.scheduling.estimate.whole_experiment_line); a run's plan ends
        # at that round
        self.every_round = False
        self.warnings: dict[str, str] = {}  # experiment -> its planning warning (one line)
        # True: warnings are kept, not printed, until say_warnings (a command planning every experiment of the
        # config says them after it planned, so a mistake found on the way ends with its one line alone)
        self.hold_warnings = False

    def warn(self, experiment: str, line: str) -> None:
        """A planning warning, not an error: one line per experiment, printed once on stderr as it is planned
        (not again in the Snakemake a dry `augsbert run` starts after it planned: PLAN_WARNINGS_SAID)."""
        if experiment in self.warnings:
            return
        self.warnings[experiment] = line
        if not self.hold_warnings:
            self._say(line)

    def say_warnings(self) -> None:
        """Print the warnings held while planning (hold_warnings), each once."""
        self.hold_warnings = False
        for line in self.warnings.values():
            self._say(line)

    @staticmethod
    def _say(line: str) -> None:
        if os.environ.get(PLAN_WARNINGS_SAID) != "1":
            print(f"augsbert: warning: {line}", file=sys.stderr, flush=True)

    def model_identity(self, ref: str) -> str:
        if ref not in self._identities:
            self._identities[ref] = model_identity(ref, self.digests, self.config.get("hub_revisions"))
        return self._identities[ref]

    def add(self, stage: Stage, name: str, settings: dict, inputs: dict[str, Node] | None = None) -> Node:
        """Add the node of `stage` with `settings`: runtime settings leave the key, models enter it by identity."""
        runtime = {k: settings[k] for k in stage.runtime if k in settings}
        params = {k: v for k, v in settings.items() if k not in runtime}
        refs = {k: runtime[k] for k in ("model", "semantic_model", "mutual_model")
                if isinstance(runtime.get(k), str) and runtime[k] not in SEMANTIC_CHOICES}
        if refs:
            params["model_identity"] = {k: self.model_identity(ref) for k, ref in refs.items()}
            revisions = {ref: self.config["hub_revisions"][ref] for ref in refs.values()
                         if ref in self.config.get("hub_revisions", {})}
            if revisions:
                runtime["hub_revisions"] = revisions
        if "semantic_model" in runtime and runtime["semantic_model"] in SEMANTIC_CHOICES:
            params["semantic_model"] = runtime.pop("semantic_model")  # a choice, not a reference
        node = Node(stage=stage.name, version=stage.version, name=slug(name), params_json=canonical_json(params),
                    inputs=tuple(sorted((role, n.key) for role, n in (inputs or {}).items())),
                    runtime_json=canonical_json(runtime))
        self.nodes.setdefault(node.key, node)
        return node


@dataclass(frozen=True)
class SeedPlan:
    """What a stage's `plan` hook sees: the graph to add its node to, the experiment and one of its seeds,
    and the roles planned so far for that seed (role -> node: data, teacher, student, ...)."""

    graph: Graph
    experiment: str
    config: dict[str, Any]  # the experiment's effective config (defaults filled in)
    seed: int
    roles: dict[str, Node]
