"""ConfigError: the one error type every layer raises for a setting the user can fix.

It lives apart from `augsbert.config.load` (which re-exports it) so that low modules
that only need to raise it (grids, distributed, the STS suite) import nothing
of the config machinery and can never be imported back by it in a circle.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """The configuration is invalid; the message names the offending key."""


class DataError(ValueError):
    """Bad or missing input data; the message names file, line and field."""


class MissingDataError(DataError, FileNotFoundError):
    """A raw data file is absent; the message says where it comes from and where to put it."""


class LabellingStop(Exception):
    """A run stopped for a person to label a round's pairs (`active.annotator: file`): planned, not a failure; the
    message names the file and the command that continues the run (augsbert.scheduling.stops)."""
