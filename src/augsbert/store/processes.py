"""Whether a process a record names by its pid (and host) is alive: the holder of an artifact's or the rehearsal's
lock, the run behind an estimates file, a claimant of the GPU ledger, a warm job being waited for. One answer for
all of them:

- a pid of another host says nothing here: taken as alive (its record is kept, its lock not blamed on it);
- `kill(pid, 0)`: no such process, gone; one this user may not signal (another user's), alive;
- /proc, where there is one: a zombie (ended, its exit status not read yet) is gone, and so is a process whose start
  time is not the recorded one (the pid was reused).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), None where there is none to read."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def start_time(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/<pid>/stat), recorded with its pid so a reused pid is told apart."""
    stat = stat_fields(pid)
    return stat[19] if stat and len(stat) > 19 else None


def alive(pid: int, host: str | None = None, started: str | None = None) -> bool:
    """Whether process `pid` (of `host`, None: this one; started at `started`, None: any time) is alive."""
    if host is not None and host != socket.gethostname():
        return True
    if pid <= 0:  # 0 and below name process groups, not a process
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = stat_fields(pid)
    if stat is None:  # no /proc: the pid exists
        return True
    return stat[0] not in ("Z", "X") and started in (None, stat[19] if len(stat) > 19 else None)
