"""`augsbert rehearse TARGET...`: run every job of the targets' DAG on stand-ins, under `.rehearsal/`, in minutes.

The rehearsal is the workflow itself with `rehearse: true` (docs/guide/rehearsal.md): `snakemake --config
rehearse=true TARGET` does the same thing. With it the Snakefile moves its working directory to
`.rehearsal/` (augsbert.config.rehearsal.ROOT) before anything is read or written, and `prepare` (called by
workflow/rules/common.smk there) builds the stand-in models and cuts the datasets below it; Snakemake then plans
its own DAG of the targets and runs every job, each resolving its model references to stand-ins.

This command adds what a person wants around it: the jobs start as forks of a warm server (the libraries
imported once, augsbert.face.warm), every job runs even after one failed (`--keep-going`), and the end is one
line per job kind (`job_kind`: the stage and the options that choose its code path), OK or failed with its log,
then "N jobs of K kinds rehearsed in T s"; the exit status is 1 when any job failed or did not run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import types
import typing
from pathlib import Path

from ..config import rehearsal
from ..config.load import deep_merge, prepare_config, read_config
from ..config.names import check_name
from ..config.yaml_files import SHIPPED_CONFIG
from ..data.standins import prepare_datasets, prepare_files
from ..errors import ConfigError
from ..models.standins import build_standins
from ..planning.plan import Plan
from ..stages import stage as registered_stage
from ..stages.base import Stage
from ..store.model_refs import model_references, standin_kind
from ..reporting.layout import grid_spec
from .warm import SOCKET_ENV

STANDINS_DIR = "standins"  # below the rehearsal's root
# the model references of a node's params, by the stand-in kind they take (a seq2seq generator and inverse cloze
# differ)
KIND_MODELS = ("model", "generator", "cross_encoder", "retrievers", "semantic_model")


def prepare(config: dict, data_source: str | Path) -> dict[str, str]:
    """In the rehearsal's root (the current directory): the stand-in models (built once per recipe), the model
    references' kinds, the datasets cut from `data_source` (the real data_dir); sets $AUGSBERT_STANDINS for the
    jobs. Returns what was done per dataset."""
    folder = build_standins(STANDINS_DIR).resolve()
    kinds = model_references({k: config.get(k) for k in ("defaults", "experiments", "grids")})
    known = folder / rehearsal.REFERENCES_FILE
    previous = json.loads(known.read_text()) if known.is_file() else {}
    if {**previous, **kinds} != previous:
        tmp = known.with_name(f".{known.name}.tmp")
        tmp.write_text(json.dumps({**previous, **kinds}, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, known)
    os.environ[rehearsal.STANDINS_ENV] = str(folder)
    done = prepare_datasets(config, data_source, rehearsal.DATA_DIR)
    triples = _named_files({k: config.get(k) for k in ("defaults", "experiments", "grids")}, "triples")
    for path, what in prepare_files(triples, Path(data_source), Path(rehearsal.DATA_DIR)).items():
        done[f"pretrain.triples {path}"] = what
    return done


def _named_files(section, key: str, found: list | None = None) -> list[str]:
    """Every value (a path, or a list of paths) of `key` at any depth of a config."""
    found = [] if found is None else found
    if isinstance(section, dict):
        for name, value in section.items():
            if name == key and value:
                found.extend([value] if isinstance(value, str) else [v for v in value if isinstance(v, str)])
            else:
                _named_files(value, key, found)
    elif isinstance(section, list):
        for item in section:
            _named_files(item, key, found)
    return found


def _model_kind(value, references: dict) -> str:
    if isinstance(value, list):
        return "+".join(_model_kind(v, references) for v in value)
    if not isinstance(value, str) or value in rehearsal.NOT_MODELS:
        return str(value)
    return references.get(value) or standin_kind(value)


def _is_choice(annotation) -> bool:
    """A declared choice: bool, a Literal, or either inside an Optional / union."""
    if annotation is bool or typing.get_origin(annotation) is typing.Literal:
        return True
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and any(
        _is_choice(arg) for arg in typing.get_args(annotation))


def kind_options(stage: str) -> tuple[str, ...]:
    """The options that choose the code path of a stage's job, from its declaration: every declared choice of its
    params class (a bool or Literal field), then its `Stage.kind_options` (choices of another type: a loader, an
    objective)."""
    declared = registered_stage(stage)
    fields = ()
    if declared.params is not None:
        hints = typing.get_type_hints(declared.params)
        fields = tuple(f.name for f in dataclasses.fields(declared.params) if _is_choice(hints[f.name]))
    return tuple(dict.fromkeys((*fields, *declared.kind_options)))


def job_kind(node, references: dict) -> str:
    """A node's job kind: its stage, then `option=value` for each of its stage's `kind_options` it has and the
    stand-in kind of each model it reads (KIND_MODELS)."""
    params = node.settings
    parts = [node.stage]
    for key in kind_options(node.stage):
        if key in params and not isinstance(params[key], dict):
            parts.append(f"{key}={json.dumps(params[key], sort_keys=True) if isinstance(params[key], list) else params[key]}")
    for key in KIND_MODELS:
        if params.get(key) is not None:
            parts.append(f"{key}={_model_kind(params[key], references)}")
    return " ".join(parts)


def target_experiments(plan: Plan, targets: list[str]) -> list[str]:
    """The experiments whose jobs a target needs: results/<experiment>.json, results/tables/<grid>.md|csv|png,
    models/<experiment>/<model>."""
    names = []
    for target in targets:
        parts = Path(target).parts
        if len(parts) == 2 and parts[0] == "results" and target.endswith(".json"):
            names.append(check_name(Path(target).stem, target))
        elif len(parts) == 3 and parts[:2] == ("results", "tables"):  # a grid's table or its curves (<grid>.curve.md)
            spec = grid_spec(plan, check_name(Path(target).stem.removesuffix(".curve"), target))
            names.extend(spec["experiments"])
        elif len(parts) >= 2 and parts[0] == "models":
            names.append(check_name(parts[1], target))
        else:
            raise ConfigError(f"{target}: not a target of the workflow (results/<experiment>.json, "
                              "results/tables/<grid>.md, models/<experiment>/<model>)")
    return list(dict.fromkeys(names))


def job_states(plan: Plan, names: list[str], keys: set[str] | None = None) -> dict[str, list[tuple[str, str, str]]]:
    """{job kind: [(key, 'OK' | 'failed' | 'not run', log path)]} of every stage job the experiments plan (or of the
    jobs `keys`), read from the rehearsal's root (the current directory): an artifact folder is there only once its
    job finished."""
    references = _references()
    if keys is None:
        keys = experiment_jobs(plan, names)
    kinds: dict[str, list] = {}
    for key in sorted(keys):
        node = plan.nodes[key]
        log = Path("logs") / node.stage / f"{key}.log"
        state = "OK" if Path(node.path).is_dir() else "failed" if log.is_file() else "not run"
        kinds.setdefault(job_kind(node, references), []).append((key, state, str(Path(rehearsal.ROOT) / log)))
    return kinds


def summary(kinds: dict[str, list], seconds: float) -> tuple[str, bool]:
    """The closing lines (one per job kind, then the count) and whether every job ran."""
    lines, ok = [], True
    for kind, jobs in sorted(kinds.items()):
        failed = [job for job in jobs if job[1] == "failed"]
        missing = [job for job in jobs if job[1] == "not run"]
        ok = ok and not failed and not missing
        state = "failed " if failed else "not run" if missing else "OK     "
        count = f"{len(jobs)} job{'s' if len(jobs) > 1 else ''}"
        if failed or missing:
            count = ", ".join(f"{len(part)} of {len(jobs)} {word}" for part, word in
                              ((failed, "failed"), (missing, "not run")) if part)
        where = f"  log: {failed[0][2]}" if failed else ""
        lines.append(f"{state} {kind} ({count}){where}")
    jobs = sum(len(v) for v in kinds.values())
    lines.append(f"{jobs} jobs of {len(kinds)} kinds rehearsed in {seconds:.0f} s")
    return "\n".join(lines), ok


def _warm_server(env: dict, folder: Path, threads: int):
    """A warm server (augsbert.face.warm_server) for the jobs of `threads` threads: Snakemake gives each job
    OMP_NUM_THREADS / MKL_NUM_THREADS = its threads, which a server must share to serve it (WARM_FIXED_ENV); a job of
    other threads (the one-thread data jobs) starts plainly."""
    path = folder / "warm.sock"
    env = {**env, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    server = subprocess.Popen([sys.executable, "-m", "augsbert.face.warm_server", str(path)], env=env,
                              stderr=open(folder / "warm_server.log", "w"))
    for _ in range(600):
        if path.exists() or server.poll() is not None:
            break
        time.sleep(0.1)
    return server, path


def move_run_log(logger_manager, project: str | Path) -> list[Path]:
    """Called by the Snakefile once a rehearsal has moved into its root (the current directory): Snakemake opened
    its run log, `.snakemake/log/<time>.snakemake.log`, in the project before the Snakefile was read
    (`snakemake.logging.LoggerManager.setup_logfile`, called by `snakemake.api`; no log in a dry run). Each such
    log is moved into the root's `.snakemake/log/` while Snakemake holds it open (the open file moves with it, so
    it writes on there, and its closing "Complete log" line names the new place); the project's `.snakemake/log/`
    and `.snakemake/` are removed when that leaves them empty (Snakemake made them for this log; a folder holding
    anything is kept). Returns the new paths."""
    handlers = getattr(logger_manager, "logfile_handlers", None)
    if not isinstance(handlers, dict):  # another Snakemake's logging: nothing known to move
        return []
    here, project = Path(".snakemake", "log").resolve(), Path(project).resolve()
    moved = []
    for handler, old in list(handlers.items()):
        old = Path(old)
        if old.parent == here or not old.is_file() or project not in old.parents:
            continue
        here.mkdir(parents=True, exist_ok=True)
        new = here / old.name
        os.replace(old, new)
        handlers[handler] = str(new)
        if hasattr(handler, "baseFilename"):  # a logging.FileHandler reopening after a close opens the new path
            handler.baseFilename = str(new)
        moved.append(new)
        for folder in (old.parent, old.parent.parent):  # .snakemake/log, then .snakemake: only while empty
            try:
                folder.rmdir()
            except OSError:
                break
    return moved


def upstream(plan: Plan, key: str, seen: set | None = None) -> set[str]:
    """The node `key` and every node it reads, directly or not."""
    seen = set() if seen is None else seen
    if key not in seen:
        seen.add(key)
        for _, source in plan.nodes[key].inputs:
            upstream(plan, source, seen)
    return seen


def experiment_jobs(plan: Plan, names: list[str]) -> set[str]:
    """Every job the experiments `names` need: their runs' roles and what those read (the members, shards and
    rounds a hook plans without a role of their own included)."""
    keys: set[str] = set()
    for name in names:
        for roles in plan.experiment(name).runs.values():
            for key in roles.values():
                upstream(plan, key, keys)
    return keys


def covering_jobs(plan: Plan, names: list[str], references: dict) -> tuple[list[str], int]:
    """One job per job kind of the experiments `names`, chosen so that they and what they read are few: kinds
    whose cheapest job reads the most go first, and each takes its job that adds the fewest jobs to those already
    chosen (greedy). Returns the chosen keys (with their upstream jobs, every kind at least once) and the number
    of kinds."""
    by_kind: dict[str, list[str]] = {}
    for key in sorted(experiment_jobs(plan, names)):
        by_kind.setdefault(job_kind(plan.nodes[key], references), []).append(key)
    chosen, held = [], set()
    for kind, keys in sorted(by_kind.items(), key=lambda kv: (-min(len(upstream(plan, k)) for k in kv[1]), kv[0])):
        best = min(keys, key=lambda k: (len(upstream(plan, k) - held), k))
        chosen.append(best)
        held |= upstream(plan, best)
    return chosen, len(by_kind)


def _references() -> dict:
    folder = os.environ.get(rehearsal.STANDINS_ENV)
    path = Path(folder) / rehearsal.REFERENCES_FILE if folder else None
    return json.loads(path.read_text()) if path and path.is_file() else {}


def run(targets: list[str], configs: list[str] | None = None, cores: int = 2, warm: bool = True,
        extra: list[str] | None = None, every_kind: bool = False) -> int:
    """Rehearse `targets` (see the module's docstring); prints Snakemake's log tail on failure and the summary.

    `every_kind`: instead of every job the targets need, one job of each job kind they hold and what it reads
    (`covering_jobs`): each distinct code path runs once, for a grid of hundreds of jobs."""
    for target in targets:
        if not isinstance(target, str) or target.startswith("-"):
            raise ConfigError(f"{target!r}: a target is a path such as results/<experiment>.json")
    raw = {}
    for path in [SHIPPED_CONFIG, *(configs or [])]:
        raw = deep_merge(raw, read_config(path))
    os.environ[rehearsal.PROJECT_ENV] = os.getcwd()  # relative model paths, planned here in the root (as the Snakefile)
    config = prepare_config(deep_merge(raw, {"rehearse": True}), lazy=True)
    root = Path(rehearsal.ROOT).resolve()
    root.mkdir(exist_ok=True)
    covering = ""
    if every_kind:
        here, source = os.getcwd(), Path(os.path.expanduser(str(raw.get("data_dir", "data/raw")))).resolve()
        os.chdir(root)
        try:
            prepare(config, source)
            plan = Plan(config)
            names = target_experiments(plan, targets)
            chosen, kinds = covering_jobs(plan, names, _references())
            jobs = set().union(*(upstream(plan, key) for key in chosen))
            targets = [plan.nodes[key].path for key in chosen]
        finally:
            os.chdir(here)
        covering = f"every kind: the {kinds} job kinds of {len(names)} experiments in {len(jobs)} of their jobs"
    command = [sys.executable, "-m", "snakemake", "--cores", str(cores), "--keep-going", "--config", "rehearse=true"]
    if configs:
        command += ["--configfile", *[str(Path(c).resolve()) for c in configs]]
    command += [*(extra or []), "--", *targets]
    start = time.perf_counter()
    env = dict(os.environ)
    server = None
    with tempfile.TemporaryDirectory(prefix="augsbert-rehearse-") as scratch:
        if warm:
            # the model stages' declared threads (augsbert.stages.base.Stage.threads), as Snakemake scales them
            server, socket_path = _warm_server(env, Path(scratch), min(Stage.threads, cores))
            if server.poll() is None:
                env[SOCKET_ENV] = str(socket_path)
        log_path = root / "rehearse.log"
        # a SIGTERM of this command ends Snakemake (and its jobs) and the server too, as Ctrl-C does
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        try:
            with open(log_path, "w") as log:
                print(f"augsbert rehearse: {' '.join(command[1:])} (log: {log_path})", file=sys.stderr, flush=True)
                process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
                try:
                    code = process.wait()
                except BaseException:  # Ctrl-C or SIGTERM: Snakemake stops its jobs, then this command ends
                    process.terminate()
                    process.wait()
                    raise
        finally:
            signal.signal(signal.SIGTERM, previous)
            if server is not None:
                server.terminate()
                server.wait()
    seconds = time.perf_counter() - start
    here = os.getcwd()
    os.chdir(root)  # plan where the rehearsal ran: its data, its digests, its artifacts
    try:
        os.environ[rehearsal.STANDINS_ENV] = str(build_standins(STANDINS_DIR).resolve())
        plan = plan if every_kind else Plan(config)  # (every kind: the plan the jobs were chosen from)
        try:
            text, ok = summary(job_states(plan, target_experiments(plan, targets) if not every_kind else [],
                                          jobs if every_kind else None), seconds)
        except ConfigError as err:  # planning stopped: Snakemake said why (the log's tail below)
            text, ok = f"the targets do not plan: {err}", False
    finally:
        os.chdir(here)
    if code != 0 or not ok:
        print("\n".join(log_path.read_text(errors="replace").splitlines()[-25:]), file=sys.stderr)
    if covering:
        print(covering)
    print(text)
    return 0 if code == 0 and ok else 1
