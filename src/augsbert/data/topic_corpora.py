"""Topic-labelled corpora as their owners release them (thesis 3.5, 3.6, 5.6).

A dataset's `topic_corpus` option reads one of them into the dataset's
unlabeled table, with columns `text`, `topic` (the label that prompts use),
`fine_topic` (the finest label the corpus has; the topic suite scores on it)
and `split` (the corpus' own train / dev / test). Silver pairs are drawn from
its train part only (`candidates.pool: unlabeled`), as the thesis built its
pair sets (UKP: 18,341 train sentences x 4 = 73,364 pairs; 20 Newsgroups:
9,428 train posts x 8 = 75,424).

- `ukp_sentential`: the UKP Sentential Argument Mining corpus (Stab et al.
  2018), one `<topic>.tsv` per topic with the header `topic retrievedUrl
  archivedUrl sentenceHash sentence annotation set` (set: train / val / test).
- `table`: your own corpus, a .tsv / .csv (header) / .jsonl / .parquet file with
  columns `text`, `topic` and optionally `split` (train / dev / test).
- `newsgroups`: 20 Newsgroups "bydate" (18,846 posts), either the extracted
  `20news-bydate-train/` and `20news-bydate-test/` directories (also the
  scikit-learn cache layout `~/scikit_learn_data/20news_home/`) or the
  `20news-bydate.tar.gz` release. Headers, signature blocks and quoted replies
  are removed with scikit-learn's own functions (its `remove=('headers',
  'footers', 'quotes')`), as the thesis did; `group_level: parent` labels each
  post with one of the six groups of thesis Table 3.9, `leaf` with its
  newsgroup. 10 % of the train posts (seeded) form the dev split (thesis 3.6).
"""

from __future__ import annotations

import csv
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd

from .readers import not_a_file, open_text, read_delimited, read_text_table, resolve_path, text_format
from .tables import DataError, MissingDataError, RowReport, normalise_text, raw_frame

# thesis Table 3.9: the six overarching groups of the 20 newsgroups
NEWSGROUP_PARENTS = {
    "comp.graphics": "Computer", "comp.os.ms-windows.misc": "Computer", "comp.sys.ibm.pc.hardware": "Computer",
    "comp.sys.mac.hardware": "Computer", "comp.windows.x": "Computer",
    "rec.autos": "Recreational", "rec.motorcycles": "Recreational", "rec.sport.baseball": "Recreational",
    "rec.sport.hockey": "Recreational",
    "sci.crypt": "Science", "sci.electronics": "Science", "sci.med": "Science", "sci.space": "Science",
    "misc.forsale": "For Sale",
    "talk.politics.misc": "Politics", "talk.politics.guns": "Politics", "talk.politics.mideast": "Politics",
    "talk.religion.misc": "Religion", "alt.atheism": "Religion", "soc.religion.christian": "Religion",
}
NEWSGROUP_PARTS = {"20news-bydate-train": "train", "20news-bydate-test": "test"}
NEWSGROUP_TAR = "20news-bydate.tar.gz"
UKP_SPLITS = {"train": "train", "val": "dev", "test": "test"}
COLUMNS = ["text", "topic", "fine_topic", "split"]

WHERE = {
    "ukp_sentential": ("UKP Sentential Argument Mining corpus: one <topic>.tsv per topic",
                       "https://tudatalib.ulb.tu-darmstadt.de (UKP Sentential Argument Mining Corpus; the sentences "
                       "must be re-crawled with the corpus' own script, licence)"),
    "newsgroups": ("20 Newsgroups, bydate version: 20news-bydate-train/ and 20news-bydate-test/ (or the .tar.gz)",
                   "http://qwone.com/~jason/20Newsgroups/20news-bydate.tar.gz, or the scikit-learn cache "
                   "~/scikit_learn_data/20news_home/ after sklearn.datasets.fetch_20newsgroups()"),
}


def _missing(dataset: str, path: Path, fmt: str) -> MissingDataError:
    what, source = WHERE[fmt]
    kind = not_a_file(path) if fmt == "table" else None  # (the other formats are folders)
    if kind:
        return MissingDataError(f"dataset '{dataset}': {path} {kind} (topic_corpus, format {fmt}); point "
                                f"`datasets.{dataset}.topic_corpus.path` at the data file\n  what it is: {what}")
    return MissingDataError(
        f"dataset '{dataset}': missing {path} (topic_corpus, format {fmt})\n"
        f"  what it is: {what}\n  where to get it: {source}\n"
        f"  where to put it: {path} (or set `datasets.{dataset}.topic_corpus.path`)")


def corpus_inputs(dataset: str, options: dict, data_dir: Path) -> list[Path]:
    """The files / directories the corpus is read from (keyed by content); raises when absent."""
    fmt, root = options["format"], resolve_path(data_dir, options["path"])
    if fmt == "table":
        if not root.is_file():
            raise _missing(dataset, root, fmt)
        return [root]
    if fmt == "ukp_sentential":
        files = sorted(root.glob("*.tsv")) if root.is_dir() else []
        if not files:
            raise _missing(dataset, root / "<topic>.tsv", fmt)
        return files
    if root.is_file() and root.name.endswith(".tar.gz"):
        return [root]
    if (root / NEWSGROUP_TAR).is_file() and not all((root / p).is_dir() for p in NEWSGROUP_PARTS):
        return [root / NEWSGROUP_TAR]
    parts = [root / p for p in NEWSGROUP_PARTS]
    for part in parts:
        if not part.is_dir():
            raise _missing(dataset, part, fmt)
    return parts


def read_topic_corpus(dataset: str, options: dict, data_dir: Path, report: RowReport) -> tuple[pd.DataFrame, dict]:
    """The corpus as an unlabeled table with topics and splits, and facts for metrics.json
    (texts left empty by the cleaning are dropped and counted)."""
    paths = corpus_inputs(dataset, options, data_dir)
    if options["format"] == "table":
        table = _table(paths[0], report)
    elif options["format"] == "ukp_sentential":
        table = _ukp(paths, report)
    else:
        table = _newsgroups(paths, options)
    table["text"] = table["text"].map(normalise_text)
    empty = table["text"] == ""  # e.g. posts that were only headers and quotes
    table = table[~empty].reset_index(drop=True)
    if table["topic"].nunique() < 2:
        raise DataError(f"dataset '{dataset}': topic_corpus has {table['topic'].nunique()} topic(s); need two")
    info = {"format": options["format"], "texts": len(table), "empty_after_cleaning": int(empty.sum()),
            "splits": table["split"].value_counts().to_dict(), "topics": table["topic"].value_counts().to_dict()}
    return table[COLUMNS], info


def _table(path: Path, report: RowReport) -> pd.DataFrame:
    """Your own corpus: columns `text`, `topic` and, optionally, `split` (train / dev / test; empty = train)."""
    header = _columns_of(path, text_format(path))
    table = read_text_table(path, report, {"text": "text", "topic": "topic",
                                           "split": "split" if "split" in header else None})
    if "split" not in table:
        table["split"] = "train"
    table["split"] = table["split"].replace("", "train")
    for file, line, value in zip(table["_file"], table["_line"], table["split"]):
        if value not in ("train", "dev", "test"):
            report.add(file, line, f"split {value!r} is not train, dev or test")
    report.settle()
    table = table[table["split"].isin(["train", "dev", "test"]) & (table["topic"] != "")]
    return table.assign(fine_topic=table["topic"]).reset_index(drop=True)


def _columns_of(path: Path, fmt: str) -> list[str]:
    """Column names of a table file (header row, first JSON object, parquet schema)."""
    import json

    import pyarrow.parquet as pq

    if fmt == "parquet":
        return list(pq.read_schema(path).names)
    with open_text(path) as handle:
        first = handle.readline()
    if fmt == "jsonl":
        return list(json.loads(first)) if first.strip() else []
    return [c.strip() for c in first.rstrip("\r\n").split("," if fmt == "csv" else "\t")]


def _ukp(files: list[Path], report: RowReport) -> pd.DataFrame:
    frames = []
    for path in files:
        # tab-separated, sentences never hold a tab: no quoting (a sentence may begin with a quote mark)
        rows = read_delimited(path, report, delimiter="\t", header=True, columns=["topic", "sentence", "set"],
                              quoting=csv.QUOTE_NONE)
        frames.append(raw_frame(rows, ["topic", "sentence", "set"]))
    raw = pd.concat(frames, ignore_index=True)
    split = raw["set"].astype(str).str.strip().map(UKP_SPLITS)
    for file, line, value in zip(raw["_file"], raw["_line"], raw["set"]):
        if str(value).strip() not in UKP_SPLITS:
            report.add(file, line, f"set {value!r} is not train, val or test")
    topic = raw["topic"].astype(str).map(normalise_text)
    table = pd.DataFrame({"text": raw["sentence"].astype(str), "topic": topic, "fine_topic": topic, "split": split})
    report.settle()
    return table[table["split"].notna()].reset_index(drop=True)


def _strip(text: str) -> str:
    """scikit-learn's header / footer / quote removal (`fetch_20newsgroups(remove=...)`), in its order."""
    try:
        from sklearn.datasets._twenty_newsgroups import (
            strip_newsgroup_footer,
            strip_newsgroup_header,
            strip_newsgroup_quoting,
        )
    except ImportError as err:  # pragma: no cover - scikit-learn is a dependency
        raise DataError(f"20 Newsgroups cleaning needs scikit-learn's functions: {err}") from None
    return strip_newsgroup_footer(strip_newsgroup_quoting(strip_newsgroup_header(text)))


def _posts(paths: list[Path]):
    """(part, newsgroup, raw text) of every post, in a fixed order; latin-1 as scikit-learn decodes them."""
    if len(paths) == 1:  # the .tar.gz release
        with tarfile.open(paths[0], "r:gz") as tar:
            order = list(NEWSGROUP_PARTS)
            members = [(Path(m.name).parts, m) for m in tar.getmembers() if m.isfile()]
            members = sorted(((p, m) for p, m in members if len(p) >= 3 and p[-3] in NEWSGROUP_PARTS),
                             key=lambda pm: (order.index(pm[0][-3]), pm[0][-2], pm[0][-1]))  # as the directories
            for parts, member in members:
                data = tar.extractfile(member).read()  # never extracted to disk: no path traversal
                yield NEWSGROUP_PARTS[parts[-3]], parts[-2], data.decode("latin-1")
        return
    for part in paths:
        for group in sorted(p for p in part.iterdir() if p.is_dir()):
            for post in sorted(group.iterdir(), key=lambda p: p.name):
                if post.is_file():
                    yield NEWSGROUP_PARTS[part.name], group.name, post.read_bytes().decode("latin-1")


def _newsgroups(paths: list[Path], options: dict) -> pd.DataFrame:
    rows = [(part, group, _strip(text)) for part, group, text in _posts(paths)]
    if not rows:
        raise DataError(f"{paths[0]}: no 20 Newsgroups posts found")
    unknown = sorted({g for _, g, _ in rows} - set(NEWSGROUP_PARENTS))
    if unknown and options["group_level"] == "parent":
        raise DataError(f"{paths[0]}: newsgroup(s) {unknown} have no parent group (thesis Table 3.9)")
    table = pd.DataFrame(rows, columns=["split", "fine_topic", "text"])
    table["topic"] = table["fine_topic"].map(NEWSGROUP_PARENTS) if options["group_level"] == "parent" \
        else table["fine_topic"]
    train = np.flatnonzero(table["split"].to_numpy() == "train")
    n_dev = int(round(options["dev_fraction"] * len(train)))
    dev = np.random.default_rng(options["split_seed"]).choice(train, n_dev, replace=False)
    table.loc[dev, "split"] = "dev"
    return table
