"""The warm server's former module path (earlier docs named `python -m augsbert.warm_server`): one line
pointing at augsbert.run.warm_server, and exit status 2 (a usage error), never a server."""

import sys

MESSAGE = ("augsbert: error: augsbert.warm_server moved: start the warm server with "
           "`python -m augsbert.run.warm_server SOCKET_PATH`")

if __name__ == "__main__":
    print(MESSAGE, file=sys.stderr)
    sys.exit(2)
raise ImportError(MESSAGE.removeprefix("augsbert: error: "))
