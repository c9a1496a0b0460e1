"""The model card's reproduce recipe pruned to what made the model (issue 50 item 7).

An experiment's effective config holds every option of every stage and objective (~470 lines for a demo
teacher), most of which never reached the exported model: `loss: bce` under a Cross-Bi-Encoder teacher (only a
Cross-Encoder has that loss), the student's `selection` under a teacher export. The recipe keeps only the
options that the planner needs to give the exported model its artifact key; as a key hashes its stage's params
and its inputs' keys, the same key means the same params all the way up (data, teacher, labels, ...).

How it is found, by the planner itself, not by a list of which option feeds which stage: the recipe is read as
the user will read it (merged over the shipped config/config.yaml, as `--configfile reproduce.yaml` is), and
each option (a whole section first, then its options one by one) is dropped where the planned key of the model
stays the same without it: it then either did not enter the key or its value is what config/config.yaml and
the schema give anyway. What is left plans the same key (checked once more at the end). Where the full config
itself does not plan that key here (no config/config.yaml in the working directory, the config changed since the
model was trained, data absent), nothing is pruned and `prune` says why.

The recipe's command builds the experiment's results file, so the recipe must hold the options of everything that
file builds, not only of the model (issue 56: the lower bound's recipe dropped the teacher's caps while its
command trained the experiment's teacher, uncapped, hours on a CPU). Its `models` is cut to the exported model's
role where that plans the same key (the results file then builds that model, what it is built from and its
evaluation, nothing else), and an option is dropped only where every planned key of the experiment's runs stays
the same without it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Callable

from ..config.load import deep_merge, prepare_config, read_config
from ..config.yaml_files import SHIPPED_CONFIG
from ..plan import Plan

EXPERIMENT = "experiments"
# Options of the experiment kept whatever the key says: what the recipe's run trains (its models and seeds: left
# out, the shipped defaults would train models and seeds the exported one never needed) and its description.
# The recipe's data_dir, seeds and dataset definition are outside the experiment: never pruned.
KEEP = ("models", "seeds", "description")


def recipe_name(name: str, shipped: Path = SHIPPED_CONFIG) -> str:
    """The experiment's name in the recipe: a grid's experiment is named <grid>.<values>.<column>, a name the grid
    itself makes in a clone, so its dots become dashes; a name config/config.yaml already has gets `-reproduced`
    (read over it, the shipped experiment's options would be merged into the recipe's)."""
    own = name.replace(".", "-")
    taken = (read_config(shipped).get(EXPERIMENT) or {}) if shipped.is_file() else {}
    return f"{own}-reproduced" if own in taken else own


def planned_runs(base: dict, recipe: dict, name: str) -> dict[str, dict[str, str]] | None:
    """{seed: {role: key}} of experiment `name` when `recipe` is read over `base` (the shipped config's raw YAML):
    every artifact its results file is built from; None where the config is refused."""
    raw = deep_merge(base, recipe)  # as the user's --configfile is read: a shipped experiment of that name under it
    raw["experiments"] = {name: raw["experiments"][name]}  # only the recipe's experiment: the other shipped ones
    raw.pop("grids", None)                                  # and the grids are not planned (faster, no clashes)
    try:
        spec = Plan(prepare_config(raw, lazy=True)).experiment_spec(name)
    except Exception:  # noqa: BLE001 -- refused for whatever reason (an option it cannot do without, data the
        return None     # planner cannot read): not the same keys
    return {seed: {role: run["key"] for role, run in roles.items()} for seed, roles in spec["runs"].items()}


def planned_key(base: dict, recipe: dict, name: str, seed: int, role: str) -> str | None:
    """The key the planner gives `role` of `seed` when `recipe` is read over `base`; None where it plans no such
    model or the config is refused."""
    return ((planned_runs(base, recipe, name) or {}).get(str(seed)) or {}).get(role)


def only_model(recipe: dict, name: str, role: str) -> dict:
    """`recipe` with its experiment's `models` cut to `role` (the exported model's)."""
    own = copy.deepcopy(recipe)
    own[EXPERIMENT][name]["models"] = [role]
    return own


def _paths(tree: dict, prefix: tuple = ()) -> list[tuple]:
    return [prefix + (key,) for key in tree]


def _without(tree: dict, path: tuple) -> dict:
    out = copy.deepcopy(tree)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


def _get(tree: dict, path: tuple):
    for key in path:
        tree = tree[key]
    return tree


def minimal(recipe: dict, name: str, same: Callable[[dict], bool]) -> dict:
    """`recipe` without every option of experiment `name` that `same` (the model's key is unchanged) lets go:
    a whole option dropped where it can be, else its own options tried one by one (lists are single options)."""
    kept = copy.deepcopy(recipe)
    todo = [path for path in _paths(kept[EXPERIMENT][name], (EXPERIMENT, name))
            if path[-1] not in KEEP or _get(kept, path) is None]  # `seeds: null`: the recipe's top-level seeds
    while todo:
        path = todo.pop(0)
        trial = _without(kept, path)
        if same(trial):
            kept = trial
        elif isinstance(_get(kept, path), dict):
            todo[:0] = _paths(_get(kept, path), path)
    return kept


def prune(recipe: dict, name: str, seed: int, role: str, key: str,
          shipped: Path = SHIPPED_CONFIG) -> tuple[dict, str | None]:
    """The recipe pruned to the options of what its results file builds (`models` cut to `role` where that plans
    `role` of `seed` the same key `key`), and None; or the recipe as it was and the reason it could not be pruned
    (the full recipe does not plan `key` here)."""
    if not shipped.is_file():
        return recipe, f"no {shipped} in the working directory to plan it with"
    base = read_config(shipped)
    got = planned_key(base, recipe, name, seed, role)
    if got != key:
        return recipe, (f"read over {shipped} here, the full config plans {got or 'no such model'}, not {key} (the "
                        "config or the data changed since the model was trained)")
    # what the recipe's command builds: the model alone where `models: [<role>]` plans it the same, else the
    # experiment's models; every key of the results file's artifacts must stay as planned
    own = only_model(recipe, name, role)
    runs = planned_runs(base, own, name)
    if ((runs or {}).get(str(seed)) or {}).get(role) != key:
        own, runs = recipe, planned_runs(base, recipe, name)
    pruned = minimal(own, name, lambda trial: planned_runs(base, trial, name) == runs)
    return pruned, None
