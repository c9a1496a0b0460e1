"""The `teacher_ensemble` stage: several teachers' scores combined per pair (`teacher.ensemble`; job:
augsbert.jobs.teacher_ensemble).

Each member is an ordinary `teacher` node, planned from the experiment's teacher section with the member's
options written over it, so a member equal to the single teacher is that teacher's artifact and adding a
member plans one teacher. The ensemble node records how the members combine (`teacher.combine`) and the
statistics the z-score combination needs; it is the experiment's `teacher` (its test score the teacher row)
and the labelling stage scores pairs with its members through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError
from ..planning.graph import Graph, Node
from ..params import Params
from .base import Stage


@dataclass(frozen=True, kw_only=True)
class EnsembleParams(Params):
    """How the members' scores combine, and the batch size the members score the gold train pairs with."""

    combine: Literal["mean", "zscore"]
    members: int
    eval_batch_size: int = 64


TEACHER_ENSEMBLE = Stage("teacher_ensemble", 1, "combine the scores of several teachers (teacher.ensemble): the "
                         "ensemble's test score and the statistics labelling combines with",
                         "augsbert.jobs.teacher_ensemble:run", section="teacher", runtime=("eval_batch_size",),
                         roles=("teacher",), seconds_per_item=0.004, base_mem_mb=8000, mb_per_item=0.002,
                         params=EnsembleParams, row_arch=lambda plan, node: ensemble_title(plan, node))
STAGES = (TEACHER_ENSEMBLE,)


def ensemble_title(plan, node) -> str:
    """What a row title says of an ensemble teacher: its members' architectures and how they combine."""
    archs = "+".join(plan.nodes[k].params["arch"].upper() for r, k in node.inputs if r.startswith("member_"))
    return f"Ensemble {archs} ({node.params['combine']})"

MEMBER_ROLE = "teacher_member_{}"  # the members' roles in an experiment's runs (and results)
MEMBER_INPUT = "member_{}"  # their input roles in the ensemble and labelling nodes


def member_seed(seed: int, k: int) -> int:
    """A member's training seed: the run's for k = 0, else run seed x 1000 + k (never another run's seed)."""
    return seed if k == 0 else seed * 1000 + k


def member_config(exp: dict, member: dict) -> dict:
    """The experiment config a member's teacher node is planned from: its options over the teacher section."""
    section = {k: v for k, v in exp["teacher"].items() if k not in ("ensemble", "combine")}
    section.update({k: v for k, v in member.items() if k != "seed" and v is not None})  # null: the section's
    return {**exp, "teacher": section}


def check_members(name: str, members: list[Node]) -> None:
    if len(members) < 2:
        raise ConfigError(f"experiments.{name}.teacher.ensemble: an ensemble needs at least two members "
                          f"(got {len(members)}); for one teacher leave `ensemble` empty")
    seen: dict[str, int] = {}
    for k, node in enumerate(members):
        if node.key in seen:
            raise ConfigError(f"experiments.{name}.teacher.ensemble: members {seen[node.key]} and {k} are the same "
                              "teacher (same options and seed); give one a different `seed` or option")
        seen[node.key] = k


def member_inputs(members: list[Node]) -> dict[str, Node]:
    return {MEMBER_INPUT.format(k): node for k, node in enumerate(members)}


def teacher_ensemble(graph: Graph, exp: dict, dataset: str, members: list[Node], trained_on: dict[str, Node]) -> Node:
    """The ensemble node over `members`; `trained_on` is the teachers' gold (`data`) and test split (`eval`)."""
    params = {"combine": exp["teacher"]["combine"], "members": len(members),
              "eval_batch_size": exp["teacher"]["eval_batch_size"]}
    return graph.add(TEACHER_ENSEMBLE, f"{dataset}.ensemble{len(members)}", params,
                     {**trained_on, **member_inputs(members)})
