"""Dataset loaders: raw files -> canonical train/dev/test pair tables.

Each loader knows which raw files it needs (`inputs`, checked while the
workflow is planned, so a missing file fails before any job starts) and how to
read them (`load`). Formats and splits follow shared/spec/datasets.md.
"""

from __future__ import annotations

import csv
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
import importlib.util
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..config.datasets import (
    BeirOptions,
    BwsCrossTopicOptions,
    BwsInTopicOptions,
    LANGUAGE,
    LeeOptions,
    PairsFileOptions,
    ParallelColumns,
    ParallelFileOptions,
    ParallelRowsOptions,
    SpanishStsOptions,
    StsbOptions,
    TextColumns,
    TextFileOptions,
)
from .readers import (
    iter_delimited,
    not_a_file,
    read_all_lines,
    read_delimited,
    read_jsonl,
    read_lines,
    read_parquet,
    read_text_table,
    resolve_path,
    text_format,
)
from .tables import (
    PAIR_COLUMNS,
    SPLITS,
    DataError,
    MissingDataError,
    RowReport,
    normalise_text,
    raw_frame,
    short_repr,
    unlabeled_table,
    validate_pairs,
)
from .beir import BeirData, beir_files, read_beir
from .topic_corpora import corpus_inputs

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
    return unlabeled_table([text for _, text in read_lines(path)])


# ------------------------------------------------------------------ Lee
def _gensim_data() -> Path:
    # find_spec locates the installed package without running gensim's __init__ (seconds of scipy imports
    # for a dry run that only needs the files' paths); the corpus is plain text read below
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDataError("the Lee corpus ships inside the gensim wheel: pip install gensim==4.4.0")
    return Path(list(spec.submodule_search_locations)[0]) / "test" / "test_data"


def group_sizes(n: int, fractions: list[float]) -> list[int]:
    """Split n items into groups by fractions, rounding so the sizes add up to n."""
    total = float(sum(fractions))
    raw = [n * f / total for f in fractions]
    sizes = [int(np.floor(r)) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: (sizes[i] - raw[i], i))[: n - sum(sizes)]:
        sizes[i] += 1
    return sizes


class LeeLoader(Loader):
    options_class = LeeOptions
    what = "Lee corpus: 50 news documents with averaged human similarity ratings (Lee, Pincombe & Welsh, 2005)"
    source = "ships inside the gensim wheel (gensim/test/test_data)"
    own_corpus = True  # the background corpus (lee_background.cor), unless `unlabeled` replaces it

    def files(self, name, options, data_dir):
        root = _gensim_data()
        paths = [root / "lee.cor", root / "similarities0-1.txt"]
        if not options.get("unlabeled"):
            paths.append(root / "lee_background.cor")
        return [self.require(name, path) for path in paths]

    def load(self, name, options, data_dir, report):
        root = _gensim_data()
        docs = [text for _, text in read_lines(root / "lee.cor", encoding="latin-1")]
        sims = np.loadtxt(root / "similarities0-1.txt")
        if len(docs) != 50 or sims.shape != (50, 50):
            raise DataError(f"{root}: expected 50 documents and a 50x50 matrix, found {len(docs)} and {sims.shape}")
        order = np.random.default_rng(options["split_seed"]).permutation(len(docs))
        sizes = group_sizes(len(docs), options["split_fractions"])
        bounds = np.cumsum([0, *sizes])
        groups = {split: sorted(order[bounds[k] : bounds[k + 1]].tolist()) for k, split in enumerate(SPLITS)}
        splits = {}
        for split, members in groups.items():
            rows = [
                (str(root / "similarities0-1.txt"), i + 1, docs[i], docs[j], sims[i, j])
                for a, i in enumerate(members)
                for j in members[a + 1 :]
            ]
            splits[split] = validate_pairs(raw_frame(rows, PAIR_COLUMNS), report)
        unlabeled = self.read_unlabeled(options, data_dir)
        if unlabeled is None:
            unlabeled = read_text_file(root / "lee_background.cor")
        return PreparedData(splits, unlabeled, {"documents": groups})


# ------------------------------------------------------------------ STS-B
STSB_SEMEVAL = {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}
STSB_SBERT = "stsbenchmark.tsv.gz"
STSB_FIELDS = ["genre", "filename", "year", "id", "score", "sentence1", "sentence2"]


class StsbLoader(Loader):
    options_class = StsbOptions
    what = "STS benchmark (Cer et al., 2017): sts-train/dev/test.csv, or stsbenchmark.tsv.gz"
    source = (
        "http://ixa2.si.ehu.eus/stswiki/images/4/48/Stsbenchmark.tar.gz (unpack the three csv files) or "
        "https://sbert.net/datasets/stsbenchmark.tsv.gz; online alternative: set download: true to use "
        "the hub dataset sentence-transformers/stsb"
    )

    def _layout(self, options, data_dir) -> tuple[str, list[Path]]:
        root = resolve_path(data_dir, options["path"])
        semeval = [root / f for f in STSB_SEMEVAL.values()]
        if all(p.is_file() for p in semeval):
            return "semeval", semeval
        if (root / STSB_SBERT).is_file():
            return "sbert", [root / STSB_SBERT]
        if options.get("download"):
            return "hub", []
        present = [p for p in semeval if p.is_file()]
        absent = next(p for p in semeval if not p.is_file()) if present else root / STSB_SBERT
        return "missing", [absent]

    def files(self, name, options, data_dir):
        layout, paths = self._layout(options, data_dir)
        if layout == "missing":
            raise missing_file(name, paths[0], self.what, self.source, "path")
        return paths

    def load(self, name, options, data_dir, report):
        layout, paths = self._layout(options, data_dir)
        if layout == "semeval":
            splits = {}
            for split, path in zip(STSB_SEMEVAL, paths):
                rows = read_delimited(path, report, delimiter="\t", quoting=csv.QUOTE_NONE, header=STSB_FIELDS,
                                      columns=PAIR_COLUMNS, max_fields=9)
                splits[split] = validate_pairs(raw_frame(rows, PAIR_COLUMNS), report, (0, 5))
            return PreparedData(splits, self.read_unlabeled(options, data_dir), {"format": "semeval"})
        if layout == "sbert":
            rows = read_delimited(paths[0], report, delimiter="\t", quoting=csv.QUOTE_NONE, header=True,
                                  columns=["split", *PAIR_COLUMNS])
            frame = raw_frame(rows, ["split", *PAIR_COLUMNS])
            splits = {
                split: validate_pairs(frame[frame["split"] == split].drop(columns="split"), report, (0, 5))
                for split in SPLITS
            }
            return PreparedData(splits, self.read_unlabeled(options, data_dir), {"format": "sbert"})
        if layout == "hub":
            return PreparedData(self._from_hub(name, report), self.read_unlabeled(options, data_dir), {"format": "hub"})
        raise missing_file(name, paths[0], self.what, self.source, "path")

    def _from_hub(self, name, report) -> dict[str, pd.DataFrame]:
        try:
            import datasets

            hub = datasets.load_dataset("sentence-transformers/stsb")
        except Exception as err:  # network errors come in many types
            raise MissingDataError(
                f"dataset '{name}': download: true, but the hub dataset sentence-transformers/stsb could not be "
                f"loaded ({type(err).__name__}: {err}). Offline, put the files in the data directory instead:\n"
                f"  {self.source}"
            ) from None
        splits = {}
        for split, hub_split in zip(SPLITS, ("train", "validation", "test")):
            part = hub[hub_split]
            rows = [("hub:sentence-transformers/stsb", i + 1, r["sentence1"], r["sentence2"], r["score"])
                    for i, r in enumerate(part)]
            splits[split] = validate_pairs(raw_frame(rows, PAIR_COLUMNS), report)
        return splits


# ------------------------------------------------------------------ BWS
BWS_COLUMNS = ["id", "argument1", "argument2", "topic", "score"]


class BwsLoader(Loader):
    what = "BWS Argument Similarity Corpus (Thakur et al., NAACL 2021), 3400 argument pairs over 8 topics"
    licensed = True
    source = (
        "UKP Lab's release of the 'BWS Argument Similarity Corpus' on TUdatalib "
        "(tudatalib.ulb.tu-darmstadt.de, search for the corpus name); take the file "
        "BWS_Argument_Similarity_Corpus.csv"
    )

    def files(self, name, options, data_dir):
        return [self.require(name, resolve_path(data_dir, options["path"]))]

    def read(self, name, options, data_dir, report) -> pd.DataFrame:
        path = self.files(name, options, data_dir)[0]
        rows = read_delimited(path, report, delimiter=",", header=True, columns=BWS_COLUMNS)
        frame = raw_frame(rows, BWS_COLUMNS).rename(columns={"argument1": "sentence1", "argument2": "sentence2"})
        return validate_pairs(frame, report)

    def load(self, name, options, data_dir, report):
        return self.split(name, options, self.read(name, options, data_dir, report), data_dir)

    @abstractmethod
    def split(self, name, options, table, data_dir) -> PreparedData:
        """Assign the validated pairs to train/dev/test."""


class BwsCrossTopicLoader(BwsLoader):
    options_class = BwsCrossTopicOptions

    def split(self, name, options, table, data_dir):
        found = set(table["topic"])
        wanted = {s: options[f"{s}_topics"] for s in SPLITS}
        for split, topics in wanted.items():
            unknown = [t for t in topics if t not in found]
            if unknown:
                raise DataError(
                    f"dataset '{name}': datasets.{name}.{split}_topics names topic(s) {unknown} "
                    f"that the file does not contain (it has: {sorted(found)})"
                )
        used = [t for topics in wanted.values() for t in topics]
        if len(used) != len(set(used)):
            raise DataError(f"dataset '{name}': a topic is assigned to more than one split: {wanted}")
        splits = {s: table[table["topic"].isin(t)].reset_index(drop=True) for s, t in wanted.items()}
        return PreparedData(splits, self.read_unlabeled(options, data_dir),
                            {"topics": wanted, "unused_topics": sorted(found - set(used))})


def apportion(counts: dict[str, int], totals: list[int]) -> dict[str, list[int]]:
    """Per-group train/dev/test sizes whose column sums equal `totals`.

    Each split's quota is distributed over the groups by largest remainder of
    the proportional share; ties go first to the groups with most items still
    unassigned, then by name, so 8 x 425 pairs give 265-266 / 53-54 / 106-107
    and totals 2125 / 425 / 850.
    """
    n = sum(counts.values())
    if sum(totals) != n:
        raise DataError(f"split sizes {totals} add up to {sum(totals)}, but there are {n} pairs")
    left = dict(counts)
    sizes = {g: [] for g in counts}
    for k, total in enumerate(totals[:-1]):
        share = {g: counts[g] * total / n for g in counts}
        base = {g: min(int(np.floor(share[g])), left[g]) for g in counts}
        extra = total - sum(base.values())
        order = sorted(counts, key=lambda g: (-(share[g] - base[g]), -(left[g] - base[g]), g))
        for g in order[:extra]:
            base[g] += 1
        for g in counts:
            sizes[g].append(base[g])
            left[g] -= base[g]
    for g in counts:
        sizes[g].append(left[g])
    return sizes


class BwsInTopicLoader(BwsLoader):
    options_class = BwsInTopicOptions

    def split(self, name, options, table, data_dir):
        counts = table.groupby("topic").size().to_dict()
        sizes = apportion(counts, options["split_sizes"])
        rng = np.random.default_rng(options["split_seed"])
        parts = {s: [] for s in SPLITS}
        for topic in sorted(counts):
            rows = table[table["topic"] == topic].sort_values("id", kind="stable")
            order = rng.permutation(len(rows))
            bounds = np.cumsum([0, *sizes[topic]])
            for k, split in enumerate(SPLITS):
                parts[split].append(rows.iloc[np.sort(order[bounds[k] : bounds[k + 1]])])
        splits = {s: pd.concat(p).reset_index(drop=True) for s, p in parts.items()}
        return PreparedData(splits, self.read_unlabeled(options, data_dir), {"per_topic_sizes": sizes})


# ------------------------------------------------------------------ Spanish STS
class SpanishStsLoader(Loader):
    options_class = SpanishStsOptions
    what = "Spanish STS (SemEval 2014/2015 Spanish subtask, SemEval 2017 track 3) as <name>-input.txt / <name>-score.txt"
    source = "the SemEval STS task pages (https://semeval.github.io/); rename the files to <name>-input.txt and <name>-score.txt"

    def _pairs(self, options, data_dir, stems):
        root = resolve_path(data_dir, options["path"])
        return [(root / f"{s}-input.txt", root / f"{s}-score.txt") for s in stems]

    def files(self, name, options, data_dir):
        stems = options["train_files"] + options["test_files"]
        return [self.require(name, p) for pair in self._pairs(options, data_dir, stems) for p in pair]

    def _read(self, name, inputs, scores, report, high):
        input_lines = read_all_lines(inputs)
        score_lines = read_all_lines(scores)
        while input_lines and not input_lines[-1].strip():
            input_lines.pop()
        while len(score_lines) > len(input_lines) and not score_lines[-1].strip():
            score_lines.pop()  # a blank last score line can be an unscored last pair: keep it then
        if len(input_lines) != len(score_lines):
            raise DataError(f"dataset '{name}': {inputs} has {len(input_lines)} lines but {scores} has {len(score_lines)}")
        rows, unscored = [], 0
        for line, (text, score) in enumerate(zip(input_lines, score_lines), start=1):
            fields = text.split("\t")
            if len(fields) != 2:
                report.add(inputs, line, f"expected 2 tab-separated fields, found {len(fields)}")
            elif not score.strip():
                unscored += 1  # SemEval convention: pairs without a gold score are not evaluated
            else:
                rows.append((f"{inputs} (score in {scores.name})", line, fields[0], fields[1], score.strip()))
        return validate_pairs(raw_frame(rows, PAIR_COLUMNS), report, (0, high)), unscored

    def load(self, name, options, data_dir, report):
        tables, unscored = {}, 0
        for part, high in (("train", options["train_score_max"]), ("test", options["test_score_max"])):
            read = [self._read(name, i, s, report, high) for i, s in self._pairs(options, data_dir, options[f"{part}_files"])]
            tables[part] = pd.concat([t for t, _ in read], ignore_index=True)
            unscored += sum(u for _, u in read)
        train = tables["train"]
        if options["dev_size"] >= len(train):
            raise DataError(f"dataset '{name}': dev_size {options['dev_size']} >= {len(train)} training pairs")
        order = np.random.default_rng(options["split_seed"]).permutation(len(train))
        dev_idx = np.sort(order[: options["dev_size"]])
        splits = {
            "train": train.drop(index=dev_idx).reset_index(drop=True),
            "dev": train.iloc[dev_idx].reset_index(drop=True),
            "test": tables["test"],
        }
        return PreparedData(splits, self.read_unlabeled(options, data_dir), {"unscored_pairs": unscored})


# ------------------------------------------------------------------ generic files
class PairsFileLoader(Loader):
    options_class = PairsFileOptions
    what = "a pairs file of your own (csv, tsv, jsonl or parquet)"
    source = "your own data"

    def _paths(self, options, data_dir) -> dict[str, Path]:
        return {s: resolve_path(data_dir, options[s]) for s in SPLITS if options.get(s)}

    def files(self, name, options, data_dir):
        return [self.require_own(name, options, data_dir, s) for s in self._paths(options, data_dir)]

    def load(self, name, options, data_dir, report):
        cols = options["columns"]
        wanted = [cols["sentence1"], cols["sentence2"], cols["score"]] + ([cols["topic"]] if cols.get("topic") else [])
        names = PAIR_COLUMNS + (["topic"] if cols.get("topic") else [])
        splits = {}
        for split, path in self._paths(options, data_dir).items():
            fmt = text_format(path)
            if fmt in ("csv", "tsv"):
                header = True if options["header"] else None
                raw = raw_frame(read_delimited(path, report, delimiter="," if fmt == "csv" else "\t",
                                               header=header, columns=wanted), names)
            elif fmt == "jsonl":
                raw = raw_frame(read_jsonl(path, report, wanted, numeric={cols["score"]}), names)
            elif fmt == "parquet":
                raw = read_parquet(path, wanted, names)
            else:
                raise DataError(f"{path}: a pairs file must be .csv, .tsv, .jsonl or .parquet")
            splits[split] = validate_pairs(raw, report, tuple(options["score_range"]), f"datasets.{name}.score_range")
        return PreparedData(splits, self.read_unlabeled(options, data_dir))


TABLE_SUFFIXES = (".tsv", ".tab", ".csv", ".jsonl", ".json", ".ndjson", ".parquet", ".pq")


class TextFileLoader(Loader):
    options_class = TextFileOptions
    what = "a text file of your own, one sentence per line"
    source = "your own data"
    own_corpus = True  # its lines (or its table's text column)

    def files(self, name, options, data_dir):
        return [self.require_own(name, options, data_dir, "path")]

    def load(self, name, options, data_dir, report):
        path = self.files(name, options, data_dir)[0]
        suffixes = [s.lower() for s in path.suffixes if s.lower() != ".gz"]
        if not suffixes or suffixes[-1] not in TABLE_SUFFIXES:  # any other name: one sentence per line
            return PreparedData({}, read_text_file(path))
        # a table: a text column and optionally a topic column (topic experiments, README "Topic information")
        cols = {**TextColumns().to_json(), **(options.get("columns") or {})}  # a definition read without the schema
        table = read_text_table(path, report, {"text": cols["text"], "topic": cols["topic"]})
        return PreparedData({}, unlabeled_table(table["text"].tolist(),
                                                table["topic"].tolist() if "topic" in table else None))


class BeirLoader(Loader):
    options_class = BeirOptions
    what = "a BEIR-format retrieval dataset: corpus.jsonl, queries.jsonl, qrels/test.tsv (train.tsv, dev.tsv optional)"
    source = ("the BEIR benchmark's zip files (https://github.com/beir-cellar/beir, 'Available Datasets'), unzipped; "
              "or your own folder in that layout")
    own_corpus = True  # its passages

    def files(self, name, options, data_dir):
        root = resolve_path(data_dir, options["path"])
        return [self.require(name, path) for path in beir_files(root).values()]

    def load(self, name, options, data_dir, report):
        """No pair splits: the passages are the unlabeled corpus (GPL's input), the qrels the retrieval test."""
        data = read_beir(resolve_path(data_dir, options["path"]), report)
        sizes = {"corpus": len(data.corpus), "queries": len(data.queries),
                 **{f"qrels_{s}": len(t) for s, t in data.qrels.items()}}
        return PreparedData({}, unlabeled_table(data.corpus["passage"].tolist()), {"beir": sizes}, beir=data)


# ------------------------------------------------------------------ parallel sentences (multilingual distillation)
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


LOADERS: dict[str, Loader] = {
    "lee": LeeLoader(),
    "stsb": StsbLoader(),
    "bws_cross_topic": BwsCrossTopicLoader(),
    "bws_in_topic": BwsInTopicLoader(),
    "spanish_sts": SpanishStsLoader(),
    "pairs_file": PairsFileLoader(),
    "text_file": TextFileLoader(),
    "beir": BeirLoader(),
    "parallel_rows": ParallelRowsLoader(),
    "parallel_file": ParallelFileLoader(),
}


def get_loader(name: str) -> Loader:
    try:
        return LOADERS[name]
    except KeyError:
        raise DataError(f"unknown loader '{name}' (known: {', '.join(LOADERS)})") from None
