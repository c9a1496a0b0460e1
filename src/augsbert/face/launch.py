"""The `augsbert` command's entry point: a job of a warm run hands itself over before anything heavy is imported.

A workflow job's command (`augsbert teacher --spec ...`) is only a messenger where a warm server runs the jobs
(augsbert.run.warm): importing `augsbert.face.cli` first (the registry, the planner, the stages: about 0.3 s of
CPU) would be paid again by every job and buys it nothing. So the command tries the server with the socket
client alone and imports the command line only when it runs the command itself.
"""

from __future__ import annotations

import os
import sys

from ..run.warm import SOCKET_ENV, run as run_warm


def main() -> int:
    argv = sys.argv[1:]
    if os.environ.get(SOCKET_ENV):
        code = run_warm(list(argv))
        if code is not None:
            return code
    from .cli import main as cli_main  # noqa: PLC0415  (only for a command that runs here)

    return cli_main(list(argv), warm=False)
