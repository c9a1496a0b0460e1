"""A warm start for `augsbert` commands: one process imports the libraries once, each command runs in a fork.

A model job spends seconds importing torch, transformers and sentence-transformers before its first step
(docs/performance.md, "Job start"). `python -m augsbert.run.warm_server PATH` (augsbert/run/warm_server.py: the
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
command has been accepted, a keeper that vanishes without a status takes its job with it (the job ends with
its keeper, `PR_SET_PDEATHSIG`); the command waits for the job to be gone, says so in one line and runs itself
plainly, so a killed warm process costs no result. A job still alive after KILL_GRACE_S: exit status 1 and a
message (never two jobs writing one artifact).

One server per socket: the server holds `PATH.lock` while it serves; a second one started at the same PATH
says so and exits with status 1 (it never takes the first one's socket).

What a fork cannot take from the command: environment variables that a library reads while it is imported
(e.g. `HF_HUB_OFFLINE`) keep the server's values, and the server serves only commands whose values of
WARM_FIXED_ENV equal its own (the others start plainly). The thread variables Snakemake sets for each job
(THREAD_ENV: OMP_NUM_THREADS = the job's threads, ...) are applied again in the fork (threadpoolctl and
`torch.set_num_threads`), so a server started from a plain shell serves a workflow's jobs.

Warm by default in a local workflow run (start_for_run / stop_for_run, called by workflow/Snakefile's hooks):
docs/performance.md, "Warm job starts".
"""

from __future__ import annotations

import array
import atexit
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..scheduling.progress import PROGRESS_FD_ENV
from ..store.processes import alive

SOCKET_ENV = "AUGSBERT_WARM_SOCKET"
# read while libraries are imported: a command whose values differ is not served (it starts plainly)
WARM_FIXED_ENV = ("HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_CACHE", "PYTHONHASHSEED", "PYTHONPATH")
# set by Snakemake per job (its threads): applied again in the job's fork (augsbert.run.warm_server.thread_limits)
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
              "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
KILL_GRACE_S = 30.0  # how long a command waits for the job of a lost keeper to end (a loaded machine)


def lock_path(path: str) -> str:
    """The file a warm server serving the socket `path` holds locked (one server per socket)."""
    return path + ".lock"


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
        # the console of the progress lines (augsbert.scheduling.progress), where the command has it open, is
        # handed over as a fourth stream
        fds, progress = [0, 1, 2], os.environ.get(PROGRESS_FD_ENV, "")
        if progress.isdigit() and _is_open(int(progress)):
            fds.append(int(progress))
        env = {k: v for k, v in os.environ.items() if k != SOCKET_ENV and (k != PROGRESS_FD_ENV or len(fds) == 4)}
        request = (json.dumps({"argv": argv, "cwd": os.getcwd(), "env": env}) + "\n").encode()
        conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
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
    if pid is None:  # the keeper died before it reported a job: none runs (it waits for that report)
        conn.close()
        print(f"augsbert: warning: the warm server at {path} lost the command before it started it; running it "
              "in a plain start", file=sys.stderr, flush=True)
        return None

    forwarded = []

    def forward(signum, frame):
        forwarded.append(signum)
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
    if status is None and forwarded:  # stopped on purpose (Ctrl-C: the keeper got it too): ended, not restarted
        _ended(pid, KILL_GRACE_S)
        return 128 + forwarded[0]
    if status is None:  # the keeper died: its job ends with it (warm_server._die_with); then a plain start
        if _ended(pid, KILL_GRACE_S):
            print(f"augsbert: warning: the warm server at {path} lost job {pid}; running the command again in "
                  "a plain start", file=sys.stderr, flush=True)
            return None
        print(f"augsbert: error: the warm server at {path} lost job {pid} before it reported an exit status",
              file=sys.stderr)
        return 1
    code = status["returncode"]
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell reports it


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _ended(pid: int, within: float) -> bool:
    """Whether process `pid` is gone (or a zombie nobody reaped yet) within `within` seconds."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


# ---- warm by default in a local workflow run -----------------------------------------------------------------

WARM_ENV = "AUGSBERT_WARM"  # 0: no warm server for the run (every job starts plainly)
MIN_JOBS = 2  # a run of fewer stage jobs gains nothing from a server (it would import the libraries once more)
_started: dict = {}


def wanted(local: bool, deployment: bool, stage_jobs: int) -> str | None:
    """Why a run gets no warm server (None: it gets one): a cluster's jobs run elsewhere, a conda / container
    job runs another environment's `augsbert`, AUGSBERT_WARM=0, a server given already, too few stage jobs."""
    if os.environ.get(WARM_ENV, "1") == "0":
        return f"{WARM_ENV}=0"
    if os.environ.get(SOCKET_ENV):
        return f"{SOCKET_ENV} is set (that server serves the jobs)"
    if not local:
        return "jobs run on a cluster"
    if deployment:
        return "jobs run in their own software environments"
    if stage_jobs < MIN_JOBS:
        return f"{stage_jobs} stage job(s)"
    return None


FOLDER_PREFIX = "augsbert-warm-"  # a run's server folder: augsbert-warm-<pid of the run>-<8 random characters>
LEFT_AGE_S = 600  # a folder named without its run's pid (before issue 64) is left only when older than this


def start_for_run() -> str:
    """Start a warm server for this run's jobs (a private folder under the system's temporary one: a socket path
    has at most 107 bytes) and point the jobs at it (AUGSBERT_WARM_SOCKET). Returns at once: until the server has
    imported its libraries, jobs find no socket and start plainly; a server that fails costs nothing either.
    The server ends with the run (stop_for_run) or with the process that started it. The folders of runs that are
    gone (killed: no hook removed theirs) are removed first (sweep_left_folders)."""
    sweep_left_folders()
    folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-")
    path = os.path.join(folder, "warm.sock")
    log = open(os.path.join(folder, "server.log"), "wb")
    env = {k: v for k, v in os.environ.items() if k != PROGRESS_FD_ENV}
    proc = subprocess.Popen([sys.executable, "-m", "augsbert.run.warm_server", path], env=env,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    log.close()
    _started.update(proc=proc, folder=folder)
    os.environ[SOCKET_ENV] = path
    atexit.register(stop_for_run)  # a run ended without its hooks (an interrupt)
    return path


def sweep_left_folders(root: str | None = None) -> list[str]:
    """Remove the warm-server folders under the temporary folder `root` (the system's) that runs of this user left:
    a run killed with -9 ends without `stop_for_run`, its server ends with it (it watches its parent) and its folder
    stayed, one per kill (issue 64). A folder goes when the run named in it is gone and no server holds its
    socket's lock (the lock also keeps a folder a run on another host uses, where the temporary folder is shared); one
    named without the run's pid, by an earlier version, when also older than LEFT_AGE_S (no server takes that long
    to take its lock). Returns the folders removed."""
    root = root or tempfile.gettempdir()
    named = re.compile(rf"{re.escape(FOLDER_PREFIX)}(\d+)-[a-z0-9_]{{8}}")
    gone = []
    for folder in sorted(Path(root).glob(f"{FOLDER_PREFIX}*")):
        try:
            stat = folder.lstat()
        except OSError:
            continue
        if not folder.is_dir() or folder.is_symlink() or stat.st_uid != os.getuid():
            continue
        found = named.fullmatch(folder.name)
        if found:
            if int(found.group(1)) == os.getpid() or alive(int(found.group(1))):
                continue
        elif time.time() - stat.st_mtime < LEFT_AGE_S:
            continue
        try:  # a live server holds its lock (a run that forked and died, leaving its server: not ours to remove)
            fd = os.open(lock_path(str(folder / "warm.sock")), os.O_RDONLY)
        except OSError:
            fd = None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            finally:
                os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)
        gone.append(str(folder))
    return gone


def stop_for_run() -> None:
    """Stop the server start_for_run started (no-op otherwise) and remove its folder."""
    proc, folder = _started.pop("proc", None), _started.pop("folder", None)
    if proc is None:
        return
    os.environ.pop(SOCKET_ENV, None)
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(folder, ignore_errors=True)
