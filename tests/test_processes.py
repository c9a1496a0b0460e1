"""Whether a recorded process is alive (augsbert.store.processes): the one answer the artifact and rehearsal locks,
the estimates files, the GPU ledger and the warm jobs read (issue 66)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from augsbert.store.processes import alive, start_time


def _exited(seconds: float = 10) -> subprocess.Popen:
    """A child that has exited and is not reaped yet (a zombie)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return child
        time.sleep(0.02)
    raise AssertionError("the child did not exit")


def test_this_process_lives_and_an_ended_one_does_not():
    assert alive(os.getpid()) and alive(os.getpid(), socket.gethostname(), start_time(os.getpid()))
    child = _exited()
    try:
        assert not alive(child.pid)  # a zombie: ended, its exit status not read yet
    finally:
        child.wait()
    assert not alive(child.pid)  # reaped: no such process (unless the pid was taken again this instant)


def test_a_reused_pid_another_host_and_a_process_group_are_told_apart():
    assert start_time(os.getpid()) is not None  # Linux: /proc is there
    assert not alive(os.getpid(), started="0")  # this pid, but not the process that was recorded with it
    assert alive(2**22 + 1, host=socket.gethostname() + ".elsewhere")  # another host's pid says nothing here
    assert not alive(0) and not alive(-1)  # groups, not processes: never signalled
