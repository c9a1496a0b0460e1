"""Helpers for the tests that drive the workflow through the `snakemake` command line.

A test works on its own copy of the workflow (a "checkout" in a temporary directory) and runs
`python -m snakemake` in a subprocess, so `--config` parsing, the workflow profile and exit codes are
the ones a user gets. Jobs run on the CPU and never contact the hub.

The command lines run in children of one fork server per test process (snakemake_server.py), which
imports Snakemake and the package once instead of once per call.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from conftest import REPO

CHECKOUT = ("workflow", "config", "profiles")


def checkout(root: Path, items: tuple[str, ...] = CHECKOUT) -> Path:
    """Copy the workflow's files (`items` of the repository) into `root`, as a fresh clone has them."""
    root.mkdir(parents=True, exist_ok=True)
    for item in items:
        src = REPO / item
        if src.is_dir():
            shutil.copytree(src, root / item, symlinks=True)
        else:
            shutil.copy2(src, root / item)
    return root


def place_standins(project: Path, built: Path) -> Path:
    """Copy a build of the stand-in models (conftest's `standins`) into `project`'s rehearsal root, at the path
    where a rehearsal looks for its recipe's build (.rehearsal/standins/<recipe key>/): one build per test
    process instead of one per rehearsing test. A copy, not a link: a rehearsal writes its model references'
    kinds into that folder."""
    from augsbert.config.rehearsal import ROOT
    from augsbert.run.rehearse import STANDINS_DIR

    target = project / ROOT / STANDINS_DIR / built.name
    shutil.copytree(built, target)
    return target


def keep_experiments(workdir: Path, *names: str) -> None:
    """Cut the checkout's config/config.yaml to the experiments `names` and no grids.

    For tests of one small experiment's planning: every dry run otherwise validates and plans the
    ~200 experiments of the shipped grids, which the grid tests check on their own. Datasets and
    defaults stay as shipped, and an artifact key depends only on its experiment's settings, so the
    jobs planned for `names` are those the full config plans.
    """
    path = workdir / "config" / "config.yaml"
    config = yaml.safe_load(path.read_text())
    missing = set(names) - set(config["experiments"])
    assert not missing, f"not in the shipped config: {sorted(missing)}"
    config["experiments"] = {name: config["experiments"][name] for name in names}
    config["grids"] = {}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    shutil.rmtree(workdir / "config" / "grids", ignore_errors=True)  # the shipped grids (config/grids/*.yaml)


_server: subprocess.Popen | None = None


def _fork_server() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("snakemake_server.py"))],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        atexit.register(_server.stdin.close)  # the server ends when its input does
    return _server


def _reply(server: subprocess.Popen, timeout: float) -> dict:
    if not select.select([server.stdout], [], [], timeout)[0]:
        raise TimeoutError
    line = server.stdout.readline()
    assert line, "the snakemake fork server stopped"
    return json.loads(line)


BASE_ENV = {"HF_HUB_OFFLINE": "1", "AUGSBERT_DEVICE": "cpu"}
_warm: dict = {}


def _warm_server() -> dict[str, str]:
    """AUGSBERT_WARM_SOCKET of one warm server (augsbert.run.warm) for every workflow run of this test process.

    A local run of two or more stage jobs starts a server of its own, which imports torch, transformers and
    sentence-transformers (seconds of CPU, and its first jobs start cold meanwhile): dozens of runs in the suite.
    A run given a server starts none and its jobs fork from that one (augsbert.run.warm.wanted); each job is
    still a fresh fork with the command's directory and environment. Started on first use, with the
    environment the calls below give Snakemake, so it serves their jobs; ended with the test process. {} while the
    environment differs from the one it started with (a test's monkeypatch.setenv): such a run starts its own, as
    before, so a variable a library reads while it is imported is never the server's."""
    from augsbert.run.warm import SOCKET_ENV

    now = {k: v for k, v in {**os.environ, **BASE_ENV}.items() if k != "PYTEST_CURRENT_TEST"}
    if "path" in _warm and now != _warm["env"]:
        return {}
    if "path" not in _warm:
        folder = tempfile.mkdtemp(prefix="augsbert-warm-tests-")
        path = os.path.join(folder, "warm.sock")
        with open(os.path.join(folder, "server.log"), "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "augsbert.run.warm_server", path],
                                    env=now, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

        def stop() -> None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            shutil.rmtree(folder, ignore_errors=True)

        atexit.register(stop)
        _warm.update(path=path, env=now)
    return {SOCKET_ENV: _warm["path"]}


def snakemake(workdir: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = 900) -> subprocess.CompletedProcess:
    """`python -m snakemake *args` in `workdir`, as a user runs it (in a fork of the server, see above). A call
    without an `env` of its own, unless warm starts are off, has its jobs served by the test process's warm
    server (`_warm_server`)."""
    warm = {}
    if not env and os.environ.get("AUGSBERT_WARM", "1") != "0" and "-n" not in args and "--dry-run" not in args:
        warm = _warm_server()
    env = {**os.environ, **BASE_ENV, **warm, **(env or {})}
    server = _fork_server()
    with tempfile.TemporaryDirectory() as streams:
        out, err = Path(streams) / "stdout", Path(streams) / "stderr"
        request = {"args": list(args), "cwd": str(workdir), "env": env, "stdout": str(out), "stderr": str(err)}
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        pid = _reply(server, 60)["pid"]
        try:
            returncode = _reply(server, timeout)["returncode"]
        except TimeoutError:
            os.killpg(pid, signal.SIGKILL)  # the call and the jobs it started (its own process group)
            _reply(server, 60)
            raise subprocess.TimeoutExpired(["snakemake", *args], timeout) from None
        return subprocess.CompletedProcess(["snakemake", *args], returncode, out.read_text(), err.read_text())


def job_stats(out: str) -> dict[str, int]:
    """The jobs Snakemake schedules, by rule, from the "Job stats" table it prints before the first job
    ({} when nothing is to be done)."""
    if "Nothing to be done" in out:
        return {}
    lines = out[out.index("Job stats:"):].splitlines()[3:]
    jobs = {}
    for line in lines:
        name, count = line.split()
        if name == "total":
            return jobs
        jobs[name] = int(count)
    raise AssertionError(out)


def planned(workdir: Path, *args: str) -> dict[str, int]:
    """Jobs a dry run schedules, by rule ({} when nothing is to be done)."""
    proc = snakemake(workdir, "-n", *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return job_stats(out)


# Two jobs at a time. A tiny-model job spends most of its seconds starting Python and importing torch
# and transformers, on one core, so two independent jobs overlap on a 2-core machine; without GPUs the
# workflow holds model jobs to one at a time (`gpu=1`, augsbert/scheduling/gpus.py), which would hold every model
# job to one slot here. `--resources=gpu=2` is one word: the option takes several values and would read a
# target after it as one more.
JOB_SLOTS = ("--cores", "4", "--resources=gpu=2")


def run(workdir: Path, *args: str) -> dict[str, int]:
    """Run the workflow; return the jobs it scheduled, by rule, as `planned` gives them.

    A run prints the same table as a dry run before it starts, so a test that checks what a run
    schedules and then runs it needs one Snakemake call, not two.
    """
    proc = snakemake(workdir, *JOB_SLOTS, *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    return job_stats(out)
