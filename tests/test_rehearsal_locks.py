"""Issue 56 R2: after a killed rehearsal the next one stopped with Snakemake's LockException, read the killed job's
log as a failure, and each kill left a temporary augsbert-rehearse-* folder; `augsbert rehearse --unlock` did not
exist. Now one rehearsal at a time holds .rehearsal/.rehearse.lock (its Snakemake too), a rehearsal that finds it free
removes what a stopped one left (as `--unlock` does), a killed one's Snakemake and warm server end with it, and only
logs written by this rehearsal read as failures. The kill itself, end to end, is measured in the issue's report."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import augsbert
from augsbert.run import rehearse
from augsbert.face.cli import main
from workflow_helpers import checkout

SRC = str(Path(augsbert.__file__).parents[1])


def _holder(lock: Path, pid: int) -> subprocess.Popen:
    """Another process holding the rehearsal lock `lock`, its file naming `pid` as the rehearsal's command."""
    info = json.dumps({"pid": pid, "host": socket.gethostname(), "since": "2026-11-29T08:00:00+00:00"})
    code = (f"import fcntl, os, sys; fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT); "
            f"fcntl.flock(fd, fcntl.LOCK_EX); os.ftruncate(fd, 0); os.pwrite(fd, {info!r}.encode(), 0); "
            "print('held', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "held\n"
    return proc


def test_r2_unlock_clears_what_a_killed_rehearsal_left_and_names_a_live_one(tmp_path, monkeypatch, capsys, request):
    checkout(tmp_path, ("config",))
    monkeypatch.chdir(tmp_path)
    import shutil
    import tempfile

    temp = Path(tempfile.mkdtemp(prefix="r2-"))  # short: a socket's path is at most 107 bytes (tmp_path under xdist)
    request.addfinalizer(lambda: shutil.rmtree(temp, ignore_errors=True))
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    locks = tmp_path / ".rehearsal" / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("artifacts/teacher/x-0123456789\n")  # Snakemake's, left by a kill -9
    stale = temp / "augsbert-rehearse-dead1"  # a killed rehearsal's: its owner lock free
    stale.mkdir(parents=True)
    (stale / rehearse.OWNER).write_text("")
    old = temp / "augsbert-rehearse-old22"  # an earlier version's (no owner lock): its server's socket is dead
    old.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(old / "warm.sock"))
    server.close()
    live = temp / "augsbert-rehearse-live3"  # a running rehearsal's: left alone
    live.mkdir()
    held = os.open(live / rehearse.OWNER, os.O_RDWR | os.O_CREAT)
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        assert main(["rehearse", "--unlock"]) == 0
        out = capsys.readouterr().out
        assert out == ("augsbert rehearse: removed the lock files a stopped rehearsal left (.rehearsal/.snakemake/"
                       f"locks/)\naugsbert rehearse: removed 2 temporary folder(s) of stopped rehearsals ({stale}, {old})\n")
        assert not locks.exists() and not stale.exists() and not old.exists() and live.is_dir()
        assert main(["rehearse", "--unlock"]) == 0
        assert capsys.readouterr().out == ("augsbert rehearse: nothing to unlock (no rehearsal is running in "
                                           ".rehearsal/, and none left a lock)\n")
    finally:
        os.close(held)
    # a live rehearsal: named, with what to do, and nothing of it touched (--unlock, or a rehearsal, before Snakemake)
    locks.mkdir()
    other = _holder(tmp_path / ".rehearsal" / rehearse.LOCK_NAME, os.getpid())
    try:
        for command in (["rehearse", "--unlock"], ["rehearse", "results/demo_zeroshot.json"]):
            assert main(command) == 2
            err = capsys.readouterr().err
            assert err == (f"augsbert rehearse: error: another rehearsal is running in .rehearsal/ (pid {os.getpid()} "
                           f"on host {socket.gethostname()}, since 2026-11-29T08:00:00+00:00): wait for it to end, or "
                           f"stop it (`kill {os.getpid()}`), then run again\n"), err
        assert locks.is_dir() and not (tmp_path / ".rehearsal" / "rehearse.log").exists()
    finally:
        other.stdin.close()
        other.wait()


def test_r2_a_stopped_rehearsal_is_waited_for_and_its_stale_logs_are_no_failures(tmp_path, capsys):
    """The command killed, its Snakemake (which holds the lock too) finishes the jobs it was running: the next
    rehearsal waits for it, then starts; a log that rehearsal did not write is `not run`, not `failed`."""
    root = tmp_path / ".rehearsal"
    root.mkdir()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # the pid of an `augsbert rehearse` that has ended
    other = _holder(root / rehearse.LOCK_NAME, ended.pid)
    start = time.monotonic()
    releaser = subprocess.Popen([sys.executable, "-c", f"import os, time; time.sleep(1.5); os.kill({other.pid}, 9)"])
    fd = rehearse.hold_root(root, wait=0, stopping_wait=60)
    os.close(fd)
    took = time.monotonic() - start
    releaser.wait()
    other.wait()
    assert 1.0 < took < 30, took
    assert "waiting for a stopped rehearsal in .rehearsal/ to end (its Snakemake finishes the jobs it was running)" \
        in capsys.readouterr().err
    artifact, log = tmp_path / "artifacts" / "teacher" / "t-0123456789", tmp_path / "logs" / "t.log"
    log.parent.mkdir()
    log.write_text("killed\n")
    os.utime(log, (time.time() - 100, time.time() - 100))
    assert rehearse.job_state(artifact, log, since=time.time() - 10) == "not run"
    assert rehearse.job_state(artifact, log) == "failed"
    os.utime(log)
    assert rehearse.job_state(artifact, log, since=time.time() - 10) == "failed"
    artifact.mkdir(parents=True)
    assert rehearse.job_state(artifact, log, since=time.time() - 10) == "OK"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death signals are Linux's")
def test_r2_snakemake_and_the_warm_server_end_with_a_killed_rehearsal(tmp_path):
    """`kill -9` of `augsbert rehearse` left its Snakemake running (holding Snakemake's lock) and its warm server:
    its children now get SIGINT (Snakemake: cancel, unlock) or SIGTERM (the server) when it ends, also when it was
    started in the background of a script (SIGINT ignored)."""
    code = ("import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
            "from augsbert.run.rehearse import _die_with_parent; "
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
            "preexec_fn=_die_with_parent(signal.SIGINT)); print(child.pid, flush=True); child.wait()")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": SRC})
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    for _ in range(100):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child outlived its killed parent")
