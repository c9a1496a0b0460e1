"""A parallel dataset's tables in its data artifact (loaders `parallel_rows`, `parallel_file`) and what multilingual
distillation reads of them: the parallel sentences that may train (never a dev or test sentence), the translated
test pairs and the held-out translations.

- `parallel.parquet`: split, language, source, target: every distinct translation of a source sentence;
- `translated.parquet` (row-parallel STS files only): split, language, row, sentence1, sentence2, score (0-1): row
  `row` of the source language's split table (`<split>.parquet`) in `language`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from ..errors import DataError
from .pool import evaluation_sentences, read_split
from .tables import write_table

log = logging.getLogger(__name__)

PARALLEL, TRANSLATED = "parallel.parquet", "translated.parquet"
HELD_OUT = ("dev", "test")


def write_parallel(prepared, folder: Path, name: str, skipped: int) -> dict[str, int]:
    """Write a loader's parallel tables into the data artifact `folder`; the parallel pairs per split (the data
    metrics' sizes: `parallel_train`, ...), {} for a dataset without. No parallel train pair stops the job."""
    if prepared.parallel is None:
        return {}
    if not (prepared.parallel["split"] == "train").any():
        raise DataError(f"dataset '{name}': no parallel train sentences"
                        + (f" after skipping {skipped} bad row(s)" if skipped else ""))
    write_table(prepared.parallel, folder / PARALLEL)
    if prepared.translated is not None:
        write_table(prepared.translated, folder / TRANSLATED)
    counts = prepared.parallel["split"].value_counts(sort=False)
    return {f"parallel_{split}": int(n) for split, n in counts.items()}


def read_parallel(data: str | Path) -> pd.DataFrame:
    path = Path(data) / PARALLEL
    if not path.is_file():
        raise DataError(f"{data}: the dataset has no parallel sentences (a `parallel_rows` or `parallel_file` "
                        "dataset has)")
    return pd.read_parquet(path)


def read_translated(data: str | Path) -> pd.DataFrame | None:
    """The translated STS pairs of a row-parallel dataset; None for a parallel file (no STS pairs)."""
    path = Path(data) / TRANSLATED
    return pd.read_parquet(path) if path.is_file() else None


def dataset_languages(data: str | Path) -> list[str]:
    """The translations' languages of a parallel dataset, in the order its definition lists them."""
    return list(dict.fromkeys(read_parallel(data)["language"]))


def held_out_sentences(parallel: str | Path, target: str | Path | None = None) -> set[str]:
    """Every dev and test sentence of the parallel dataset (its source-language pairs, their translations, its
    held-out parallel sentences) and of the experiment's target data (`target`): none of them may train."""
    sentences = evaluation_sentences(parallel)
    if target is not None:
        sentences |= evaluation_sentences(target)
    table = read_parallel(parallel)
    held = table[table["split"].isin(HELD_OUT)]
    sentences |= set(held["source"]) | set(held["target"])
    translated = read_translated(parallel)
    if translated is not None:
        held = translated[translated["split"].isin(HELD_OUT)]
        sentences |= set(held["sentence1"]) | set(held["sentence2"])
    return sentences


def training_pairs(parallel: str | Path, held_out: set[str], max_per_language: int | None = None
                   ) -> tuple[pd.DataFrame, dict[str, int]]:
    """The parallel train pairs that may train: those whose source and target are no dev or test sentence
    (`held_out_sentences`), at most `max_per_language` per language (the first ones, in file order). Returns them
    (language, source, target) and the counts: `dropped` (held-out sentences), `capped` (beyond the cap)."""
    table = read_parallel(parallel)
    train = table[table["split"] == "train"]
    seen = train["source"].isin(held_out) | train["target"].isin(held_out)
    kept = train[~seen]
    capped = 0
    if max_per_language is not None:
        within = kept.groupby("language", sort=False).cumcount() < max_per_language
        capped = int((~within).sum())
        kept = kept[within]
    return kept[["language", "source", "target"]].reset_index(drop=True), {"dropped": int(seen.sum()),
                                                                           "capped": capped}


def translated_pairs(parallel: str | Path, language: str, split: str = "test") -> dict[str, pd.DataFrame]:
    """The STS pairs of `language` of a row-parallel dataset's split: monolingual (`l-l`: both sentences
    translated, the translation's score) and cross-lingual (`en-l`: the original's sentence1 with the translation's
    sentence2; `l-en`: the other way round; the original's score), each (sentence1, sentence2, score); {} for a
    dataset without translated pairs."""
    translated = read_translated(parallel)
    if translated is None:
        return {}
    original = read_split(parallel, split)
    part = translated[(translated["split"] == split) & (translated["language"] == language)]
    if part.empty:
        return {}
    rows = part["row"].to_numpy()
    if len(original) <= rows.max():
        raise DataError(f"{parallel}: the translated {split} pairs of {language!r} point past the source language's "
                        f"{len(original)} pairs (a damaged data artifact: delete it and run again)")
    source = original.iloc[rows].reset_index(drop=True)
    part = part.reset_index(drop=True)
    return {"l-l": part[["sentence1", "sentence2", "score"]],
            "en-l": pd.DataFrame({"sentence1": source["sentence1"], "sentence2": part["sentence2"],
                                  "score": source["score"]}),
            "l-en": pd.DataFrame({"sentence1": part["sentence1"], "sentence2": source["sentence2"],
                                  "score": source["score"]})}


def held_out_translations(parallel: str | Path, language: str, split: str = "test") -> pd.DataFrame:
    """The held-out (source, target) pairs of `language` for translation retrieval: each source sentence once
    (its first translation), in file order."""
    table = read_parallel(parallel)
    part = table[(table["split"] == split) & (table["language"] == language)]
    return part.drop_duplicates("source")[["source", "target"]].reset_index(drop=True)
