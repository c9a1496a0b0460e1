"""Stage declarations and planning hooks, one module per stage family, and the registry built from them.

`augsbert.stages.<module>` declares its stages (`STAGES`, instances of `augsbert.stages.base.Stage`)
and holds what planning needs of them: which options enter a node's key, which nodes are its inputs,
what is checked before any job starts. The job that computes the artifact is `augsbert.stages.<module>`
(named by each declaration's `runner`), imported only when the job runs: these modules import no
model library, so planning and `augsbert --help` stay fast.

The registry is every module of this package, in alphabetical order of module: a new stage is a new
module here, its job module and its schema section (README "Development").
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
