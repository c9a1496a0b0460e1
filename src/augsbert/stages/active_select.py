"""Active learning (`active.rounds` > 0; docs/methods/active.md): which pairs a person labels next, in rounds that
are static nodes of the plan. This module holds the `active` section, the `active_select` stage (job:
augsbert.jobs.active_select) and the hook that plans every round; `active_label` and `active_rounds` are the
labelling and the summary stages.

Round 0 is the `gold_fraction` subset (`gold_subset`). Round r's teacher (a `teacher` node, or with
`teacher.ensemble` the ensemble: the committee) learns the gold of rounds 0..r; the `active_select` node scores the
pairs still unlabelled with it and chooses `active.batch` of them by `active.strategy` (augsbert.sampling.active);
the `active_label` node obtains their labels (`oracle`: the dataset's own scores of exactly those pairs; `file`: a
person's, through annotate/<experiment>/round_<r>.csv) and writes the gold of rounds 0..r+1 in a data artifact's
layout. The last round's labelled data is the run's `gold_subset` (this stage refines the role), so the
experiment's teacher, lower bound, candidates, labels and student learn it as they learn any gold subset; with
`active.students: every_round` each earlier round's teacher labels pairs for a student of its own too.

Roles per seed: `active_teacher_<r>` for r < rounds (the last round's teacher is the experiment's own),
`active_member_<r>_<k>` (its ensemble members), `active_teacher_untrained` (and `active_member_untrained_<k>`: the
teacher with no training step, `max_steps: 0`, the curve's 0-label point, shared by every strategy of the same
teacher settings), `active_select_<r>` for r = 1..rounds, `active_label_<r>` for r = 0..rounds (round 0: the gold
subset), `active_student_<r>` (every_round), and `gold_subset` = the last `active_label_<r>`. With `annotator: file`
the rounds stop at the first whose file is not there yet: its labelling job writes the file and stops the run.

Planning warns (one line per experiment, not an error) when round 0's teacher would train fewer than
`MIN_ROUND_STEPS` steps: such a teacher has barely moved from its start, so a strategy's pairs cannot show through
it (docs/methods/active.md "How the rounds run").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from ..config.rehearsal import is_on as rehearsing
from ..errors import ConfigError, DataError
from ..params import Params, option
from ..planning.graph import Graph, Node, SeedPlan
from .active_label import ACTIVE_LABEL, label_params
from .base import Stage
from .candidates import plan_candidates
from .labels import plan_labels
from .runs import source, transfer
from .sizes import data_sizes, labelled_pairs
from .student import plan_student
from .teacher import teacher_node
from .teacher_ensemble import member_config, member_inputs

Strategy = Literal["random", "committee", "mc_dropout", "diverse", "kde"]
TEACHER_ROLE = "active_teacher_{}"
MEMBER_ROLE = "active_member_{}_{}"
SELECT_ROLE = "active_select_{}"
LABEL_ROLE = "active_label_{}"
STUDENT_ROLE = "active_student_{}"
UNTRAINED_ROLE = "active_teacher_untrained"
UNTRAINED_MEMBER_ROLE = "active_member_untrained_{}"
# Fewer steps than this for a round's teacher: a planning warning. On STS-B (issue 65's check: all-MiniLM-L6-v2 CBE,
# batch 16) every run passed through a trough below the untrained model's test Spearman near steps 36-54 and was
# well out of it by 300 steps; 100 is twice the trough's end, so a teacher of fewer steps may still be in it.
MIN_ROUND_STEPS = 100


@dataclass(frozen=True, kw_only=True)
class ActiveOptions(Params):
    """The `active` section (its schema section is written from here: augsbert.reference.schema)."""

    SECTION = "active"
    SECTION_DESCRIPTION = """
        Active learning (docs/methods/active.md): in rounds, the teacher trained on the labels so far scores the
        pairs still unlabelled, a strategy chooses the next `batch` of them, an annotator labels them, and the
        next round's teacher learns all labels so far. Round 0 is the `gold_fraction` subset, so
        `gold_fraction` must be below 1. The AugSBERT chain (candidates, labels, student) runs from the last
        round's teacher (and every round's with `students: every_round`); the results' `active` section and the
        grid's curve table say what each label bought."""

    rounds: int = option(0, """
        Rounds of choosing and labelling after round 0 (the gold_fraction subset). 0 = off: nothing is planned
        (keys unchanged).""", minimum=0)
    batch: float = option(0.05, """
        Pairs labelled per round, as a fraction of the dataset's gold train pairs (as `gold_fraction` is):
        round(batch x n), at least 1 (STS-B: 0.05 = 287 pairs). `gold_fraction + rounds x batch` must not exceed
        1.""", exclusiveMinimum=0, maximum=1)
    strategy: Strategy = option("random", """
        Which unlabelled pairs to label next: `random` (a seeded uniform draw, the baseline), `committee` (the
        standard deviation of the `teacher.ensemble` members' z-scored scores; query by committee), `mc_dropout`
        (the variance of one teacher's scores over `passes` dropout passes), `diverse` (the `candidate_factor` x
        batch most uncertain pairs by the committee, else MC dropout, clustered by k-means on a pair embedding,
        one pair per cluster in turn) or `kde` (pairs whose teacher score lies where the labelled scores'
        density is lowest). Each picks the top pairs by its statistic; ties go to the pair first in the pool.""")
    annotator: Literal["oracle", "file"] = option("oracle", """
        Who labels the chosen pairs: `oracle` (a simulation: the dataset's own gold scores of exactly those pairs,
        withheld until then) or `file` (a person: the round's pairs are written to
        annotate/<experiment>/round_<r>.csv, the run stops, and the next run reads the filled file; one seed
        only).""")
    students: Literal["last", "every_round"] = option("last", """
        `last`: the AugSBERT chain (candidates, labels, student) runs from the last round's teacher only;
        `every_round`: from every round's teacher, so the curve has a student's score per round.""")
    passes: int = option(10, """
        `mc_dropout` (and `diverse` without a committee): dropout passes T per pair.""", minimum=2)
    candidate_factor: int = option(5, """
        `diverse`: the most uncertain candidate_factor x batch pairs are clustered.""", minimum=1)
    clusters: int | None = option(None, """
        `diverse`: k-means clusters over the candidates; null = the batch size (one pair per cluster).""",
                                  minimum=1)
    max_pool: int | None = option(None, """
        Score at most this many unlabelled pairs per round (a seeded draw, numpy PCG64 with [seed, round]; for
        a CPU); the strategies that score choose among them, `random` draws from all. null = all.""", minimum=1)
    test_pairs: int | None = option(None, """
        Score at most this many test pairs with each round's teacher but the last (a seeded draw, numpy PCG64
        seeded with 0: the same pairs for every round, strategy and seed); the last round's teacher (the
        experiment's own), the untrained teacher and the all-gold ceiling are always scored on the whole test
        split, and the curve table marks the figures of the subset. For a CPU: each round's teacher scoring a
        test split of thousands of pairs is a large share of a round's time. null = the whole test split (keys
        unchanged).""", minimum=2)
    scale: list[float] = option([0, 1], """
        `annotator: file`: the range a person scores on ([min, max]: STS-B's 0 to 5 is [0, 5]); the scores are
        rescaled to the data's 0-1, as a dataset's `score_range` is.""", items={"type": "number"}, minItems=2,
                                maxItems=2)
    batch_size: int = option(64, "Scoring batch size (not part of any key).", minimum=1)


@dataclass(frozen=True, kw_only=True)
class SelectParams(ActiveOptions):
    """A selection: round `round` of run `seed` chooses batch x (the dataset's gold train pairs) of its `pool`'s
    unlabelled pairs by `strategy`, scoring them with its `teacher` input (and its `member_<k>` inputs); `diverse`
    embeds its candidates with `model` (the experiment's base model) at `max_length` tokens and ranks them by
    `uncertainty`. Of the section a spec holds what its strategy reads."""

    round: int
    seed: int
    # written for `diverse` only: `committee` with ensemble members, else `mc_dropout` (one teacher's passes)
    uncertainty: Literal["committee", "mc_dropout"] = "mc_dropout"
    model: str | None = None
    max_length: int | None = None
    model_identity: dict[str, str] = field(default_factory=dict)
    hub_revisions: dict[str, str] = field(default_factory=dict)


def select_items(plan, node) -> int:
    """Pairs a selection scores: the pool's unlabelled pairs (at most max_pool), times its passes or members."""
    inputs = dict(node.inputs)
    if node.params["strategy"] == "random":
        return 0
    pool = plan.nodes[inputs["pool"]]
    left = max(0, labelled_pairs(plan, pool, total=True) - data_sizes(pool, plan)["train"])
    scored = min(left, node.params.get("max_pool") or left)
    members = sum(1 for role in inputs if role.startswith("member_"))
    return scored * (node.params.get("passes") or 1) * max(1, members)


ACTIVE_SELECT = Stage("active_select", 1, "active learning: score the still-unlabelled pairs with a round's teacher "
                      "and choose the next batch to label (active.strategy)", "augsbert.jobs.active_select:run",
                      section="active", runtime=("batch_size", "model"), roles=("gold_subset", "active_select_1"),
                      seconds_per_item=0.004, base_mem_mb=8000, mb_per_item=0.002, model_input="teacher",
                      params=SelectParams, plan=lambda seed_plan: plan_active(seed_plan),
                      needs=("data", "gold_subset", "pretrained"),
                      check=lambda graph, name, exp: check_active(graph, name, exp), items=select_items,
                      holds=("chosen.parquet", "scored.parquet"), estimate="score")
STAGES = (ACTIVE_SELECT,)


def check_active(graph: Graph, name: str, exp: dict) -> None:
    """What active learning needs of the rest of the experiment, checked once before anything is planned."""
    active = exp["active"]
    if not active["rounds"]:
        return
    where = f"experiments.{name}.active"
    if exp["gold_fraction"] >= 1:
        raise ConfigError(f"{where}.rounds: {active['rounds']} rounds of active learning start from a gold_fraction "
                          "subset (round 0's labels), but gold_fraction is 1; set it below 1 (e.g. 0.05)")
    total = exp["gold_fraction"] + active["rounds"] * active["batch"]
    if total > 1 + 1e-9:
        raise ConfigError(f"{where}.batch: gold_fraction {exp['gold_fraction']:g} + {active['rounds']} rounds x batch "
                          f"{active['batch']:g} = {total:g} of the gold train pairs, more than there are; lower "
                          "active.rounds or active.batch")
    if transfer(exp):
        raise ConfigError(f"{where}: active learning labels pairs of the dataset's own train split; it does not "
                          "run with `source` (domain transfer)")
    if exp["adapt"]["variant"] != "augsbert":
        raise ConfigError(f"{where}: the rounds' teachers start from base_model; MLM adaptation (adapt.variant "
                          f"{exp['adapt']['variant']}) does not run with active learning")
    if exp["topic_prompt"] != "none":
        raise ConfigError(f"{where}: topic prompts (topic_prompt {exp['topic_prompt']}) do not run with active "
                          "learning")
    if not {"teacher", "student"} & set(exp["models"]):
        raise ConfigError(f"{where}.rounds: models lists neither teacher nor student; active learning trains a "
                          "teacher per round")
    ensemble = bool(exp["teacher"]["ensemble"])
    if active["strategy"] == "committee" and not ensemble:
        raise ConfigError(f"{where}.strategy: committee: the committee is teacher.ensemble, which is empty; give it "
                          "at least two members (e.g. [{}, {seed: 1}, {seed: 2}])")
    if active["strategy"] == "mc_dropout" and ensemble:
        raise ConfigError(f"{where}.strategy: mc_dropout scores with one teacher's dropout, but teacher.ensemble "
                          "is set; use committee (its members' spread) or leave the ensemble empty")
    if active["annotator"] == "file" and len(exp["seeds"] or graph.config["seeds"]) > 1:
        raise ConfigError(f"{where}.annotator: file: a person labels one sequence of rounds; give the experiment "
                          "one seed (seeds: [42])")
    low, high = active["scale"]
    if not low < high:
        raise ConfigError(f"{where}.scale: [{low:g}, {high:g}] is empty; give [min, max] with min < max")


def select_node(graph: Graph, exp: dict, seed: int, round_: int, pool: Node, teacher: Node,
                members: list[Node]) -> Node:
    """Round `round_`'s choice among `pool`'s unlabelled pairs, scored with `teacher` (and `members`)."""
    active, strategy = exp["active"], exp["active"]["strategy"]
    params = {"strategy": strategy, "batch": active["batch"], "round": round_, "seed": seed,
              "batch_size": active["batch_size"]}
    inputs = {"pool": pool}
    if strategy != "random":  # a uniform draw reads no teacher: its choice does not change with the teacher's
        inputs.update(teacher=teacher, **member_inputs(members))
        if active["max_pool"] is not None:
            params["max_pool"] = active["max_pool"]
    uncertainty = "committee" if members else "mc_dropout"
    if strategy == "mc_dropout" or (strategy == "diverse" and uncertainty == "mc_dropout"):
        params["passes"] = active["passes"]
    if strategy == "diverse":
        params.update(uncertainty=uncertainty, candidate_factor=active["candidate_factor"], model=exp["base_model"],
                      max_length=exp["student"]["max_length"])
        if active["clusters"] is not None:
            params["clusters"] = active["clusters"]
    return graph.add(ACTIVE_SELECT, f"{source(exp)}.{strategy}.r{round_}", params, inputs)


def round_students(round_plan: SeedPlan, round_: int) -> dict[str, Node]:
    """`students: every_round`: round `round_`'s AugSBERT chain (candidates, labels, student) from its teacher, as
    the experiment's own chain is planned from the last round's."""
    roles = dict(round_plan.roles)
    for hook in (plan_candidates, plan_labels, plan_student):
        roles.update(hook(SeedPlan(round_plan.graph, round_plan.experiment, round_plan.config, round_plan.seed,
                                   roles)))
    return {STUDENT_ROLE.format(round_): roles["student"]} if "student" in roles else {}


def with_teacher(exp: dict, **options) -> dict:
    """`exp` with `options` written into its teacher section (and so into every ensemble member's)."""
    return {**exp, "teacher": {**exp["teacher"], **options}}


def round_steps(exp: dict, pairs: int) -> int:
    """Optimizer steps a teacher of `exp` takes on `pairs` gold pairs (the fewest of an ensemble's members): its
    `max_steps`, else epochs x ceil(pairs learned, both orders with `symmetric`, a member's `bag` share / batch)."""
    sections = [member_config(exp, m)["teacher"] for m in exp["teacher"]["ensemble"]] or [exp["teacher"]]

    def steps(teacher: dict) -> int:
        if teacher.get("max_steps") is not None:
            return int(teacher["max_steps"])
        learned = max(2, round((teacher.get("bag") or 1) * pairs)) if teacher.get("bag") else pairs
        return int(teacher["epochs"]) * math.ceil(learned * (2 if teacher["symmetric"] else 1) / teacher["batch_size"])

    return min(steps(t) for t in sections)


def untrained_teacher(seed_plan: SeedPlan, subset: Node) -> dict[str, Node]:
    """The teacher with no training step (`max_steps: 0`: the base model as it is) of this experiment's teacher
    settings, tested on the whole test split: the curve's 0-label point (its `data` is round 0's gold, which it
    does not learn; every strategy of the same settings and round 0 shares it)."""
    exp = with_teacher(seed_plan.config, max_steps=0)
    plan = SeedPlan(seed_plan.graph, seed_plan.experiment, exp, seed_plan.seed,
                    {**seed_plan.roles, "gold_subset": subset})
    teacher, members = teacher_node(plan)
    return {UNTRAINED_ROLE: teacher, **{UNTRAINED_MEMBER_ROLE.format(k): m for k, m in enumerate(members)}}


def warn_few_steps(seed_plan: SeedPlan, subset: Node) -> None:
    """One planning line (not an error) for an experiment whose round-0 teacher trains fewer than MIN_ROUND_STEPS
    steps (round 0 has the fewest labels: with `epochs` every later round trains more)."""
    exp, graph = seed_plan.config, seed_plan.graph
    if rehearsing(graph.config):  # a rehearsal cuts every job's steps on purpose: the warning would be noise
        return
    pairs = data_sizes(subset, graph)["train"]
    steps = round_steps(exp, pairs)
    if steps >= MIN_ROUND_STEPS:
        return
    teacher = exp["teacher"]
    how = ("teacher.max_steps" if teacher.get("max_steps") is not None else
           f"{teacher['epochs']} epoch(s) of {pairs:,} pairs{', both orders,' if teacher['symmetric'] else ''} at "
           f"batch {teacher['batch_size']}")
    graph.warn(seed_plan.experiment, f"experiments.{seed_plan.experiment}: active round 0's teacher trains {steps} "
               f"steps ({how}), fewer than {MIN_ROUND_STEPS}: a teacher that has barely moved from its start cannot "
               "show what a strategy's pairs are worth (docs/methods/active.md, How the rounds run); give every "
               "round's teacher the same step budget, e.g. teacher: {max_steps: 300, selection: last}")


def plan_active(seed_plan: SeedPlan) -> dict[str, Node]:
    """Every round's teacher, selection and labelling, and the untrained teacher; the last round's labelled data
    becomes the run's `gold_subset`. With `annotator: file` the rounds end at the first whose file is not there
    yet. With `active.test_pairs` the rounds' teachers (not the last, the experiment's own) score that many test
    pairs."""
    exp = seed_plan.config
    active = exp["active"]
    if not active["rounds"]:
        return {}
    graph, roles, seed = seed_plan.graph, seed_plan.roles, seed_plan.seed
    subset = roles["gold_subset"]
    data = graph.nodes[dict(subset.inputs)["data"]]
    warn_few_steps(seed_plan, subset)
    pool, planned = subset, {LABEL_ROLE.format(0): subset, **untrained_teacher(seed_plan, subset)}
    rounds_exp = exp if active["test_pairs"] is None else with_teacher(exp, test_pairs=active["test_pairs"])
    for r in range(active["rounds"]):
        round_plan = SeedPlan(graph, seed_plan.experiment, rounds_exp, seed, {**roles, "gold_subset": pool})
        teacher, members = teacher_node(round_plan)
        planned[TEACHER_ROLE.format(r)] = teacher
        planned.update({MEMBER_ROLE.format(r, k): m for k, m in enumerate(members)})
        if active["students"] == "every_round":
            planned.update(round_students(round_plan, r))
        select = planned[SELECT_ROLE.format(r + 1)] = select_node(graph, exp, seed, r + 1, pool, teacher, members)
        try:
            params = label_params(seed_plan.experiment, exp, r + 1, subset)
        except DataError as err:  # a filled annotation file with a bad row: the plan stops with its line
            raise ConfigError(str(err)) from None
        pool = planned[LABEL_ROLE.format(r + 1)] = graph.add(
            ACTIVE_LABEL, f"{source(exp)}.{active['strategy']}.r{r + 1}", params,
            {"pool": pool, "selection": select, **({"gold": data} if active["annotator"] == "oracle" else {})})
        if active["annotator"] == "file" and params["annotations"] is None and not graph.every_round:
            break  # a person labels this round first: later rounds depend on their labels
    planned["gold_subset"] = pool
    return planned

