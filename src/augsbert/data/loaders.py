"""Dataset loaders: raw files -> canonical train/dev/test pair tables.

Each loader knows which raw files it needs (`inputs`, checked while the
workflow is planned, so a missing file fails before any job starts) and how to
read them (`load`). Formats and splits follow shared/spec/datasets.md.
"""

from __future__ import annotations

import csv
from abc import abstractmethod
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

from ..config.datasets import (
    BeirOptions,
    BwsCrossTopicOptions,
    BwsInTopicOptions,
    LeeOptions,
    PairsFileOptions,
    SpanishStsOptions,
    StsbOptions,
    TextColumns,
    TextFileOptions,
)
from .readers import (
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
    raw_frame,
    unlabeled_table,
    validate_pairs,
)
from .beir import beir_files, read_beir
from .loader_base import Loader, PreparedData, missing_file, read_text_file
from .parallel_loaders import ParallelFileLoader, ParallelRowsLoader


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
