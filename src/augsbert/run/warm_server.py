"""The warm server of augsbert.run.warm (its module docstring says what it does): imports the libraries once, then
runs each `augsbert` command handed to it at a Unix socket in a fork.

    python -m augsbert.run.warm_server PATH      # then AUGSBERT_WARM_SOCKET=PATH for the commands to serve
"""

from __future__ import annotations

import array
import fcntl
import json
import os
import signal
import socket
import sys

from .warm import WARM_FIXED_ENV, THREAD_ENV, lock_path, send_line
from ..scheduling.progress import PROGRESS_FD_ENV

# the command line the forks run (`main(argv)`), named as the stages name their runners: the server sits below the
# command line that starts it (tests/test_imports.py), imports it once before serving and looks `main` up per
# command (what the server imported may have wrapped it: tests/test_warm.py's helper)
COMMAND = "augsbert.face.cli"

PRELOAD_ENV = "AUGSBERT_WARM_PRELOAD"  # comma-separated modules to import instead of PRELOAD (tests)
PRELOAD = ("torch", "transformers", "transformers.trainer", "sentence_transformers", "datasets", "accelerate",
           "pandas", "pyarrow.parquet", "scipy.stats", COMMAND, "augsbert.training.pairs",
           "augsbert.models.architectures", "augsbert.training.pair_job")
KILL_GRACE_S = 10.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with(keeper: int) -> None:
    """The job ends (SIGTERM) when its keeper does, even by SIGKILL: the job has a session of its own, so
    nothing else would stop it writing its artifact for a command that has already failed."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != keeper:  # the keeper died before the call: nobody will send the signal
        os._exit(128 + signal.SIGTERM)


def thread_limits(env: dict) -> dict[str, int]:
    """What the command's thread variables ask of the thread pools the server's imports loaded (by threadpoolctl
    user API): Snakemake sets OMP_NUM_THREADS, MKL_NUM_THREADS, OPENBLAS_NUM_THREADS ... to a job's threads, which
    a library read when the server imported it, so a fork sets them again instead (absent or invalid: unchanged)."""
    def count(name):
        try:
            value = int(env.get(name, ""))
        except ValueError:
            return None
        return value if value > 0 else None

    limits = {}
    if count("OMP_NUM_THREADS"):
        limits["openmp"] = count("OMP_NUM_THREADS")
    blas = [count(name) for name in ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS") if count(name)]
    if blas:
        limits["blas"] = min(blas)
    return limits


def _apply_threads(env: dict) -> None:
    limits = thread_limits(env)
    if not limits:
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=limits)
    if "torch" in sys.modules and "openmp" in limits:  # torch's intra-op pool, as a plain start sizes it
        sys.modules["torch"].set_num_threads(limits["openmp"])


def _job(request: dict, fds: list[int], keeper: int) -> None:
    """In the job's process: become the command, run it and end as a plain `augsbert` process ends (non-daemon
    threads joined, exit handlers run, streams flushed; an uncaught error's traceback and status 1, Ctrl-C's
    SIGINT); never return."""
    import atexit
    import threading
    import traceback

    code, interrupted = 1, False
    try:
        _die_with(keeper)
        os.setsid()
        # the three standard streams, and the console for progress lines where the command kept one
        targets = [0, 1, 2] + ([int(request["env"][PROGRESS_FD_ENV])] if len(fds) == 4 else [])
        # moved above every target first, so that no received descriptor is overwritten before it is placed
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, max(targets) + 1) for fd in fds]
        for fd in fds:
            os.close(fd)
        for target, fd in zip(targets, high):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _apply_threads(request["env"])
        sys.argv = ["augsbert", *request["argv"]]
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # looked up now: what the server imported may have wrapped it (tests/test_warm.py's helper)
        result = sys.modules[COMMAND].main(list(request["argv"]))  # the console script: sys.exit(main())
        code = result if isinstance(result, int) else (0 if result is None else 1)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if stop.code is not None and not isinstance(stop.code, int):
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:
        traceback.print_exc()
        interrupted = True
    except BaseException:  # noqa: BLE001 - reported as a plain start reports an uncaught error
        traceback.print_exc()
    finally:
        try:
            threading._shutdown()  # what the interpreter does at exit: wait for non-daemon threads
            atexit._run_exitfuncs()  # then exit handlers (a GPU claim's release, logging's flush)
        except BaseException:  # noqa: BLE001 - as at a plain exit, a failing handler does not change the status
            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed stream cannot stop the exit
                pass
        if interrupted:  # Python ends an uncaught Ctrl-C by SIGINT, so the parent sees it as such
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code)


def refusal(request: dict, fds: list[int]) -> str | None:
    """Why the server cannot run `request` as a plain start would (None: it can)."""
    if len(fds) not in (3, 4) or (len(fds) == 4) != (PROGRESS_FD_ENV in request["env"]):
        return "streams"
    if len(fds) == 4 and not request["env"][PROGRESS_FD_ENV].isdigit():
        return "streams"
    if any(request["env"].get(k) != os.environ.get(k) for k in WARM_FIXED_ENV):
        return "environment"
    # a thread variable the server was started with cannot be undone for a command without it
    if any(k in os.environ and k not in request["env"] for k in THREAD_ENV):
        return "environment"
    return None


def _keep(conn: socket.socket) -> None:
    """In a keeper: read one request, start its job, report pid and exit status; never return."""
    # a terminal's Ctrl-C reaches the keeper (the server's process group) as well: the command forwards it to the
    # job, which ends as it would in a plain start (its one line; partial files removed), and the keeper reports that
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code, pid, reaped = 0, None, False
    try:
        data, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(4 * array.array("i").itemsize))
        fds = []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.extend(array.array("i", payload[: len(payload) - len(payload) % 4]))
        while not data.endswith(b"\n"):
            more = conn.recv(1 << 20)
            if not more:
                raise ConnectionError("request cut short")
            data += more
        request = json.loads(data)
        reason = refusal(request, fds)
        if reason:
            send_line(conn, {"refused": reason})
            os._exit(0)
        send_line(conn, {"accepted": True})
        keeper = os.getpid()
        # the job waits until the command knows its pid: a keeper killed in between leaves no job unknown to it
        ready, go = os.pipe()
        pid = os.fork()
        if pid == 0:
            conn.close()
            os.close(go)
            started = os.read(ready, 1)
            os.close(ready)
            if not started:  # the keeper died before it reported the pid
                os._exit(128 + signal.SIGTERM)
            _job(request, fds, keeper)
        os.close(ready)
        for fd in fds:
            os.close(fd)
        send_line(conn, {"pid": pid})
        os.write(go, b"1")
        os.close(go)
        conn.setblocking(False)
        deadline = None
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                reaped = True
                send_line(conn, {"returncode": os.waitstatus_to_exitcode(status)})
                break
            import select

            readable, _, _ = select.select([conn], [], [], 0.2)
            if readable and deadline is None:
                try:
                    closed = conn.recv(1) == b""
                except BlockingIOError:
                    closed = False
                if closed:  # the command is gone: its job must not outlive it
                    os.killpg(pid, signal.SIGTERM)
                    deadline = _monotonic() + KILL_GRACE_S
            if deadline is not None and _monotonic() > deadline:
                os.killpg(pid, signal.SIGKILL)
                deadline = float("inf")
    except BaseException:  # noqa: BLE001 - a keeper's failure ends only its own command (which sees no status)
        code = 1
        # the job has a session of its own: a keeper that dies (the command gone between two messages, a
        # SIGTERM to the server's group, which the keeper inherits as SystemExit) must not leave it running
        if pid and not reaped:
            try:
                os.killpg(pid, signal.SIGTERM)
            except OSError:
                pass
    finally:
        os._exit(code)


def _monotonic() -> float:
    import time

    return time.monotonic()


class AlreadyServed(Exception):
    """Another warm server holds the socket's lock."""


def take_lock(path: str) -> int:
    """Hold `<path>.lock` (flock) for as long as this server serves `path`: one server per socket. The file's
    descriptor is returned (the keepers close their copy). Another holder: AlreadyServed naming its pid."""
    name = lock_path(path)
    while True:
        fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise AlreadyServed(f"another warm server (pid {holder}) serves {path}; this one exits") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(name).st_ino
        except FileNotFoundError:  # the previous holder removed it as we opened it
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
            return fd
        os.close(fd)


def serve(path: str) -> None:
    """Import PRELOAD, then serve commands at the Unix socket `path` until SIGTERM or the parent's end."""
    import gc
    import importlib
    import threading

    lock = take_lock(path)  # before the imports: a second server says so at once
    for name in filter(None, os.environ.get(PRELOAD_ENV, ",".join(PRELOAD)).split(",")):
        importlib.import_module(name)
    importlib.import_module(COMMAND)  # what the forks run (PRELOAD holds it; a test's AUGSBERT_WARM_PRELOAD may not)
    if threading.active_count() != 1:  # fork copies the calling thread only: a lock held elsewhere would hang
        raise RuntimeError(f"augsbert.run.warm: an import started threads: {threading.enumerate()}")
    if os.path.exists(path):  # under the lock: a socket left by a server that died without removing it
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o600)  # the user's own commands only
    server.listen(64)
    server.settimeout(1.0)
    parent = os.getppid()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    gc.freeze()  # the imported objects stay shared with the forks (no collection touches their pages)
    print(f"augsbert.run.warm: serving at {path}", file=sys.stderr, flush=True)
    try:
        while os.getppid() == parent:
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:  # reap finished keepers
                    pass
            except ChildProcessError:
                pass
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                server.close()
                os.close(lock)  # the lock is the server's: a keeper outliving it must not hold it
                _keep(conn)
            conn.close()
    finally:
        server.close()
        if os.path.exists(path):
            os.unlink(path)
        os.unlink(lock_path(path))  # still ours: removed before the lock is let go
        os.close(lock)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m augsbert.run.warm_server SOCKET_PATH", file=sys.stderr)
        return 2
    try:
        serve(argv[0])
    except AlreadyServed as err:
        print(f"augsbert.run.warm: error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
