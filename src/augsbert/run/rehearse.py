"""`augsbert rehearse TARGET...`: run every job of the targets' DAG on stand-ins, under `.rehearsal/`, in minutes.

The rehearsal is the workflow itself with `rehearse: true` (docs/guide/rehearsal.md): `snakemake --config
rehearse=true TARGET` does the same thing. With it the Snakefile moves its working directory to
`.rehearsal/` (augsbert.config.rehearsal.ROOT) before anything is read or written, and `prepare` (called by
workflow/rules/common.smk there) builds the stand-in models and cuts the datasets below it; Snakemake then plans
its own DAG of the targets and runs every job, each resolving its model references to stand-ins.

This command adds what a person wants around it: the jobs start as forks of a warm server (the libraries
imported once, augsbert.run.warm), every job runs even after one failed (`--keep-going`), and the end is one
line per job kind (`job_kind`: the stage and the options that choose its code path), OK or failed with its log,
then "N jobs of K kinds rehearsed in T s"; the exit status is 1 when any job failed or did not run.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import typing
from collections.abc import Callable
from pathlib import Path

from ..config import rehearsal
from ..config.load import deep_merge, prepare_config, read_config
from ..config.names import check_name
from ..config.yaml_files import SHIPPED_CONFIG
from ..data.standins import prepare_datasets, prepare_files
from ..errors import ConfigError
from ..models.standins import build_standins
from ..plan import Plan
from ..stages import stage as registered_stage
from ..stages.base import Stage
from ..store.artifacts import holder_text
from ..store.live_runs import RUNS_DIR, SNAKEMAKE_LOCKS, describe, live_runs, stop_hint
from ..store.model_refs import model_references, standin_kind
from ..store.processes import alive
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


def job_state(artifact: Path, log: Path, since: float | None = None) -> str:
    """'OK' (its artifact is there: a folder appears only once its job finished), 'failed' (its log was written, since
    `since` where given: a log a killed or earlier rehearsal left is not this rehearsal's failure) or 'not run'."""
    if artifact.is_dir():
        return "OK"
    try:
        written = log.stat().st_mtime
    except OSError:
        return "not run"
    return "failed" if since is None or written >= since else "not run"


def job_states(plan: Plan, names: list[str], keys: set[str] | None = None,
               since: float | None = None) -> dict[str, list[tuple[str, str, str]]]:
    """{job kind: [(key, 'OK' | 'failed' | 'not run', log path)]} of every stage job the experiments plan (or of the
    jobs `keys`), read from the rehearsal's root (the current directory); `since`: when the rehearsal started
    (`job_state`)."""
    references = _references()
    if keys is None:
        keys = experiment_jobs(plan, names)
    kinds: dict[str, list] = {}
    for key in sorted(keys):
        node = plan.nodes[key]
        log = Path("logs") / node.stage / f"{key}.log"
        state = job_state(Path(node.path), log, since)
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
    """A warm server (augsbert.run.warm_server) for the jobs of `threads` threads: Snakemake gives each job
    OMP_NUM_THREADS / MKL_NUM_THREADS = its threads, which a server must share to serve it (WARM_FIXED_ENV); a job of
    other threads (the one-thread data jobs) starts plainly."""
    path = folder / "warm.sock"
    env = {**env, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    server = subprocess.Popen([sys.executable, "-m", "augsbert.run.warm_server", str(path)], env=env,
                              stderr=open(folder / "warm_server.log", "w"), preexec_fn=_die_with_parent(signal.SIGTERM))
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


# One rehearsal at a time per root. `augsbert rehearse` holds an exclusive flock on LOCK_NAME in the root for as long
# as it lives and hands it to the Snakemake it starts (which thus holds it too, were it to outlive the command); the
# kernel drops it when both are gone, even by `kill -9`. A killed rehearsal once left Snakemake's lock files (the next
# one stopped with Snakemake's LockException), a log that read as a failure of the next rehearsal, and its
# temporary folder; now a rehearsal that finds the lock free (and no plain `snakemake --config rehearse=true` live
# in the root: augsbert.store.live_runs) removes what the stopped one left, and `augsbert rehearse --unlock` does
# only that.
LOCK_NAME = ".rehearse.lock"
TEMP_PREFIX = "augsbert-rehearse-"  # the warm server's socket folder, in the system's temporary folder (short paths)
OWNER = "owner.lock"  # in each such folder: held by the rehearsal that made it
LOCK_WAIT_S = 2.0  # a live rehearsal is waited for this long before the message
STOPPING_WAIT_S = 600.0  # a stopped one (its command killed) while its Snakemake finishes the jobs it was running


def hold_root(root: Path, wait: float = LOCK_WAIT_S, stopping_wait: float = STOPPING_WAIT_S) -> int:
    """Take the rehearsal lock of `root` (a descriptor, held until it is closed or the process ends) or raise
    ConfigError naming the live rehearsal and what to do. A rehearsal whose command has ended (killed) while its
    Snakemake finishes the jobs it was running (it got SIGINT: `_die_with_parent`) is waited for up to
    `stopping_wait` seconds, saying so; a live one up to `wait`."""
    root.mkdir(parents=True, exist_ok=True)
    lock = root / LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    start, told = time.monotonic(), False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                stopping = _holder_ended(fd)
                if time.monotonic() - start < (stopping_wait if stopping else wait):
                    if stopping and not told:
                        print(f"augsbert rehearse: waiting for a stopped rehearsal in {rehearsal.ROOT}/ to end (its "
                              "Snakemake finishes the jobs it was running)", file=sys.stderr, flush=True)
                        told = True
                    time.sleep(0.5)
                    continue
                holder, hint = holder_text(fd, lock)
                raise ConfigError(f"another rehearsal is running in {rehearsal.ROOT}/ ({holder}): wait for it to end, "
                                  f"or {hint or 'stop it'}, then run again") from None
            except OSError as err:
                if err.errno not in (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                return fd  # a file system without locks: nothing can be known of other rehearsals
        running = live_runs(root / RUNS_DIR)  # a plain `snakemake --config rehearse=true` in this root
        if running:
            raise ConfigError(f"a rehearsal is running in {rehearsal.ROOT}/ ({describe(running[0])}): wait for it "
                              f"to end, or stop it ({stop_hint(running[0])}), then run again")
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "since": dt.datetime.now().astimezone().isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _holder_ended(fd: int) -> bool:
    """Whether the `augsbert rehearse` that took the lock (its pid in the file, on this host) has ended: the lock is
    then held by the Snakemake it started, which is ending too."""
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "null")
        pid, host = int(info["pid"]), str(info["host"])
    except (OSError, ValueError, TypeError, KeyError):
        return False
    return host == socket.gethostname() and not alive(pid, host)


def clear_stopped(root: Path) -> list[str]:
    """Remove what stopped rehearsals left, once `hold_root` holds the lock (so none is running): Snakemake's lock
    files in `root` (as `snakemake --unlock` does) and the temporary folders of rehearsals that are gone. What was
    removed, as lines to print."""
    done = []
    locks = root / SNAKEMAKE_LOCKS
    if locks.is_dir() and any(locks.iterdir()):
        shutil.rmtree(locks)
        done.append(f"removed the lock files a stopped rehearsal left ({rehearsal.ROOT}/{SNAKEMAKE_LOCKS}/)")
    swept = sweep_temporary()
    if swept:
        done.append(f"removed {len(swept)} temporary folder(s) of stopped rehearsals ({', '.join(map(str, swept))})")
    return done


def sweep_temporary(folder: str | Path | None = None) -> list[Path]:
    """Remove this user's `augsbert-rehearse-*` folders in the temporary folder whose rehearsal is gone: its OWNER
    lock is free, or (a folder of an earlier version, without one) its warm server's socket answers no one."""
    folder = Path(folder or tempfile.gettempdir())
    gone = []
    for path in sorted(folder.glob(f"{TEMP_PREFIX}*")):
        try:
            if not path.is_dir() or path.is_symlink() or path.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if _folder_in_use(path):
            continue
        shutil.rmtree(path, ignore_errors=True)
        gone.append(path)
    return gone


def _folder_in_use(path: Path) -> bool:
    owner = path / OWNER
    if owner.is_file():
        try:
            fd = os.open(owner, os.O_RDONLY)
        except OSError:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except OSError:
            return True
        finally:
            os.close(fd)
    sock = path / "warm.sock"
    if not sock.exists():
        # no server was started there, or it was removed: the folder's age tells an ended rehearsal from one starting
        return time.time() - path.stat().st_mtime < 60
    probe = socket.socket(socket.AF_UNIX)
    try:
        probe.connect(str(sock))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def unlock(root: str | Path = rehearsal.ROOT) -> int:
    """`augsbert rehearse --unlock`: when no rehearsal is running in `root`, remove what stopped ones left."""
    root = Path(root)
    if not root.is_dir():
        print(f"augsbert rehearse: no {root}/ here: nothing to unlock")
        return 0
    fd = hold_root(root, wait=0, stopping_wait=0)
    try:
        done = clear_stopped(root)
    finally:
        os.close(fd)
    print("\n".join(f"augsbert rehearse: {line}" for line in done) if done
          else f"augsbert rehearse: nothing to unlock (no rehearsal is running in {root}/, and none left a lock)")
    return 0


def _die_with_parent(sig: int) -> Callable[[], None] | None:
    """A preexec_fn asking Linux to send `sig` to the child when this process ends, even by SIGKILL (Snakemake:
    SIGINT, which cancels its jobs and removes its lock files; the warm server: SIGTERM). None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    parent = os.getpid()
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child between fork and exec only calls it

    def preexec() -> None:
        # a command started in the background of a script (`&`) inherits SIGINT ignored, and so would the child
        signal.signal(sig, signal.SIG_DFL)
        prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent ended before the request took effect
            os.kill(os.getpid(), sig)

    return preexec


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
    held = hold_root(root)  # one rehearsal at a time; what a stopped one left is removed
    try:
        for line in clear_stopped(root):
            print(f"augsbert rehearse: {line}", file=sys.stderr)
        return _run(targets, configs, cores, warm, extra, every_kind, raw, config, root, held)
    finally:
        os.close(held)


def _run(targets, configs, cores, warm, extra, every_kind, raw, config, root: Path, held: int) -> int:
    """The rehearsal itself, `run`'s arguments and what it read, while this process holds the root's lock `held`
    (handed on to Snakemake)."""
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
    started = time.time()
    env = dict(os.environ)
    server = None
    with tempfile.TemporaryDirectory(prefix=TEMP_PREFIX) as scratch:
        owner = os.open(Path(scratch) / OWNER, os.O_RDWR | os.O_CREAT, 0o644)  # held while this rehearsal lives
        fcntl.flock(owner, fcntl.LOCK_EX)
        if warm:
            # the model stages' declared threads (augsbert.stages.base.Stage.threads), as Snakemake scales them
            server, socket_path = _warm_server(env, Path(scratch), min(Stage.threads, cores))
            if server.poll() is None:
                env[SOCKET_ENV] = str(socket_path)
        log_path = root / "rehearse.log"
        # a SIGTERM (or SIGHUP: the terminal closed) of this command ends Snakemake (and its jobs) and the server too,
        # as Ctrl-C does, and the temporary folder is removed; a SIGKILL cannot be caught: Snakemake and the server
        # then end by their parent-death signal, and the next rehearsal removes the folder (sweep_temporary)
        previous = {sig: signal.signal(sig, lambda *_: sys.exit(143)) for sig in (signal.SIGTERM, signal.SIGHUP)}
        try:
            with open(log_path, "w") as log:
                print(f"augsbert rehearse: {' '.join(command[1:])} (log: {log_path})", file=sys.stderr, flush=True)
                # Snakemake holds the rehearsal's lock too (pass_fds), so that one outliving this command is seen
                process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, pass_fds=(held,),
                                           preexec_fn=_die_with_parent(signal.SIGINT))
                try:
                    code = process.wait()
                except BaseException:  # Ctrl-C or SIGTERM: Snakemake stops its jobs, then this command ends
                    process.terminate()
                    process.wait()
                    raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if server is not None:
                server.terminate()
                server.wait()
            os.close(owner)
    seconds = time.perf_counter() - start
    here = os.getcwd()
    os.chdir(root)  # plan where the rehearsal ran: its data, its digests, its artifacts
    try:
        os.environ[rehearsal.STANDINS_ENV] = str(build_standins(STANDINS_DIR).resolve())
        plan = plan if every_kind else Plan(config)  # (every kind: the plan the jobs were chosen from)
        try:
            text, ok = summary(job_states(plan, target_experiments(plan, targets) if not every_kind else [],
                                          jobs if every_kind else None, since=started - 1), seconds)
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
