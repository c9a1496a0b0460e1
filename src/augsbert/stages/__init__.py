"""Stage declarations and planning hooks, one module per stage, and the registry built from them.

`augsbert.stages.<name>` declares its stage (`STAGES`, instances of `augsbert.stages.base.Stage`; a shard
stage, a fixed-size piece of another's job, is declared beside it) and holds what planning needs of it:
which options enter a node's key, which nodes are its inputs, what is checked before any job starts. The
job that computes the artifact is named by the declaration's `runner` (a function of `augsbert.jobs`),
imported only when the job runs: these modules import no model library, so planning and `augsbert --help`
stay fast.

The registry is every module of this package, in alphabetical order of module; `planning_order` is the
order its planning hooks run in (by the roles each needs and fills). A new stage is a new module here, its
job module and its schema section (docs/development.md).
"""

from __future__ import annotations

import pkgutil
from importlib import import_module

from .base import Stage


def _declared() -> tuple[Stage, ...]:
    stages: list[Stage] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        stages.extend(getattr(import_module(f"{__name__}.{info.name}"), "STAGES", ()))
    return tuple(stages)


STAGES: tuple[Stage, ...] = _declared()  # the stages of this package
REGISTRY: dict[str, Stage] = {}  # every stage by name: these and any registered since (read it, not STAGES)
for _stage in STAGES:
    if _stage.name in REGISTRY:
        raise RuntimeError(f"stage '{_stage.name}' is declared twice")
    REGISTRY[_stage.name] = _stage


def stage(name: str) -> Stage:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown stage '{name}' (stages: {', '.join(REGISTRY)})") from None


def register(declared: Stage) -> Stage:
    """Add a stage declared outside this package (a plugin, or a test's toy stage) to the registry.

    Call it before the workflow or the CLI reads the registry (rules and commands are made from it once).
    """
    if declared.name in REGISTRY:
        raise ValueError(f"stage '{declared.name}' is already declared")
    REGISTRY[declared.name] = declared
    return declared


def planning_order() -> list[Stage]:
    """The stages with a planning hook, each after the stages filling a role it `needs` (registry order
    among the rest). A stage that needs a role it fills itself (a refinement) runs after that role's other
    stages and before its other readers."""
    planned = [s for s in REGISTRY.values() if s.plan is not None]
    fillers: dict[str, list[Stage]] = {}
    for s in planned:
        for role in s.roles:
            fillers.setdefault(role, []).append(s)

    def before(s: Stage) -> set[str]:
        after: set[str] = set()
        for role in s.needs:
            others = [f for f in fillers.get(role, []) if f is not s]
            refines = role in s.roles
            for f in others:
                # of two stages that both read and fill a role, the one registered first refines first
                if refines and f.plan is not None and role in f.needs and planned.index(f) > planned.index(s):
                    continue
                after.add(f.name)
        return after

    deps = {s.name: before(s) for s in planned}
    order: list[Stage] = []
    done: set[str] = set()
    while len(order) < len(planned):
        ready = [s for s in planned if s.name not in done and deps[s.name] <= done]
        if not ready:
            stuck = sorted(n for n in deps if n not in done)
            raise RuntimeError(f"stages {', '.join(stuck)} need each other's roles (their `needs` and `roles`)")
        order.append(ready[0])
        done.add(ready[0].name)
    return order
