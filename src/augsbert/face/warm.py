"""A warm start for `augsbert` commands: one process imports the libraries once, each command runs in a fork.

A model job spends seconds importing torch, transformers and sentence-transformers before its first step
(docs/performance.md, "Job start"). `python -m augsbert.face.warm_server PATH` (augsbert/face/warm_server.py: the
server's side; this module is the command's) imports them once (no CUDA initialised:
it never touches a device), then serves a Unix socket at PATH. An `augsbert` command started with
`AUGSBERT_WARM_SOCKET=PATH` in its environment hands itself to it (`run`): it sends its arguments, working
directory and environment, and passes its three standard streams as file descriptors, so the job reads and
writes exactly what the command would (a rule's `>> log 2>&1` included). The server forks a keeper per
command, and the keeper forks the job in a session of its own; the job takes the command's directory,
environment and streams and runs `augsbert.face.cli.main`, as a fresh `augsbert` would. The keeper reports that
it accepted the command, the job's pid, then its exit status; the command exits with it. A SIGTERM / SIGINT / SIGHUP of the command is
passed on to the job's process group; if the command itself dies, the keeper sees its socket close and
terminates the job, so no job outlives its command.

Plain start as the fallback: where no server answers at PATH (not started, gone, another machine), the
command runs itself as before (also where the server refuses it, or closes before accepting it). Once the
command has been accepted there is no second start: a keeper that vanishes without a status ends the command
with exit status 1 and a message.

What a fork cannot take from the command: environment variables that a library reads while it is imported
(e.g. `HF_HUB_OFFLINE`, `OMP_NUM_THREADS`) keep the server's values, and the server serves only commands whose
values of WARM_FIXED_ENV equal its own (the others start plainly). Start the server with the environment the
run's jobs get (benchmarks/bench_headline.py --warm does).
"""

from __future__ import annotations

import array
import json
import os
import signal
import socket
import struct
import sys

from ..scheduling.progress import PROGRESS_FD_ENV

SOCKET_ENV = "AUGSBERT_WARM_SOCKET"
# read while libraries are imported: a command whose values differ is not served (it starts plainly)
WARM_FIXED_ENV = ("HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "OMP_NUM_THREADS",
                  "MKL_NUM_THREADS", "PYTHONHASHSEED", "PYTHONPATH")


def send_line(conn: socket.socket, message: dict) -> None:
    conn.sendall((json.dumps(message) + "\n").encode())


def read_lines(conn: socket.socket):
    buffer = b""
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield json.loads(line)


# ---- the command's side -------------------------------------------------------------------------------------

def run(argv: list[str], path: str | None = None) -> int | None:
    """Run `augsbert argv` in a fork of the warm server at `path` ($AUGSBERT_WARM_SOCKET): its exit status, or
    None where no server takes it (the caller then runs the command itself)."""
    path = path or os.environ.get(SOCKET_ENV)
    if not path:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        # only a server of this user gets the environment and the streams (a stale path in a shared folder
        # could be bound by anyone); another owner: run the command here instead
        uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
        if uid != os.getuid():
            conn.close()
            return None
        # the progress lines' descriptor (augsbert.scheduling.progress) is not among the streams handed over
        env = {k: v for k, v in os.environ.items() if k not in (SOCKET_ENV, PROGRESS_FD_ENV)}
        request = (json.dumps({"argv": argv, "cwd": os.getcwd(), "env": env}) + "\n").encode()
        conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        replies = read_lines(conn)
        first = next(replies, None)
    except OSError:
        conn.close()
        return None
    if first is None or "refused" in first:  # not served (another environment, no keeper): nothing was started
        conn.close()
        return None
    try:  # accepted: from here on the job may run, so no second start
        pid = (next(replies, None) or {}).get("pid")
    except OSError:
        pid = None
    if pid is None:
        conn.close()
        print(f"augsbert: error: the warm server at {path} accepted the command but reported no job",
              file=sys.stderr)
        return 1

    def forward(signum, frame):
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:  # the job has not made its own group yet
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        status = next(replies, None)
    except OSError:
        status = None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        conn.close()
    if status is None:
        print(f"augsbert: error: the warm server at {path} lost job {pid} before it reported an exit status",
              file=sys.stderr)
        return 1
    code = status["returncode"]
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports it
