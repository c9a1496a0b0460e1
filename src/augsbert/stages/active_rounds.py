"""The `active_rounds` stage: what each round of active learning bought, one file per run (job:
augsbert.jobs.active_rounds).

It reads the metrics of every round's teacher, selection, labelled data and (where trained) student and writes
`rounds.json`: per round the gold labels its teacher learned, the teacher's and the student's test Spearman and
Pearson, and the chosen pairs' mean uncertainty and score distribution. Its results section is `active`
(collect-results keeps the file per seed), which the grid's curve table (augsbert.reporting.curves) reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..params import Params
from ..planning.graph import Node, SeedPlan
from .active_select import LABEL_ROLE, SELECT_ROLE, STUDENT_ROLE, TEACHER_ROLE
from .base import Stage
from .teacher import teacher_node

# its inputs, by round: the labelled data after round r (round 0: the gold subset), round r's teacher, the choice
# that made round r, round r's student
ROUND_INPUTS = {"labels": "labelled_{}", "teacher": "teacher_{}", "select": "select_{}", "student": "student_{}"}


@dataclass(frozen=True, kw_only=True)
class RoundsParams(Params):
    """Rounds 0 .. `last_round` of a run whose pairs were chosen by strategy `chosen_by` and labelled by annotator
    `labelled_by` (what the job reads does not depend on them: they are written into rounds.json)."""

    last_round: int
    chosen_by: str
    labelled_by: str


def plan_rounds(seed_plan: SeedPlan) -> dict[str, Node]:
    """After the experiment's teacher and student: one summary node of the run's rounds (role `active_rounds`)."""
    exp, roles = seed_plan.config, seed_plan.roles
    if not exp["active"]["rounds"]:
        return {}
    done = sum(1 for r in range(1, exp["active"]["rounds"] + 1) if LABEL_ROLE.format(r) in roles)
    first = roles[LABEL_ROLE.format(1)]
    inputs = {ROUND_INPUTS["labels"].format(0): roles[LABEL_ROLE.format(0)]}
    for r in range(done + 1):
        inputs[ROUND_INPUTS["teacher"].format(r)] = (roles[TEACHER_ROLE.format(r)] if r < done
                                                     else teacher_node(seed_plan)[0])
        if r:
            inputs[ROUND_INPUTS["labels"].format(r)] = roles[LABEL_ROLE.format(r)]
            inputs[ROUND_INPUTS["select"].format(r)] = roles[SELECT_ROLE.format(r)]
        student = roles.get(STUDENT_ROLE.format(r)) if r < done else roles.get("student")
        if student is not None:
            inputs[ROUND_INPUTS["student"].format(r)] = student
    active = exp["active"]
    params = {"last_round": done, "chosen_by": active["strategy"], "labelled_by": active["annotator"]}
    name = f"{first.name.rsplit('.r', 1)[0]}.rounds{done}"
    return {"active_rounds": seed_plan.graph.add(ACTIVE_ROUNDS, name, params, inputs)}


ACTIVE_ROUNDS = Stage("active_rounds", 1, "active learning: what each round bought (labels, teacher and student "
                      "test scores, the chosen pairs), one file per run", "augsbert.jobs.active_rounds:run",
                      section="active", roles=("active_rounds",), gpu=False, device=False, seconds_per_item=0.0001,
                      base_mem_mb=1000,
                      env="cpu", threads=1, cache=False, params=RoundsParams, plan=plan_rounds,
                      needs=("gold_subset", "teacher", "labels", "student"), items=lambda plan, node: 0,
                      statistics={"rounds.json": "active"}, holds=("rounds.json",), estimate="read")
STAGES = (ACTIVE_ROUNDS,)
