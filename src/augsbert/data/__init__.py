"""Data layer: loaders for every supported corpus and the canonical parquet tables."""

from .loaders import LOADERS, PreparedData, get_loader
from .readers import resolve_path
from .tables import (
    PAIR_COLUMNS,
    SPLITS,
    DataError,
    MissingDataError,
    RowReport,
    normalise_text,
    read_pairs,
)

__all__ = [
    "LOADERS",
    "PAIR_COLUMNS",
    "SPLITS",
    "DataError",
    "MissingDataError",
    "PreparedData",
    "RowReport",
    "get_loader",
    "normalise_text",
    "read_pairs",
    "resolve_path",
]
