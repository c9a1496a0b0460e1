"""The loader's base: what every dataset loader is (`Loader`: its raw files, how it reads them) and returns
(`PreparedData`), and the one-line messages for a missing raw file. The loaders are augsbert.data.loaders and
augsbert.data.parallel_loaders."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .beir import BeirData
from .readers import not_a_file, read_lines, resolve_path
from .topic_corpora import corpus_inputs
from .tables import DataError, MissingDataError, RowReport, unlabeled_table

if TYPE_CHECKING:
    from ..params import Params


@dataclass
class PreparedData:
    """What a loader returns: canonical split tables, an optional unlabeled corpus, extra facts."""

    splits: dict[str, pd.DataFrame]
    unlabeled: pd.DataFrame | None = None
    info: dict = field(default_factory=dict)
    beir: "BeirData | None" = None  # a BEIR-format dataset's corpus, queries and qrels (loader `beir`)
    # parallel sentences (`parallel_rows`, `parallel_file`): split, language, source, target (PARALLEL_COLUMNS)
    parallel: pd.DataFrame | None = None
    # a row-parallel STS set's translated pairs (`parallel_rows`): split, language, row (of the source language's
    # split table), sentence1, sentence2, score (TRANSLATED_COLUMNS)
    translated: pd.DataFrame | None = None


def missing_file(dataset: str, path: Path, what: str, source: str, key: str,
                 licensed: bool = False) -> MissingDataError:
    kind = not_a_file(path)
    if kind:  # a directory, /dev/zero, a pipe: never read, and not reported as missing
        return MissingDataError(f"dataset '{dataset}': {path} {kind}; point `datasets.{dataset}.{key}` (or "
                                f"`data_dir`) at the data file\n  what it is: {what}")
    return MissingDataError(
        f"dataset '{dataset}': missing file {path}\n"
        f"  what it is: {what}\n"
        f"  where to get it: {source}\n"
        f"  where to put it: {path} (or point `datasets.{dataset}.{key}` or `data_dir` in your config at it)\n"
        + ("  The corpus cannot ship with augsbert (licence); it is read from the data directory." if licensed else
           "  augsbert does not ship the corpus; it is read from the data directory.")
    )


def missing_own_file(dataset: str, path: Path, what: str, key: str, written, data_dir: Path) -> MissingDataError:
    """A file of the user's own named by `datasets.<dataset>.<key>` is not there: the path looked for, the key and
    value that named it (relative to data_dir), and how to point it at the file; nothing about getting a corpus
    or a licence, which a file of one's own has not (issue 56 M1)."""
    if not_a_file(path):
        return missing_file(dataset, path, what, "", key)
    relative = not Path(os.path.expanduser(str(written))).is_absolute()
    named = f"datasets.{dataset}.{key}: {written}" + (f", relative to data_dir: {data_dir}" if relative else "")
    return MissingDataError(f"dataset '{dataset}': missing file {path} ({named})\n"
                            f"  what it is: {what}\n"
                            f"  put the file there, or point `datasets.{dataset}.{key}` (or `data_dir`) at it")


class Loader(ABC):
    """Base class: subclasses set the description and their options class and implement `files` and `load`.

    `options_class`: the loader's options class (augsbert.config.datasets): the schema's block of its keys is written
    from it (augsbert.reference.schema), and so are their defaults, which the validated config fills in."""

    options_class: type[Params]
    what = ""
    source = ""
    licensed = False  # True: its terms forbid shipping it (README: UKP's BWS corpus); its missing file says so
    # True: the data artifact always holds a corpus of the loader's own (the `unlabeled` table), which GPL's
    # queries stage generates for; any other dataset has one only through `unlabeled` or `topic_corpus`
    own_corpus = False

    def files(self, name: str, options: dict, data_dir: Path) -> list[Path]:
        """Raw files this dataset reads (absent ones raise MissingDataError)."""
        return []

    def inputs(self, name: str, options: dict, data_dir: Path) -> list[Path]:
        """All raw files, including the optional unlabeled corpus; raises if one is missing."""
        paths = self.files(name, options, data_dir)
        if options.get("topic_corpus"):
            if options.get("unlabeled") or options.get("loader") == "text_file":
                raise DataError(f"dataset '{name}': give either `unlabeled` (or a text_file's own `path`) or "
                                "`topic_corpus`, not both: the topic corpus is the dataset's unlabeled corpus "
                                "(a text_file table takes a topic column: `columns.topic`)")
            paths += corpus_inputs(name, options["topic_corpus"], data_dir)
        if options.get("unlabeled"):
            paths.append(self.require_own(name, options, data_dir, "unlabeled",
                                          what="unlabeled target-domain text, one sentence per line"))
        return paths

    def require(self, name: str, path: Path, key: str = "path", what: str = "", source: str = "") -> Path:
        if not path.is_file():
            raise missing_file(name, path, what or self.what, source or self.source, key, self.licensed)
        return path

    def require_own(self, name: str, options: dict, data_dir: Path, key: str, what: str = "") -> Path:
        """The file of the user's own that `datasets.<name>.<key>` names (relative to `data_dir`)."""
        path = resolve_path(data_dir, options[key])
        if not path.is_file():
            raise missing_own_file(name, path, what or self.what, key, options[key], data_dir)
        return path

    @abstractmethod
    def load(self, name: str, options: dict, data_dir: Path, report: RowReport) -> PreparedData:
        """Read the raw files into canonical tables, reporting bad rows to `report`."""

    def read_unlabeled(self, options: dict, data_dir: Path) -> pd.DataFrame | None:
        if not options.get("unlabeled"):
            return None
        return read_text_file(resolve_path(data_dir, options["unlabeled"]))


def read_text_file(path: Path) -> pd.DataFrame:
    """An unlabelled text file, one text per line, as the canonical unlabelled table."""
    return unlabeled_table([text for _, text in read_lines(path)])
