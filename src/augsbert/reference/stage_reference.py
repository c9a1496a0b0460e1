"""The stages reference page (docs/reference/stages.md), written from the stage registry.

Every registered stage (`augsbert.stages.REGISTRY`: the package's modules and any stage registered since) gets a
row and a section, read from its declaration (`augsbert.stages.base.Stage`): its summary, command, version, config
section, the roles it fills and reads, what its artifact holds, its runtime settings, whether it runs on a GPU and
its former names. The page is checked in, so the file a reader opens on GitHub is the one the site shows;
`tests/test_stage_reference.py` fails while it differs from what this module writes.

    python -m augsbert.reference.stage_reference --write   # or: make schema
    python -m augsbert.reference.stage_reference --check   # exit 1 when the checked-in page is stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..stages import REGISTRY, planning_order
from ..stages.base import Stage
from ..store.manifests import HOLDS
from .schema import check_mode, check_or_write

PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "stages.md"
REGENERATE = "python -m augsbert.reference.stage_reference --write"

HEADER = f"""# Stages

<!-- Generated from the stage registry (augsbert.stages) by `{REGENERATE}` (run by `make schema`); do not edit.
     Change a stage's declaration in src/augsbert/stages/<module>.py instead. -->

Written from the stage registry (`augsbert.stages`, one declaration per stage in `src/augsbert/stages/`) by
`make schema`; `tests/test_stage_reference.py` fails while this page differs from the registry. A stage added
to the registry (a new module, or a plugin's `register()`) appears here when the page is written again.

A stage's name is its plan key, its Snakemake rule, its command (`augsbert <name>`, `_` written `-`)
and its artifact and log folders (`artifacts/<name>/<key>/`, `logs/<name>/`). All of them come from
one declaration per stage in `src/augsbert/stages/<module>.py` (version, runtime settings, roles,
job sizes, rule settings, entry point), beside the stage's planning: the rules are generated from the
registry (`workflow/rules/stages.smk`), as are the commands; `tests/test_stages.py` checks that every
stage has its command, entry point, sizes and config section. A stage's options are those of its config
section (`defaults.<section>`, or an experiment's own), each key of which `augsbert config-reference` prints
(the site's [configuration reference](configuration.md)). What the methods compute is in the Methods
pages ([GPL, hard negatives, retrieval](../methods/gpl.md), [few labels, ensembles,
Trans-Encoder](../methods/teachers.md), ...).

Planning is lazy: a target plans only its own experiments (a dry run of `results/bws_cbe.json`
reads no other dataset and imports no reader it does not use); a job started by key plans every
experiment once to find it. An experiment is planned by calling each stage's planning hook in the order
below (each after the stages that fill a role it reads); a stage without a hook of its own (a shard, an
ensemble, GPL's queries and margins) is planned by the hook of the stage that reads it.
"""

FORMER = """
A former command name runs the same command; a `--set-resources` / `--set-threads` (or profile
`set-resources:`) given for a former rule name still applies, with a warning. The rename retrains
nothing: artifact keys and paths are unchanged, and the workflow profile reruns a job on changed
inputs, params (its key) or software, not on its rule's command text nor on input paths (`rerun-triggers`; a stage's code
enters its keys through the stage's `version`). `snakemake --cache` entries stored before the
rename are keyed by the old command text and are not found again (the cache is also keyed by the
Snakemake version, so an upgrade has the same effect).
"""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _codes(names) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _doc(function) -> str:
    """The first paragraph of a declared function's docstring (what a callable of the declaration decides)."""
    doc = (getattr(function, "__doc__", None) or "").strip().split("\n\n")[0]
    return " ".join(doc.split())


def _gpu(stage: Stage) -> str:
    if stage.uses_gpu is not None:  # a node's options decide (candidates: a strategy that encodes)
        return "depends on its options (`uses_gpu`)"
    if stage.fixed_resources:
        return "yes" if stage.fixed_resources.get("gpu") else "no"
    return ("yes" + (", several (`gpus`)" if stage.data_parallel else "")) if stage.gpu else "no"


def _fillers(role: str) -> list[str]:
    return [s.name for s in REGISTRY.values() if role in s.roles]


def _reads(stage: Stage) -> str:
    out = []
    for role in stage.needs:
        others = [n for n in _fillers(role) if n != stage.name]
        note = f" ({', '.join(others)})" if others and others != [role] else ""
        out.append(f"`{role}`{note}")
    return ", ".join(out)


def _summary_table() -> str:
    rows = ["| stage | what it does | config section | fills roles | GPU |", "| --- | --- | --- | --- | --- |"]
    for s in REGISTRY.values():
        rows.append(f"| [`{s.name}`](#{s.name}) | {_cell(s.summary)} | "
                    f"{'`' + s.section + '`' if s.section else ''} | {_codes(s.roles)} | {_gpu(s)} |")
    return "\n".join(rows) + "\n"


def _former_table() -> str:
    renamed = [s for s in REGISTRY.values() if s.aliases or s.rule_alias]
    if not renamed:
        return ""
    rows = ["| stage | former command | former rule |", "| --- | --- | --- |"]
    for s in renamed:
        rows.append(f"| `{s.name}` | {_codes(s.aliases)} | {'`' + s.rule_alias + '`' if s.rule_alias else ''} |")
    return ("\n## Former names\n\nAccepted until the next release (`aliases` and `rule_alias` of the "
            "declaration).\n\n" + "\n".join(rows) + "\n" + FORMER)


def _module(stage: Stage) -> str:
    for owner in (stage.params, stage.plan):
        module = getattr(owner, "__module__", "") or ""
        if module.startswith("augsbert.stages."):
            return "src/" + module.replace(".", "/") + ".py"
    return ""


def _section(stage: Stage) -> str:
    lines = [f"\n### {stage.name}\n", f"{_cell(stage.summary)}.\n" if not stage.summary.endswith(".")
             else f"{_cell(stage.summary)}\n"]
    facts = []
    command = f"`augsbert {stage.command}`"
    if stage.aliases:
        command += f" (formerly {_codes(stage.aliases)})"
    facts.append(f"command: {command}; rule `{stage.name}`; version {stage.version} (in every key of its artifacts)")
    declared = _module(stage)
    if declared:
        where = f"declared in `{declared}`"
        if stage.params is not None:
            where += f", params `{stage.params.__name__}`"
        facts.append(where)
    if stage.section:
        facts.append(f"config section: `{stage.section}`")
    if stage.roles:
        facts.append(f"fills roles: {_codes(stage.roles)}")
    if stage.needs:
        facts.append(f"reads roles (planned after the stages that fill them): {_reads(stage)}")
    facts.append("planning: " + ("its own hook" if stage.plan is not None else
                                 "no hook of its own (planned by the stage that reads it)"))
    holds = list(dict.fromkeys((*HOLDS, *stage.holds)))
    facts.append(f"artifact: `artifacts/{stage.name}/<key>/`; each holds {_codes(holds)} (checked by "
                 "`augsbert verify`)")
    if stage.runtime:
        facts.append(f"runtime settings (passed to the job, never in its key): {_codes(stage.runtime)}")
    if stage.raw_inputs is not None:
        facts.append("raw files: the files its config names enter its key by content (`raw_inputs`)")
    if stage.hub_datasets is not None:
        what = _doc(stage.hub_datasets).rstrip(".")
        facts.append("hub datasets its job downloads (`augsbert fetch` fetches them ahead)"
                     + (f": {what[:1].lower()}{what[1:]}" if what else ""))
    rule = [f"environment `workflow/envs/{stage.env}.yaml`", f"{stage.threads} thread{'s' * (stage.threads != 1)}"]
    if stage.group:
        rule.append(f"job group `{stage.group}`")
    rule.append("shareable with `snakemake --cache`" if stage.cache else "not cached between checkouts")
    facts.append(f"GPU: {_gpu(stage)}; " + ", ".join(rule))
    if stage.fixed_resources:
        facts.append("fixed resources: " + ", ".join(f"{k} {v}" for k, v in stage.fixed_resources.items()))
    for role, row in stage.rows.items():
        title = row.title.replace("{arch}", "<the architecture>") or "the grid's `student_title`"
        facts.append(f"table row `{role}` (place {row.place}): {_cell(title)}: {_cell(row.description)}")
    for file, name in stage.figures.items():
        facts.append(f"figure `{file}`: `{name}` in an experiment's report")
    for file, name in stage.statistics.items():
        facts.append(f"statistics `{file}`: section `{name}` of the results file")
    facts.append(f"entry point: `{stage.runner}`")
    lines.extend(f"- {fact}" for fact in facts)
    return "\n".join(lines) + "\n"


def render() -> str:
    """The page, from the registry as it stands (the package's stages and any registered since)."""
    order = [s.name for s in planning_order()]
    out = [HEADER, "\n## The stages\n\n", _summary_table(),
           f"\nPlanning order (stages with a hook): {' → '.join(order)}.\n", _former_table(),
           "\n## Each stage\n"]
    out.extend(_section(s) for s in REGISTRY.values())
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    check = check_mode(argv, "python -m augsbert.reference.stage_reference", __doc__, "docs/reference/stages.md")
    text = PAGE.read_text(encoding="utf-8") if PAGE.exists() else None
    if not check and not PAGE.parent.is_dir():
        print(f"{PAGE.parent}: no docs/reference folder (a source checkout writes the page)", file=sys.stderr)
        return 1
    return check_or_write(PAGE, render(), text, check, "page", REGENERATE)


if __name__ == "__main__":
    sys.exit(main())
