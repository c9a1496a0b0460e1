"""Command line: `augsbert <stage>` runs one stage on its own; `augsbert plan` shows the plan; `augsbert list`
the experiments, grids and datasets.

Inside the workflow every stage receives its planned node as `--spec` (JSON).
Standalone, give `--config FILE --experiment NAME` instead: the stage's node
is planned from that config and written to its usual artifact path.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import logging
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from .. import __version__
from ..config import reference
from ..config.load import load_configs
from ..config.names import check_name
from ..config.renames import SAID as RENAMES_SAID
from ..config.yaml_files import CONFIG_SUFFIXES, config_needs, is_target
from ..errors import ConfigError, DataError, LabellingStop
from ..export.backends import BackendError
from ..export.export import ExportError
from .export_command import add_command as add_export_command
from ..models.fetch import fetch
from ..reporting.listing import KINDS, render_list, render_plan
from ..models import ModelResolutionError
from ..models.device import REQUESTED_ENV, check_device_name, pin_one_gpu
from ..plan import Plan
from ..reporting.curves import curve_spec
from ..reporting.frontier import frontier_spec
from ..reporting.layout import grid_spec
from ..scheduling import progress
from ..scheduling.gpus import GpuInventoryError, claim_for_job
from ..scheduling.snakemake_console import run_snakemake
from ..scheduling.stops import CONTINUE_ENV, EXIT_LABELLING, STOP_MARK, run_command
from ..run.warm import SOCKET_ENV, run as run_warm
from ..stages import REGISTRY
from ..stages.base import Stage
from ..store.artifacts import (
    ArtifactExistsError,
    ArtifactLockedError,
    DamagedArtifactError,
    LockUnsupportedError,
    OutputWriteError,
    check_artifact,
    finished_as_planned,
    checkpoint_dir,
    replaceable,
    writer_lock,
    writing,
)
from ..planning.graph import KEY_PATTERN, PLAN_WARNINGS_SAID
from ..jobs.job_inputs import recheck
from ..store.keys import is_key
from ..store.live_runs import clear_stale_locks
from ..store.verify import verify as verify_artifacts
from ..jobs.specs import check_aggregate_spec, check_stage_spec, load_spec
from ..training import distributed
from ..training.tracking import begin

log = logging.getLogger("augsbert")
# every command's --config: the files merged over the shipped config as Snakemake's --configfile does
CONFIG_HELP = ("config YAML file(s), merged in order over config/config.yaml of the current directory, as "
               "Snakemake's --configfile (default: config/config.yaml alone)")


def _planned_spec(args, stage: str) -> tuple[dict, str]:
    """The node of `stage` for the experiment's --role and --seed, planned from --config."""
    plan = Plan(load_configs(args.config, lazy=True))
    exp = plan.experiment(args.experiment)
    seed = args.seed if args.seed is not None else exp.seeds[0]
    if seed not in exp.runs:
        raise SystemExit(f"experiment '{args.experiment}' has no seed {seed} (seeds: {exp.seeds})")
    roles = {role: key for role, key in exp.runs[seed].items() if plan.nodes[key].stage == stage}
    wanted = [args.role] if args.role else list(REGISTRY[stage].roles)
    role = next((r for r in wanted if r in roles), None)
    if role is None:
        raise SystemExit(f"experiment '{args.experiment}' plans no {stage} stage for role(s) {wanted} "
                         f"(it has: {', '.join(roles) or 'none'})")
    return plan.spec(roles[role]), plan.nodes[roles[role]].path


def _stage_command(sub, stage: Stage) -> None:
    """`augsbert <stage>` (the stage's name, hyphenated), with its former names as aliases for one release."""
    p = sub.add_parser(stage.command, aliases=list(stage.aliases), help=stage.summary, description=stage.summary)
    name = stage.command
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--spec", help="planned node as JSON, or @file.json (what the workflow passes)")
    src.add_argument("--config", nargs="+", action="extend", metavar="FILE", help=CONFIG_HELP + " (standalone use; "
                     "needs --experiment)")
    p.add_argument("--experiment", help="experiment whose node to run (with --config)")
    p.add_argument("--role", help="with --config: which of the experiment's models (e.g. lower_bound or student)")
    p.add_argument("--seed", type=int, help="with --config: which seed's node (default: the first seed)")
    p.add_argument("--out", help="artifact directory to write (default with --config: its planned path)")
    p.add_argument("--force", action="store_true", help="replace an existing finished artifact")
    p.add_argument("--wait-lock", type=float, default=0, metavar="SECONDS",
                   help="if another process is writing the same artifact, wait this long for it (default: stop at "
                        "once, naming that process)")
    if stage.device:
        p.add_argument("--device", help="torch device (auto|cpu|cuda|cuda:N|mps); default $AUGSBERT_DEVICE or auto")

    def handler(args) -> None:
        if stage.device and args.device:
            check_device_name(os.environ.get(REQUESTED_ENV) or args.device, "--device")
        if args.spec:
            spec, default_out = load_spec(args.spec), None
            check_stage_spec(spec, stage.name, f"--spec {args.spec}" if args.spec.startswith("@") else "--spec")
        else:
            if not args.experiment:
                p.error(config_needs("--experiment", args.config))
            spec, default_out = _planned_spec(args, stage.name)
        out = args.out or default_out
        if not out:
            p.error("--out is required with --spec")
        check_out_key(spec, out, stage.name, "--spec" if args.spec else "--config")
        args.interrupted_out = out  # named by the line a Ctrl-C ends with (interrupted_line)
        if not args.force and _finished_already(stage, spec, out):
            return
        if Path(out).exists() or Path(out).is_symlink():  # before any input is read (artifact_dir checks again)
            replaceable(Path(out), spec, args.force)
        check_inputs(spec)
        if _content_key(spec):  # a planned job: its raw files and models are still those its key names
            recheck(spec, out=out)
        kwargs = {"device": args.device} if stage.device else {}
        runner = stage.load_runner()  # imported here: `augsbert --help` loads no model library
        if distributed.run_data_parallel(name, spec, out, runner, kwargs, device=getattr(args, "device", None),
                                         force=args.force, wait_lock=args.wait_lock, argv=args.argv):
            return  # a further rank of a distributed run: done
            return
        begin(spec)  # names the tracker run of this stage (`tracking`; nothing when it is none)
        # One writer per artifact for the whole job: taken before the runner reads an input or touches the
        # checkpoints or a partial directory, released after the artifact is in place and its checkpoints gone.
        if stage.device:  # a model job: its steps on the workflow's console (augsbert.scheduling.progress)
            # the lower bound is a `student` job without teacher labels: named by its role on the console
            progress.start(stage.name, out, label=stage.console_label(spec) if stage.console_label else None)
        try:
            with writing(out), writer_lock(out, wait=args.wait_lock):
                # another writer may have finished it while this job waited for the lock (--wait-lock)
                if not args.force and _finished_already(stage, spec, out):
                    return
                metrics = runner(spec, out, force=args.force, **kwargs)
        finally:
            progress.stop()
        print(json.dumps({k: v for k, v in metrics.items() if not isinstance(v, (dict, list))}, indent=2))

    p.set_defaults(handler=handler)


def _finished_already(stage: Stage, spec: dict, out: str) -> bool:
    """True (and says so) when `out` is already the finished artifact of `spec`: same key, same content, nothing to
    write (augsbert.store.artifacts.finished_as_planned); the job then succeeds and leaves it as it is."""
    metrics = finished_as_planned(out, spec, stage.holds)
    if metrics is None:
        return False
    print(f"augsbert {stage.command}: {out} is finished already (same key, same content: another run or job wrote "
          "it); nothing to do, it is left as it is", file=sys.stderr)
    print(json.dumps({k: v for k, v in metrics.items() if not isinstance(v, (dict, list))}, indent=2))
    return True


def check_out_key(spec: dict, out: str, stage: str, source: str = "--spec") -> None:
    """A spec carrying a content key (`<name>-<hash>`, checked against its content by check_stage_spec) is written
    to a folder of that name, as the workflow's `artifacts/<stage>/<key>`: stages, `collect-results` and
    Snakemake find an artifact by its folder's name, which must not say something other than its content. A
    spec planned from `--config` has its key too: `--out artifacts/<stage>/<old key> --force` once wrote another
    configuration's result under the old key."""
    key = spec.get("key")
    if isinstance(key, str) and re.fullmatch(KEY_PATTERN, key) and Path(out).name != key:
        what = "the spec's key" if source == "--spec" else "the key planned from --config"
        raise ConfigError(f"--out {out}: {what} is {key}, so the folder must be named after it "
                          f"(artifacts/{stage}/{key}, as the workflow writes it); refusing to run")


def _content_key(spec: dict) -> bool:
    return is_key(spec.get("key"))


def check_inputs(spec: dict) -> None:
    """Refuse to start on an input artifact whose files no longer match its manifest, or whose spec.json names
    another key than its folder (augsbert.store.manifests)."""
    for role, path in (spec.get("inputs") or {}).items():
        if isinstance(path, str):  # a missing input: the stage says what it needed
            check_artifact(path, f"input `{role}`", stages=set(REGISTRY))


def _plan_command(sub) -> None:
    p = sub.add_parser("plan", help="show the planned stage nodes of a config",
                       description="Print the artifacts (seed, role, stage, path, whether built) the config plans per "
                                   "experiment; --json prints each experiment's spec (config, keys, paths) instead.")
    p.add_argument("--config", nargs="+", action="extend", metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--experiment", help="only this experiment")
    p.add_argument("--json", action="store_true", help="the experiments' specs as JSON (what collect-results reads)")
    p.add_argument("--estimate", action="store_true", help="per job not yet built: its steps and an estimated time "
                                                            "on this machine, and the total")

    def handler(args) -> None:
        plan = Plan(load_configs(args.config, lazy=True))
        names = [args.experiment] if args.experiment else sorted(plan.experiments)
        specs = plan.experiment_specs(names)
        print(json.dumps(specs, indent=2) if args.json else render_plan(specs))
        if args.estimate:
            print("\n" + print_estimate(plan, names))

    p.set_defaults(handler=handler)


def _run_command(sub) -> None:
    p = sub.add_parser(
        "run", help="run the workflow for experiments or grids of your config file (builds the snakemake call)",
        description="`augsbert run my.yaml NAME ...` runs `snakemake --cores N --configfile my.yaml -- TARGET ...` "
                    "from the repository root: an experiment's target is results/<NAME>.json, a grid's "
                    "results/tables/<NAME>.md (a path under results/, models/ or artifacts/ is taken as it is). Every "
                    "name is checked first, so a mistake ends with one line. Exit status: 0 done, 1 a job failed, 2 a "
                    f"mistake in the config or names, {EXIT_LABELLING} stopped for labelling (active.annotator: "
                    "file: fill the round's file, then run the same command again), 130 interrupted.")
    p.add_argument("configfile", help="your config YAML (merged over config/config.yaml, as --configfile)")
    p.add_argument("names", nargs="+", metavar="NAME", help="experiment or grid of the config, or a target path")
    p.add_argument("--cores", type=int, default=2, help="CPU cores for local jobs (default 2)")
    p.add_argument("-n", "--dry-run", action="store_true", help="show the jobs and the estimate, run nothing")

    def handler(args) -> int:
        config = load_configs([args.configfile], lazy=True)
        targets = [run_target(config, name) for name in args.names]
        if args.dry_run:  # a real run prints it before its first job (workflow/Snakefile onstart)
            experiments = [e for name in args.names for e in run_experiments(config, name)]
            print(print_estimate(Plan(config), experiments), file=sys.stderr)
            os.environ[PLAN_WARNINGS_SAID] = "1"  # its planning warnings are above; Snakemake plans them again
        if not args.dry_run:
            if said := clear_stale_locks().line():
                print(f"augsbert: {said}", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "snakemake", "--cores", str(args.cores), "--configfile",
                   args.configfile, *(["--dry-run"] if args.dry_run else []), "--", *targets]
        print("augsbert: " + " ".join(["snakemake", *command[3:]]), file=sys.stderr, flush=True)
        args.snakemake_started = True  # for the line a Ctrl-C ends with (interrupted_line)
        os.environ[RENAMES_SAID] = "1"  # a renamed section's notice is above; Snakemake reads the same config again
        os.environ[CONTINUE_ENV] = run_command(args.argv, os.getcwd())  # a stop for labelling names this command
        try:
            return run_snakemake(command)
        finally:
            os.environ.pop(CONTINUE_ENV, None)

    p.set_defaults(handler=handler)


def _rehearse_command(sub) -> None:
    p = sub.add_parser("rehearse", help="run every job of the targets on stand-ins (tiny models, cut data, one seed, "
                                        "2 steps) under .rehearsal/, in minutes: one line per job kind, OK or failed",
                       description="Plan the targets' Snakemake DAG with `rehearse: true` and run each of its jobs on "
                                   "stand-ins under .rehearsal/ (docs/guide/rehearsal.md); exit 1 when a job failed.")
    # nargs="*": `--config my.yaml results/x.json` gives the target to --config, which takes every word after it;
    # the handler takes it back (targets_after_config)
    p.add_argument("targets", nargs="*", metavar="TARGET", help="results/<experiment>.json, results/tables/<grid>.md, "
                                                               "artifacts/<stage>/<key>, or an experiment's or grid's "
                                                               "name")
    p.add_argument("--config", nargs="+", action="extend", metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--cores", type=int, default=2, help="cores for the rehearsal's jobs (default 2)")
    p.add_argument("--every-kind", action="store_true",
                   help="rehearse few of the targets' experiments that hold every job kind they hold (each code "
                        "path once), not all of them")
    p.add_argument("--cold", action="store_true", help="start every job as a fresh process (default: forks of a "
                                                       "warm server that imported the libraries once)")
    p.add_argument("--unlock", action="store_true", help="only remove what a stopped (killed) rehearsal left in "
                   ".rehearsal/: Snakemake's lock files, temporary folders (refused while a rehearsal runs; a "
                   "rehearsal does it itself when none runs)")

    def handler(args) -> int:
        from ..run.rehearse import run, unlock  # imports the model libraries' builders only when a rehearsal runs

        if args.unlock:
            if args.targets:
                p.error("--unlock takes no TARGET")
            return unlock()
        targets_after_config(args)
        if not args.targets:
            p.error("no TARGET given (a results file, a table, an artifact, or an experiment's or grid's name): "
                    "augsbert rehearse results/<experiment>.json [--config my.yaml]")
        if any("/" not in target for target in args.targets):  # names, as `augsbert run` takes them
            config = load_configs(args.config, lazy=True)
            args.targets = [target if "/" in target else run_target(config, target) for target in args.targets]
        return run(args.targets, args.config, cores=args.cores, warm=not args.cold, every_kind=args.every_kind)

    p.set_defaults(handler=handler)


def targets_after_config(args) -> None:
    """`rehearse --config my.yaml results/x.json`: --config (several files) took every word after it, the target too,
    and argparse then said "the following arguments are required: TARGET" (issue 56 R8). The trailing words of
    --config that are targets (`augsbert.config.yaml_files.is_target`: a results file, a table, an export folder,
    an artifact, or a name that is no file) are taken back as the command's targets, as the user typed them."""
    config, moved = list(args.config or []), []
    while config and is_target(config[-1]):
        moved.insert(0, config.pop())
    args.config, args.targets = config or None, [*args.targets, *moved]


def interrupted_line(args) -> str:
    """The line a Ctrl-C ends a command with (exit code 130): what was kept, and how to go on (issue 56 R10, I1)."""
    line = f"augsbert {args.command}: interrupted (Ctrl-C)"
    again = " ".join(["augsbert", *map(shlex.quote, args.argv)])
    if args.command == "run" and not getattr(args, "snakemake_started", False):
        return f"{line} before Snakemake started; nothing was run"
    if args.command == "run":
        return (f"{line}; Snakemake stopped its jobs. Every artifact finished before is kept, and a job cut short "
                "wrote none (a training job keeps its checkpoints in artifacts/.checkpoints/).\nTo continue, run the "
                f"same command again: {again}")
    if args.command == "rehearse":
        return (f"{line}; the jobs it finished are kept under .rehearsal/ (log: .rehearsal/rehearse.log).\nTo "
                f"continue, run the same command again: {again}")
    out = getattr(args, "interrupted_out", None)
    if out:
        folder = checkpoint_dir(out)
        steps = [int(p.name.split("-")[1]) for p in folder.rglob("checkpoint-*") if p.name.split("-")[1].isdigit()] \
            if folder.is_dir() else []
        return (f"{line}; {out} was not written (its partial files are removed). " +
                (f"Its checkpoints in {folder} are kept: the same command resumes from the last one (step "
                 f"{max(steps)})." if steps else "The same command starts it again (no checkpoint was saved yet)."))
    return line


def print_estimate(plan: Plan, experiments: list[str]) -> str:
    """The time estimate of the experiments' jobs whose artifacts are not built yet (augsbert.scheduling.estimate)."""
    from ..scheduling.estimate import estimate_text, with_upstream

    keys = [run["key"] for name in experiments for roles in plan.experiment_spec(name)["runs"].values()
            for run in roles.values()]
    # and every node those are built from: a teacher its readers plan (not a row: `models` without `teacher`) is
    # no role of the runs, and Snakemake runs it all the same (issue 56)
    keys = [key for key in with_upstream(plan, keys) if not Path(plan.node(key).path).is_dir()]
    from ..run.warm import wanted

    warm = wanted(local=True, deployment=False, stage_jobs=len(keys)) is None  # as a local run will start them
    return estimate_text(plan, keys, experiments, plan.config["device"], warm=warm)


def run_experiments(config: dict, name: str) -> list[str]:
    """The experiments behind `augsbert run`'s NAME (a grid's cells; none for a path)."""
    if name in (config.get("experiments") or {}):
        return [name]
    if name in (config.get("grids") or {}):
        from ..config.grids import cells

        return [cell.experiment for cell in cells(name, config["grids"][name])]
    return []


def run_target(config: dict, name: str) -> str:
    """The Snakemake target of `augsbert run`'s NAME: an experiment's results file, a grid's table, or a path (an
    artifact too: what `verify --repair` moved aside is rebuilt by naming it)."""
    if name.startswith(("results/", "models/", "artifacts/")):
        return name
    if name in (config.get("experiments") or {}):
        return f"results/{name}.json"
    if name in (config.get("grids") or {}):
        return f"results/tables/{name}.md"
    known = [*(config.get("experiments") or {}), *(config.get("grids") or {})]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    raise ConfigError(f"'{name}' is no experiment or grid of the config" +
                      (f" (did you mean {', '.join(map(repr, close))}?)" if close else
                       " (augsbert list --config FILE: the names)"))


def _list_command(sub) -> None:
    p = sub.add_parser("list", help="list the configured experiments, grids and datasets, with the datasets each "
                                    "needs and whether their raw files are present; `augsbert list my.yaml` adds "
                                    "your own",
                       description="One entry per experiment, grid or dataset of the config: its name, the datasets "
                                   "it reads (present or MISSING) and its description, wrapped to the terminal's "
                                   "width. Without a kind, all three. Config files of your own (given like a kind, "
                                   "or after --config) are merged over config/config.yaml, as Snakemake's "
                                   "--configfile: their experiments, grids and datasets are listed too.")
    p.add_argument("items", nargs="*", metavar="KIND|FILE",
                   help=f"{', '.join(KINDS)} (default: all three), and/or config files of your own (my.yaml)")
    p.add_argument("--config", nargs="+", action="extend", metavar="FILE", help=CONFIG_HELP)
    p.add_argument("--long", action="store_true", help="one whole line per entry (default: wrapped to the "
                                                       "terminal's width)")

    def handler(args) -> None:
        given = [*args.items, *(args.config or [])]  # `list --config my.yaml experiments`: --config took the kind
        kinds = [item for item in given if item in KINDS and not Path(item).exists()]
        files = [item for item in given if item not in kinds]
        for item in args.items:
            if item not in kinds and not Path(item).exists() and not item.endswith(CONFIG_SUFFIXES):
                p.error(f"{item!r} is neither a kind ({', '.join(KINDS)}) nor a config file")
        config = load_configs(files, lazy=True)
        width = None if args.long else shutil.get_terminal_size().columns
        print(render_list(config, tuple(dict.fromkeys(kinds)) or KINDS, width))
        if not files:  # the shipped config alone: say how a file of one's own is listed too (issue 56)
            print("\n(config/config.yaml only; yours too: augsbert list my.yaml)", file=sys.stderr)

    p.set_defaults(handler=handler)


def _aggregate_command(sub, name: str, help_text: str, what: str, out_help: str,
                       runner: Callable[[dict, argparse.Namespace], str], kind: str | None = None,
                       planned: Callable[[Plan, str], dict] | None = None) -> argparse.ArgumentParser:
    """A command that works on an experiment's or grid's spec: from --spec (workflow) or planned from --config
    (`planned`: how, from the plan and the name; `kind`: the spec's kind, jobs.specs.AGGREGATE_FIELDS)."""
    p = sub.add_parser(name, help=help_text, description=help_text)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--spec", help=f"{what} spec JSON or @file (what the workflow passes)")
    src.add_argument("--config", nargs="+", action="extend", metavar="FILE",
                     help=f"{CONFIG_HELP} (standalone use; needs --{what})")
    p.add_argument(f"--{what}")
    p.add_argument("--out", help=out_help)

    def handler(args) -> None:
        if args.spec:
            spec = load_spec(args.spec)
            # A spec is not checked by the config schema, and its names make the default output path
            # (results/<experiment>.json) and the results files a table reads: `../../x` must not escape.
            check_name(spec.get(what), f"--spec: {what}")
            for name in spec.get("experiments", []):
                check_name(name, "--spec: experiments")
            check_aggregate_spec(spec, kind or what, f"--spec {args.spec}" if args.spec.startswith("@") else "--spec")
        else:
            if not getattr(args, what):
                p.error(config_needs(f"--{what}", args.config))
            check_name(getattr(args, what), f"--{what}")
            plan = Plan(load_configs(args.config, lazy=True))
            if planned is not None:
                spec = planned(plan, getattr(args, what))
            else:
                spec = plan.experiment_spec(args.experiment) if what == "experiment" else grid_spec(plan, args.grid)
        print(runner(spec, args))

    p.set_defaults(handler=handler)
    return p


# What the two aggregate commands run, "module:function" as a stage's runner, imported when the command runs:
# the tables read pandas, and `augsbert --help` loads no table or model library (tests/test_cli.py)
AGGREGATE_RUNNERS = {"collect-results": "augsbert.reporting.results:run",
                     "render-table": "augsbert.reporting.tables:run", "render-curve": "augsbert.reporting.curves:run",
                     "frontier": "augsbert.export.frontier:run"}


def aggregate_runner(command: str) -> Callable:
    module, _, function = AGGREGATE_RUNNERS[command].partition(":")
    return getattr(importlib.import_module(module), function)


def _collect(spec: dict, args) -> str:
    result = aggregate_runner("collect-results")(spec, args.out or f"results/{spec['experiment']}.json", args.report_dir)
    return json.dumps(result["models"], indent=2)


def _render(spec: dict, args) -> str:
    return aggregate_runner("render-table")(spec, args.results, Path(args.out or f"results/tables/{spec['grid']}.md"))


def _curve(spec: dict, args) -> str:
    return aggregate_runner("render-curve")(spec, args.results,
                                            Path(args.out or f"results/tables/{spec['grid']}.curve.md"))


def _frontier(spec: dict, args) -> str:
    return aggregate_runner("frontier")(spec, args.results,
                                        Path(args.out or f"results/tables/{spec['grid']}.frontier.md"))


def stage_names_as_commands(argv: list[str]) -> list[str]:
    """A stage's name is also accepted as its command (`augsbert zero_shot` runs `zero-shot`): the rules,
    generated from the registry, call `augsbert {rule}`."""
    for i, word in enumerate(argv):
        if not word.startswith("-"):  # the command: the first word that is not an option
            if word in REGISTRY:
                argv = [*argv[:i], REGISTRY[word].command, *argv[i + 1:]]
            break
    return argv


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="augsbert", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"augsbert {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors in the log")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>")
    for stage in REGISTRY.values():  # one command per stage of the registry (augsbert.stages)
        _stage_command(sub, stage)
    collect = _aggregate_command(
        sub, "collect-results", "gather an experiment's artifact metrics into results/<experiment>.json",
        "experiment", "results file (default results/<experiment>.json)", _collect)
    collect.add_argument("--report-dir", help="the experiment's report files: metrics table, training curves, silver "
                                              "densities (default: the results file's name with .report)")
    table = _aggregate_command(
        sub, "render-table", "render a grid's finished results as the thesis' tables (rows = methods, columns = "
        "datasets, mean +- std over seeds): results/tables/<grid>.md, .csv and a .png bar chart", "grid",
        "Markdown table to write (default results/tables/<grid>.md; .csv and .png beside)", _render)
    table.add_argument("--results", default="results", help="directory holding results/<experiment>.json")
    curve = _aggregate_command(
        sub, "render-curve", "render a grid's active-learning cells as label-budget curves (rows = strategies, "
        "columns = gold labels, mean +- std over seeds; the labels each strategy needs to reach its random "
        "baseline): results/tables/<grid>.curve.md, .csv and a .png line chart", "grid",
        "Markdown file to write (default results/tables/<grid>.curve.md; .csv and .png beside)", _curve, kind="curve",
        planned=curve_spec)
    curve.add_argument("--results", default="results", help="directory holding results/<experiment>.json")
    frontier = _aggregate_command(
        sub, "frontier", "measure a grid's compact students side by side: test Spearman, CPU speed and size of every "
        "row in one process under one condition, the int8 exports with their parity, the Pareto-optimal rows: "
        "results/tables/<grid>.frontier.md, .json (what `export --pick-fastest-within` reads) and a .png plot",
        "grid", "Markdown file to write (default results/tables/<grid>.frontier.md; .json and .png beside)", _frontier,
        kind="frontier", planned=frontier_spec)
    frontier.add_argument("--results", default="results", help="directory holding results/<experiment>.json")
    _plan_command(sub)
    _run_command(sub)
    _list_command(sub)
    _rehearse_command(sub)
    add_export_command(sub)
    fetch = sub.add_parser("fetch", help="download every hub model and dataset an experiment needs into the local "
                                         "Hugging Face cache (run where there is internet; jobs then run offline)")
    fetch.add_argument("--experiment", help="experiment name (required)")
    fetch.add_argument("--config", nargs="+", action="extend", metavar="FILE", help=CONFIG_HELP)
    fetch.set_defaults(handler=_fetch)
    verify = sub.add_parser("verify", help="check every artifact's files against its manifest; --repair moves the "
                                           "damaged ones aside (into <artifacts>/.quarantine/) so that Snakemake "
                                           "rebuilds them (exit 1: damage found)")
    verify.add_argument("--artifacts", default="artifacts", help="the artifacts folder (default artifacts)")
    verify.add_argument("--repair", action="store_true", help="move each damaged artifact folder into "
                        "<artifacts>/.quarantine/<stage>/<key>-<time>/, naming the files in it augsbert did not write")
    verify.add_argument("--results", default="results", help="the results folder whose results/<experiment>.json "
                                                              "files are checked too (default results)")
    verify.set_defaults(handler=lambda args: verify_artifacts(
        args.artifacts, args.results, args.repair, {name: stage.holds for name, stage in REGISTRY.items()}))
    ref = sub.add_parser("config-reference", help="print the Markdown config reference (config/README.md)")
    ref.set_defaults(handler=lambda args: print(reference.render(), end=""))
    return parser


def _fetch(args) -> None:
    if not args.experiment:  # not `required=True`: argparse's message would not say where the name went
        raise ConfigError(config_needs("--experiment", args.config).replace("--config needs", "fetch needs", 1)
                          if args.config else "fetch needs --experiment NAME")
    fetch(Plan(load_configs(args.config, lazy=True)), args.experiment)


# Another live process writes the same output: a temporary condition (sysexits EX_TEMPFAIL), not a bad input.
EXIT_LOCKED = 75
# Ended by Ctrl-C: 128 + SIGINT, what a shell reports for a command killed by it.
EXIT_INTERRUPTED = 130
# The reader of stdout closed the pipe: 128 + SIGPIPE, what a shell reports for a command killed by it.
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None, warm: bool = True) -> int:
    """`augsbert argv`; `warm=False`: the warm server was tried already (augsbert.face.launch)."""
    if warm and os.environ.get(SOCKET_ENV):  # a warm server runs the command in a fork (augsbert.run.warm)
        code = run_warm(list(sys.argv[1:] if argv is None else argv))
        if code is not None:
            return code
    argv = stage_names_as_commands(list(sys.argv[1:] if argv is None else argv))
    try:
        claim_for_job()  # a packed local run: this job's GPU(s), before torch starts (augsbert.scheduling.gpus)
    except GpuInventoryError as err:
        print(f"augsbert: error: {err}", file=sys.stderr)
        return 2
    if not distributed.parallel_job(argv):  # a data-parallel job's processes share the job's GPUs (augsbert.training.distributed)
        pin_one_gpu(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # a data-parallel stage re-launches this command line under torchrun
    logging.basicConfig(level=logging.WARNING if args.quiet or not distributed.is_main() else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Failures a user can act on (config, data, model reference, output location) end with one message
    # and exit code 2; anything else is a bug or an environment problem and keeps its traceback.
    try:
        code = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's flush at exit
    except KeyboardInterrupt:  # Ctrl-C: one line saying what was kept and how to go on, not a traceback
        print(interrupted_line(args), file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`augsbert plan | head`): stop quietly, as `git log | head` does; stdout is pointed
        # at /dev/null so that the interpreter's own flush at exit does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except ArtifactLockedError as err:
        print(f"augsbert {args.command}: error: {err}", file=sys.stderr)
        return EXIT_LOCKED
    except LabellingStop as err:  # a planned stop for a person, not an error (augsbert.scheduling.stops)
        print(f"augsbert {args.command}{STOP_MARK}{err}", file=sys.stderr)
        return EXIT_LABELLING
    except (ConfigError, DataError, ModelResolutionError, ArtifactExistsError, LockUnsupportedError,
            OutputWriteError, ExportError, DamagedArtifactError, BackendError) as err:
        print(f"augsbert {args.command}: error: {err}", file=sys.stderr)
        return 2
    return code if isinstance(code, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
