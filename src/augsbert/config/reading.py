"""Reading the files a user names as settings (config YAML, `--spec` JSON): regular UTF-8 files of bounded size.

A config or spec path pointing at /dev/zero ran out of memory (MemoryError), /dev/urandom never ended, a
latin-1 file ended in a UnicodeDecodeError traceback and a list nested 800 deep in a RecursionError. So
such a file is checked before it is read: it must be a regular file (not a device, a pipe or a folder),
at most `limit` bytes (a config is kilobytes; the limit is far above any real one and far below a
machine's memory), valid UTF-8 and nested at most `MAX_DEPTH` levels. Each failure is one ConfigError
naming the file and what to do. `regular_bytes` and `utf8` are the same checks for other readers: the JSON files
of artifacts and results/ (augsbert.store.artifacts.read_json) raise their own error with their own advice.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from ..errors import ConfigError

CONFIG_LIMIT = 16 << 20  # bytes of a config file
SPEC_LIMIT = 64 << 20  # bytes of a spec file (a planned node, or an experiment's spec with its runs)
MAX_DEPTH = 64  # nesting of mappings and lists: the schema's deepest option is about 6 levels down

KINDS = {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device", stat.S_ISFIFO: "a pipe",
         stat.S_ISSOCK: "a socket", stat.S_ISDIR: "a directory"}


def regular_bytes(path: str | Path, what: str, limit: int, error: type[Exception] = ConfigError,
                  fix: str | None = None) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them; anything else raises `error` (`what`: how
    the message names the file; `fix`: what it advises for a folder, a device or a pipe; by default to name a
    regular file). A missing file raises FileNotFoundError, for the caller to name."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise error(f"{path}: cannot read the {what} ({err.strerror or err})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in KINDS.items() if test(st.st_mode)), "not a regular file")
        raise error(f"{path}: is {kind}, not a {what}; {fix or f'name a {what} (a regular file)'}")
    if st.st_size > limit:
        raise error(f"{path}: {st.st_size:,} bytes, more than a {what} can be ({limit >> 20} MiB); is it "
                    f"the {what}?")
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)  # files whose size says 0 (/proc) are still read to the limit only
    except OSError as err:
        raise error(f"{path}: cannot read the {what} ({err.strerror or err})") from None
    if len(data) > limit:
        raise error(f"{path}: more than {limit >> 20} MiB, more than a {what} can be; is it the {what}?")
    return data


def utf8(data: bytes, path: str | Path, fix: str, error: type[Exception] = ConfigError) -> str:
    """`data` (the bytes of file `path`) as text; not UTF-8: `error` naming the line, the byte and `fix`."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise error(f"{path}:{line}: not valid utf-8 text (byte 0x{data[err.start]:02x} at byte offset "
                    f"{err.start}); {fix}") from None


def read_text(path: str | Path, what: str, limit: int) -> str:
    """The UTF-8 text of the regular file `path` (`what`: how the message names it, e.g. "config file")."""
    try:
        data = regular_bytes(path, what, limit)
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    return utf8(data, path, f"save the {what} as utf-8")


def check_depth(value: Any, where: str, limit: int = MAX_DEPTH) -> None:
    """Raise ConfigError if mappings and lists in `value` nest deeper than `limit` (checked without recursion).

    A container shared by YAML aliases is walked once per depth it is reached at, not once per reference: a
    "billion laughs" config stays a few dozen steps here (and is refused by its size in augsbert.config.load)."""
    stack, seen = [(value, 1)], {}
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)) or seen.get(id(item), 0) >= depth:
            continue
        if depth > limit:
            raise ConfigError(f"{where}: mappings and lists nested more than {limit} levels deep; no setting "
                              "is nested like that: is it the right file?")
        seen[id(item)] = depth
        stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
