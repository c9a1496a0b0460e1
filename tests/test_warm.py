"""augsbert.run.warm and augsbert.run.warm_server: commands run in forks of a warm server give what a plain start gives (output, streams, exit
status, artifacts); signals reach the job, a dead command's job is ended, as is a dead keeper's (and the command
then runs plainly); no server or another environment: a plain start; one server per socket; Snakemake's thread
variables applied in the fork; the former module path points at the new one."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from augsbert.run.warm import SOCKET_ENV, THREAD_ENV
from augsbert.scheduling.progress import PROGRESS_FD_ENV
from conftest import REPO

AUGSBERT = str(Path(sys.executable).with_name("augsbert"))

# imported by the server only: a command `sleep-for-test PIDFILE` that writes its pid and sleeps (a long job);
# a plain start does not know it (argparse: exit 2), which tells a served command from a plain one
HELPER = '''
import os, time
import augsbert.face.cli as cli
_main = cli.main
def main(argv=None):
    if argv and argv[0] == "sleep-for-test":
        open(argv[1], "w").write(str(os.getpid()))
        time.sleep(60)
        return 0
    if argv and argv[0] == "threads-for-test":  # the thread pools' sizes the job runs with
        import json, threadpoolctl, torch
        pools = {p["user_api"]: p["num_threads"] for p in threadpoolctl.threadpool_info()}
        print(json.dumps({"torch": torch.get_num_threads(), **pools}))
        return 0
    if argv and argv[0] == "progress-for-test":  # a line on the progress console (descriptor AUGSBERT_PROGRESS_FD)
        os.write(int(os.environ["AUGSBERT_PROGRESS_FD"]), b"progress line\\n")
        return 0
    if argv and argv[0] == "fail-for-test":  # an exit handler, then an uncaught error
        import atexit
        atexit.register(lambda: open(argv[1], "w").write("exit handler ran"))
        raise RuntimeError("a bug in a served command")
    return _main(argv)
cli.main = main
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("warm")
    (tmp / "warm_test_helper.py").write_text(HELPER)
    path = str(tmp / "warm.sock")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp), str(REPO / "src")]),
           "AUGSBERT_WARM_PRELOAD": "augsbert.face.cli,torch,threadpoolctl,warm_test_helper"}
    for name in (SOCKET_ENV, PROGRESS_FD_ENV, *THREAD_ENV):  # as from a plain shell
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "augsbert.run.warm_server", path], env=env, stderr=subprocess.PIPE,
                            text=True)
    assert "serving" in proc.stderr.readline()
    yield {"path": path, "env": env, "tmp": tmp, "proc": proc}
    proc.terminate()
    proc.wait(timeout=30)
    assert not os.path.exists(path)  # the server removes its socket


def command(server, *args, warm=True, env=None, **kwargs):
    env = {**server["env"], **(env or {})}
    env.pop("AUGSBERT_WARM_PRELOAD")
    if warm:
        env[SOCKET_ENV] = server["path"]
    return subprocess.run([AUGSBERT, *args], env=env, capture_output=True, text=True, **kwargs)


def test_a_served_command_gives_the_plain_output_streams_and_status(server):
    for args in (["list", "experiments"], ["plan", "--experiment", "no_such_experiment"]):
        served, plain = command(server, *args, cwd=REPO), command(server, *args, cwd=REPO, warm=False)
        assert (served.returncode, served.stdout, served.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert plain.returncode == 2 and "unknown experiment" in plain.stderr
    assert command(server, "sleep-for-test", "/dev/null", warm=False).returncode == 2  # unknown to a plain start


def test_a_served_stage_writes_the_plain_artifact(server, tmp_path):
    for name, warm in (("served", True), ("plain", False)):
        (tmp_path / name).mkdir()
        done = command(server, "data", "--config", str(REPO / "config" / "config.yaml"), "--experiment",
                       "demo_zeroshot", cwd=tmp_path / name, warm=warm)
        assert done.returncode == 0, done.stderr
    served = sorted((tmp_path / "served").rglob("*.parquet"))
    assert served and [p.relative_to(tmp_path / "served") for p in served] == \
        [p.relative_to(tmp_path / "plain") for p in sorted((tmp_path / "plain").rglob("*.parquet"))]
    for path in served:
        pd.testing.assert_frame_equal(pd.read_parquet(path), pd.read_parquet(tmp_path / "plain" /
                                                                              path.relative_to(tmp_path / "served")))


def start_sleeper(server, tmp_path):
    env = {**server["env"], SOCKET_ENV: server["path"]}
    env.pop("AUGSBERT_WARM_PRELOAD")
    pidfile = tmp_path / "job.pid"
    proc = subprocess.Popen([AUGSBERT, "sleep-for-test", str(pidfile)], env=env)
    for _ in range(300):
        if pidfile.exists() and pidfile.read_text():
            return proc, int(pidfile.read_text())
        time.sleep(0.05)
    raise AssertionError("the served job never started")


def gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_sigterm_reaches_the_job_and_the_status_says_so(server, tmp_path):
    proc, job = start_sleeper(server, tmp_path)
    assert job != proc.pid  # the job runs in the server's fork, not in the command's process
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM  # as a shell reports a job killed by SIGTERM
    assert gone(job, 10)


def test_a_killed_command_takes_its_job_with_it(server, tmp_path):
    proc, job = start_sleeper(server, tmp_path)
    proc.kill()  # SIGKILL: the command cannot pass anything on; its keeper sees the socket close
    proc.wait(timeout=10)
    assert gone(job, 10)


def test_no_server_or_another_environment_starts_plainly(server, tmp_path):
    # another value of a variable read at import (here HF_HUB_OFFLINE): refused, so a plain start (exit 2)
    refused = command(server, "sleep-for-test", str(tmp_path / "x"), env={"HF_HUB_OFFLINE": "maybe"})
    assert refused.returncode == 2 and "invalid choice" in refused.stderr
    absent = command(server, "list", "experiments", env={SOCKET_ENV: str(tmp_path / "none.sock")}, cwd=REPO)
    assert absent.returncode == 0 and "demo_zeroshot" in absent.stdout


def test_an_uncaught_error_ends_as_in_a_plain_process(server, tmp_path):
    failed = command(server, "fail-for-test", str(tmp_path / "handler"))
    assert failed.returncode == 1
    assert "Traceback" in failed.stderr and "RuntimeError: a bug in a served command" in failed.stderr
    assert (tmp_path / "handler").read_text() == "exit handler ran"


def test_snakemake_thread_variables_are_served_and_applied(server):
    """F6: a server started from a plain shell serves a workflow job, whose environment Snakemake gives the job's
    threads (shell.py: OMP_NUM_THREADS, MKL_NUM_THREADS, ... = threads); the fork sizes its pools by them."""
    snakemake_env = {name: "1" for name in THREAD_ENV}
    served = command(server, "threads-for-test", env=snakemake_env)
    assert served.returncode == 0, served.stderr  # a plain start does not know the command (exit 2)
    pools = json.loads(served.stdout)
    assert pools["torch"] == 1 and pools.get("openmp", 1) == 1 and pools.get("blas", 1) == 1
    two = json.loads(command(server, "threads-for-test", env={**snakemake_env, "OMP_NUM_THREADS": "2"}).stdout)
    assert two["torch"] == 2


def test_a_second_server_on_the_socket_says_so_and_exits(server):
    """F5: the second server neither takes the socket nor, when it ends, removes the first one's."""
    second = subprocess.run([sys.executable, "-m", "augsbert.run.warm_server", server["path"]], env=server["env"],
                            capture_output=True, text=True, timeout=60)
    assert second.returncode == 1
    assert second.stderr.strip() == (f"augsbert.run.warm: error: another warm server (pid {server['proc'].pid}) "
                                     f"serves {server['path']}; this one exits")
    assert os.path.exists(server["path"])
    assert command(server, "threads-for-test").returncode == 0  # the first one still serves


def test_a_killed_keeper_takes_its_job_and_the_command_runs_plainly(server, tmp_path):
    """F7: SIGKILL to the keeper (the server's fork that watches the job) ends the job too; the command then
    starts plainly (here: the test command unknown to a plain start, exit 2) instead of failing the rule."""
    proc, job = start_sleeper(server, tmp_path)
    keeper = int(Path(f"/proc/{job}/stat").read_text().rpartition(")")[2].split()[1])
    assert keeper not in (proc.pid, server["proc"].pid)
    os.kill(keeper, signal.SIGKILL)
    assert gone(job, 30)
    assert proc.wait(timeout=30) == 2  # the plain start of `sleep-for-test` (argparse)


def test_the_progress_console_reaches_the_served_job(server, tmp_path):
    """Progress lines in warm mode: the console descriptor the rule keeps (`3>&2`) is handed over as well."""
    env = {**server["env"], SOCKET_ENV: server["path"], PROGRESS_FD_ENV: "3"}
    env.pop("AUGSBERT_WARM_PRELOAD")
    console = tmp_path / "console"
    done = subprocess.run(f"{AUGSBERT} progress-for-test 3>{console} >/dev/null 2>&1", shell=True, env=env)
    assert done.returncode == 0 and console.read_text() == "progress line\n"


def test_the_former_module_path_points_at_the_new_one():
    """F1: `python -m augsbert.warm_server` (the docs' earlier name): one line and exit status 2."""
    old = subprocess.run([sys.executable, "-m", "augsbert.warm_server", "x.sock"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert old.returncode == 2
    assert old.stderr == ("augsbert: error: augsbert.warm_server moved: start the warm server with "
                          "`python -m augsbert.run.warm_server SOCKET_PATH`\n")


def test_which_runs_get_a_warm_server_and_its_start_and_stop(monkeypatch):
    """Warm by default for a local run of two or more stage jobs (workflow/Snakefile onstart); the server the run
    starts serves at a private socket and is stopped, its folder removed, when the run ends."""
    from augsbert.run import warm

    monkeypatch.delenv(SOCKET_ENV, raising=False)
    monkeypatch.delenv(warm.WARM_ENV, raising=False)
    assert warm.wanted(local=True, deployment=False, stage_jobs=2) is None
    assert warm.wanted(local=False, deployment=False, stage_jobs=9) == "jobs run on a cluster"
    assert warm.wanted(local=True, deployment=True, stage_jobs=9) == "jobs run in their own software environments"
    assert warm.wanted(local=True, deployment=False, stage_jobs=1) == "1 stage job(s)"
    monkeypatch.setenv(warm.WARM_ENV, "0")
    assert warm.wanted(local=True, deployment=False, stage_jobs=9) == "AUGSBERT_WARM=0"
    monkeypatch.delenv(warm.WARM_ENV)
    monkeypatch.setenv("AUGSBERT_WARM_PRELOAD", "augsbert.face.cli")  # a quick server
    path = warm.start_for_run()
    try:
        assert os.environ[SOCKET_ENV] == path and len(path.encode()) < 108
        assert warm.wanted(local=True, deployment=False, stage_jobs=9).startswith(SOCKET_ENV)  # one per run
        for _ in range(400):
            if os.path.exists(path):
                break
            time.sleep(0.05)
        assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700" and os.path.exists(path)
    finally:
        warm.stop_for_run()
    assert SOCKET_ENV not in os.environ and not os.path.exists(os.path.dirname(path))


def _keeper_of(job: int) -> int:
    return int(Path(f"/proc/{job}/stat").read_text().rpartition(")")[2].split()[1])


@pytest.mark.parametrize("keeper_signal", [signal.SIGINT, signal.SIGKILL], ids=["keeper-sigint", "keeper-sigkill"])
def test_i1_a_ctrl_c_ends_the_served_job_and_never_restarts_it_plainly(server, tmp_path, keeper_signal):
    """Issue 56 I1: a terminal's Ctrl-C reaches the command and the server's keeper (one process group). The keeper
    died of it, and the command, seeing its keeper lost, started the job again plainly: a training job went on in
    the background after Ctrl-C. Now the keeper ignores SIGINT and reports the job's end; a keeper lost after a
    forwarded signal (here SIGKILL) ends the command as interrupted, without a second start (a plain start of the
    test command would exit 2)."""
    proc, job = start_sleeper(server, tmp_path)
    keeper = _keeper_of(job)
    proc.send_signal(signal.SIGINT)
    os.kill(keeper, keeper_signal)
    assert proc.wait(timeout=30) == 128 + signal.SIGINT
    assert gone(job, 10)


def test_a_served_command_imports_only_the_socket_client_before_it_hands_over():
    """The entry point (augsbert.face.launch) imports neither the command line nor the registry, so a job of a
    warm run costs the server's fork, not a second import of the planner and the stages (~0.3 s of CPU each)."""
    code = ("import json, sys, augsbert.face.launch\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('augsbert'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert json.loads(loaded.stdout) == ["augsbert", "augsbert.face", "augsbert.face.launch", "augsbert.run",
                                   "augsbert.run.warm", "augsbert.scheduling", "augsbert.scheduling.progress", "augsbert.store",
                                   "augsbert.store.processes"]  # the last: whether a pid lives (os, socket only)


def test_the_folder_of_a_killed_run_s_server_is_removed_by_the_next_run(tmp_path, monkeypatch):
    """Issue 64: each `kill -9` of a run left its warm server's folder in the temporary folder (the server ends with its
    run, and no hook ran to remove the folder), and no later run removed it. The next run's start removes the
    folders of runs that are gone, and leaves a live run's and another user's kind of leftovers alone."""
    import tempfile

    from augsbert.run import warm

    # a short temporary folder: under pytest-xdist tmp_path (.../popen-gw1/<test name>0/) makes the server's socket
    # path longer than a Unix socket may be (108 bytes), the server never starts, and the child waited forever
    tmp_path = Path(tempfile.mkdtemp(prefix="aw-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv(SOCKET_ENV, raising=False)
    env = {**os.environ, "AUGSBERT_WARM_PRELOAD": "augsbert.face.cli", "TMPDIR": str(tmp_path),
           "PYTHONPATH": str(REPO / "src")}
    code = ("import os, time; from augsbert.run import warm; path = warm.start_for_run()\n"
            "for _ in range(1200):\n    if path and os.path.exists(path): break\n    time.sleep(0.05)\n"
            "print(path, flush=True); time.sleep(600)")
    run = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    left = Path(run.stdout.readline().strip()).parent
    run.kill()  # SIGKILL: stop_for_run never runs; the server sees its parent gone and ends
    run.wait()
    for _ in range(200):  # the server has ended when its socket's lock file is gone
        if not Path(warm.lock_path(str(left / "warm.sock"))).exists():
            break
        time.sleep(0.05)
    assert left.is_dir()
    recent = tmp_path / "augsbert-warm-ab3de_gh"  # an earlier version's name (no pid): kept while recent
    recent.mkdir()
    monkeypatch.setenv("AUGSBERT_WARM_PRELOAD", "augsbert.face.cli")
    path = warm.start_for_run()
    try:
        assert not left.exists() and recent.is_dir()  # the killed run's folder removed
        assert left.name.startswith(f"augsbert-warm-{run.pid}-")  # named by its run
        assert Path(path).parent.name.startswith(f"augsbert-warm-{os.getpid()}-")
        os.utime(recent, (time.time() - 3600, time.time() - 3600))
        assert warm.sweep_left_folders() == [str(recent)] and Path(path).parent.is_dir()  # this run's is kept
    finally:
        warm.stop_for_run()
        shutil.rmtree(tmp_path, ignore_errors=True)
