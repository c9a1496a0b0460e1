"""Loaders of parallel sentences for multilingual distillation (issue 67): `parallel_rows` (STS files translated
row for row, stsb-multi-mt) and `parallel_file` (a table of translations of your own). Registered in
augsbert.data.loaders.LOADERS."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..config.datasets import (
    LANGUAGE,
    ParallelColumns,
    ParallelFileOptions,
    ParallelRowsOptions,
)
from .readers import (
    iter_delimited,
    read_delimited,
    resolve_path,
    text_format,
)
from .tables import (
    PAIR_COLUMNS,
    SPLITS,
    DataError,
    MissingDataError,
    normalise_text,
    raw_frame,
    short_repr,
    validate_pairs,
)
from .loader_base import Loader, PreparedData

PARALLEL_COLUMNS = ["split", "language", "source", "target"]
TRANSLATED_COLUMNS = ["split", "language", "row", "sentence1", "sentence2", "score"]
SAMPLE = Path(__file__).resolve().parent / "samples" / "stsb-multi-mt"  # `bundled: true` (its NOTICE.md)
LANGUAGE_CODE = re.compile(LANGUAGE["pattern"])


def parallel_table(records: list[tuple]) -> pd.DataFrame:
    """The canonical parallel table of (split, language, source, target) records: each distinct one once, in the
    order first met (a sentence repeated in the STS pairs is one training example per language, not many)."""
    table = pd.DataFrame.from_records(records, columns=PARALLEL_COLUMNS)
    return table.drop_duplicates(PARALLEL_COLUMNS).reset_index(drop=True)


class ParallelRowsLoader(Loader):
    """STS files translated row for row: row i of `<language>`'s file is row i of the source language's file
    translated (stsb-multi-mt). The source language's files are the dataset's pair splits; every other language
    gives its translated pairs (monolingual and cross-lingual STS) and, with the source, the parallel sentences
    (sentence1 with sentence1, sentence2 with sentence2 of a row).

    A row that would not align stops the data job with one line naming file and line, whatever `on_bad_rows` says:
    a row skipped in one file would pair every later row with another row's translation."""

    options_class = ParallelRowsOptions
    what = ("STS files translated row for row (stsb-multi-mt: stsb-<language>-<split>.csv, comma-separated, no "
            "header: sentence1, sentence2, score)")
    source = ("https://github.com/PhilipMay/stsb-multi-mt (its data/ folder); offline, `bundled: true` reads the "
              "sample that ships with augsbert")

    @staticmethod
    def languages(options: dict) -> list[str]:
        """The source language, then the translations' languages."""
        return [options["source_language"], *options["languages"]]

    def _paths(self, name: str, options: dict, data_dir: Path) -> dict[str, dict[str, Path]]:
        """language -> split -> file."""
        pattern = options["file_names"]
        for placeholder in ("{language}", "{split}"):
            if placeholder not in pattern:
                raise DataError(f"datasets.{name}.file_names: {pattern!r} lacks {placeholder} (e.g. "
                                "'stsb-{language}-{split}.csv')")
        if options["source_language"] in options["languages"]:
            raise DataError(f"datasets.{name}.languages: lists the source language {options['source_language']!r}; "
                            "name only the translations' languages")
        root = SAMPLE if options.get("bundled") else resolve_path(data_dir, options["path"])
        return {language: {split: root / pattern.replace("{language}", language).replace("{split}", split)
                           for split in SPLITS} for language in self.languages(options)}

    def files(self, name, options, data_dir):
        found = []
        for language, paths in self._paths(name, options, data_dir).items():
            for split, path in paths.items():
                if options.get("bundled") and not path.is_file():
                    held = sorted({p.name.split("-")[1] for p in SAMPLE.glob("stsb-*-*.csv")})
                    raise MissingDataError(f"dataset '{name}': bundled: true, but the sample that ships with augsbert "
                                           f"has no {language!r} ({path.name}); it holds {', '.join(held)}: set "
                                           f"datasets.{name}.languages to some of them")
                found.append(self.require(name, path, what=f"{self.what}; {language}, {split} split"))
        return found

    @staticmethod
    def _rows(path: Path, score_range: tuple[float, float]) -> list[tuple[int, str, str, float]]:
        """(line, sentence1, sentence2, score) of every row of a row-parallel file; any row that is not a complete,
        scored row stops here (file:line)."""
        lo, hi = score_range
        rows = []
        for line, fields in iter_delimited(path, ","):
            if len(fields) != 3:
                raise DataError(f"{path}:{line}: expected 3 fields (sentence1, sentence2, score), found {len(fields)}"
                                " (a row-parallel file needs every row whole: it cannot be skipped)")
            first, second = normalise_text(fields[0]), normalise_text(fields[1])
            for column, text in (("sentence1", first), ("sentence2", second)):
                if not text:
                    raise DataError(f"{path}:{line}: empty {column} (an untranslated row: a row-parallel file needs "
                                    "every row translated)")
            try:
                score = float(fields[2])
            except ValueError:
                score = float("nan")
            if not np.isfinite(score) or not lo <= score <= hi:
                raise DataError(f"{path}:{line}: score {short_repr(fields[2])} is not a number in the declared range "
                                f"[{lo:g}, {hi:g}] (score_range)")
            rows.append((line, first, second, score))
        return rows

    def load(self, name, options, data_dir, report):
        paths = self._paths(name, options, data_dir)
        source = options["source_language"]
        lo, hi = (float(x) for x in options["score_range"])
        if not hi > lo:
            raise DataError(f"datasets.{name}.score_range: [{lo:g}, {hi:g}] is empty")
        splits, translated, parallel = {}, [], []
        for split in SPLITS:
            originals = self._rows(paths[source][split], (lo, hi))
            raw = [(str(paths[source][split]), line, a, b, score) for line, a, b, score in originals]
            splits[split] = validate_pairs(raw_frame(raw, PAIR_COLUMNS), report, (lo, hi))
            for language in options["languages"]:
                path = paths[language][split]
                rows = self._rows(path, (lo, hi))
                if len(rows) != len(originals):
                    longer, shorter = (path, paths[source][split]) if len(rows) > len(originals) else \
                        (paths[source][split], path)
                    line = (rows if len(rows) > len(originals) else originals)[min(len(rows), len(originals))][0]
                    raise DataError(f"{longer}:{line}: row {min(len(rows), len(originals)) + 1} has no partner in "
                                    f"{shorter}, which has {min(len(rows), len(originals))} rows (row-parallel files "
                                    "hold the same rows in every language)")
                for row, ((_, a, b, score), (_, src_a, src_b, _)) in enumerate(zip(rows, originals)):
                    translated.append((split, language, row, a, b, (score - lo) / (hi - lo)))
                    parallel += [(split, language, src_a, a), (split, language, src_b, b)]
        table = pd.DataFrame.from_records(translated, columns=TRANSLATED_COLUMNS)
        info = {"source_language": source, "languages": list(options["languages"]),
                "format": "bundled sample" if options.get("bundled") else "row-parallel files"}
        return PreparedData(splits, self.read_unlabeled(options, data_dir), info, parallel=parallel_table(parallel),
                            translated=table)


class ParallelFileLoader(Loader):
    """A table of translations of your own: a source sentence and its translation a row (columns `source`,
    `target`; tab- or comma-separated with a header), optionally a held-out `test` table of the same layout."""

    options_class = ParallelFileOptions
    what = "a parallel file of your own: source and target columns (tab- or comma-separated, a header row)"
    source = "your own data"

    @staticmethod
    def _columns(name: str, options: dict) -> dict:
        columns = {**ParallelColumns().to_json(), **(options.get("columns") or {})}
        if not options.get("language") and not columns.get("language"):
            raise DataError(f"datasets.{name}.language: name the translations' language (e.g. de), or a column "
                            "holding each row's (columns.language)")
        return columns

    def files(self, name, options, data_dir):
        self._columns(name, options)  # while planning: a definition that cannot be read stops before any job
        return [self.require_own(name, options, data_dir, key, what=self.what)
                for key in ("path", "test") if options.get(key)]

    def load(self, name, options, data_dir, report):
        columns = self._columns(name, options)
        language = options.get("language")
        wanted = [columns["source"], columns["target"], *([columns["language"]] if columns.get("language") else [])]
        records = []
        for split, key in (("train", "path"), ("test", "test")):
            if not options.get(key):
                continue
            path = resolve_path(data_dir, options[key])
            fmt = text_format(path)
            if fmt not in ("csv", "tsv"):
                raise DataError(f"{path}: a parallel file is a .tsv (tab) or .csv (comma) table with a header row")
            for file, line, *fields in read_delimited(path, report, delimiter="\t" if fmt == "tsv" else ",",
                                                      header=True, columns=wanted):
                source, target = normalise_text(fields[0]), normalise_text(fields[1])
                row_language = normalise_text(fields[2]) if len(fields) > 2 else language
                if not source or not target:
                    report.add(file, line, f"empty {columns['source'] if not source else columns['target']}")
                elif not LANGUAGE_CODE.fullmatch(row_language or ""):
                    report.add(file, line, f"language {short_repr(row_language)} is not a language code (de, fr, ...)")
                else:
                    records.append((split, row_language, source, target))
        table = parallel_table(records)
        info = {"source_language": options["source_language"],
                "languages": sorted(set(table.loc[table["split"] == "train", "language"])), "format": "parallel file"}
        return PreparedData({}, self.read_unlabeled(options, data_dir), info, parallel=table)
