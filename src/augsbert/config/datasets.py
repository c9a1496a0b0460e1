"""The options of a dataset definition (config `datasets.<name>`): the keys every loader takes (`DatasetOptions`) and
each loader's own (`LeeOptions`, ..., one class per loader; a base class holds what several loaders share:
`BwsOptions`' `path`).

The options class is the spec: `augsbert.reference.schema` writes the schema's `$defs.dataset` from these classes and
the loaders' registry (`augsbert.data.loaders.LOADERS`, each loader naming its class as `options_class`): the `loader`
enum, then one `if loader == X then properties` block per class that declares options of its own, in the
registry's order. The loaders read their defaults from here (`augsbert.params.default_of`).

They live in the config layer, not beside the loaders, because planning reads some of them (the data stage's
`on_bad_rows`, a pairs file's `header`) and the `data` package imports pandas, which planning does not.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import typing
from typing import Literal

from ..params import Params, option

SEED = {"$ref": "#/$defs/seed"}
_REQUIRED = dataclasses.MISSING


@dataclass(frozen=True, kw_only=True)
class TopicCorpusOptions(Params):
    """`topic_corpus`: a topic-labelled corpus as released (augsbert.data.topic_corpora)."""

    format: Literal["ukp_sentential", "newsgroups", "table"] = option(_REQUIRED, """
        `table`: your own .tsv / .csv (header) / .jsonl / .parquet with columns
        `text`, `topic` and optionally `split` (train / dev / test; empty = train).
        `ukp_sentential`: a directory of `<topic>.tsv` files (header topic,
        retrievedUrl, archivedUrl, sentenceHash, sentence, annotation, set).
        `newsgroups`: 20 Newsgroups bydate, the extracted
        20news-bydate-train/ and -test/ directories (scikit-learn's cache
        `20news_home/` has them) or 20news-bydate.tar.gz; headers, footers
        and quotes removed as scikit-learn does.""")
    path: str = option("topics", "Directory (or the .tar.gz) under `data_dir`, e.g. ukp_sentential or 20news_home.")
    group_level: Literal["parent", "leaf"] = option("parent", """
        `newsgroups`: the topic prompts use one of the 6 groups of thesis
        Table 3.9 (`parent`, as the thesis) or the newsgroup (`leaf`); the
        topic suite always scores on the 20 newsgroups.""")
    dev_fraction: float = option(0.1, "`newsgroups`: share of the train posts moved to dev (thesis about 10 %).",
                                 minimum=0, exclusiveMaximum=1)
    split_seed: int = option(42, "`newsgroups`: seed of that dev split.", **SEED)


@dataclass(frozen=True, kw_only=True)
class DatasetOptions(Params):
    """The keys of every dataset definition, whatever its loader."""

    # the description of `$defs.dataset` (no config section: `datasets` maps names to such definitions)
    SECTION_DESCRIPTION: typing.ClassVar[str] = """
        A dataset definition: `loader` picks the reader; the other keys depend
        on the loader (see config/README.md). Paths are relative to `data_dir`
        unless absolute."""

    loader: str = option(_REQUIRED, "Required (no default). Which reader builds the canonical tables.")
    on_bad_rows: Literal["error", "skip"] = option("error", """
        `error`: a malformed row (missing text, bad score, wrong field count)
        stops with file and line; `skip`: such rows are dropped and counted in
        the stage log and metrics.json.""")
    unlabeled: str | None = option(None, """
        Optional text file (one sentence per line) used as the unlabeled
        target corpus; `lee` defaults to the 300 Lee background documents.""")
    topic_corpus: TopicCorpusOptions | None = option(None, """
        A topic-labelled corpus as released, read as the dataset's unlabeled
        corpus (instead of `unlabeled`): each text with its topic and the
        corpus' own split. Silver pairs come from its train part
        (`candidates.pool: unlabeled`); the topic suite classifies its texts
        on the finest label (README "Topic information").""")


@dataclass(frozen=True, kw_only=True)
class LeeOptions(Params):
    split_seed: int = option(42, "Seed of the document-disjoint train/dev/test split of the 50 Lee documents.",
                             **SEED)
    split_fractions: list[float] = option([0.5, 0.2, 0.3], """
        Fractions of the 50 documents in train/dev/test (25/10/15
        documents give 300/45/105 pairs); only pairs inside one group
        are kept.""", items={"type": "number", "exclusiveMinimum": 0}, minItems=3, maxItems=3)


@dataclass(frozen=True, kw_only=True)
class StsbOptions(Params):
    path: str = option("stsb", """
        Directory with sts-train.csv/sts-dev.csv/sts-test.csv (SemEval
        release) or stsbenchmark.tsv.gz (sentence-transformers release).""")
    download: bool = option(False, """
        When the files are missing, load the hub dataset
        `sentence-transformers/stsb` instead (needs network).""")


@dataclass(frozen=True, kw_only=True)
class BwsOptions(Params):
    """What both BWS loaders read (one schema block for the two)."""

    path: str = option("bws/BWS_Argument_Similarity_Corpus.csv",
                       "The BWS Argument Similarity CSV (id,argument1,argument2,topic,score).")


@dataclass(frozen=True, kw_only=True)
class BwsCrossTopicOptions(BwsOptions):
    train_topics: list[str] = option(["Cloning", "Abortion", "Minimum wage", "Marijuana legalization",
                                      "Nuclear energy"], "Topics of the train split (AugSBERT paper / thesis code).")
    dev_topics: list[str] = option(["Death penalty"], "Topics of the dev split.")
    test_topics: list[str] = option(["Gun control", "School uniforms"], "Topics of the test split.")


@dataclass(frozen=True, kw_only=True)
class BwsInTopicOptions(BwsOptions):
    split_seed: int = option(42, "Seed of the per-topic random split.", **SEED)
    split_sizes: list[int] = option([2125, 425, 850], """
        Total train/dev/test pairs over all topics, apportioned to the
        topics in proportion to their size (425 per topic gives
        265-266 / 53-54 / 106-107).""", items={"type": "integer", "minimum": 0}, minItems=3, maxItems=3)


@dataclass(frozen=True, kw_only=True)
class SpanishStsOptions(Params):
    path: str = option("spanish_sts", "Directory holding <name>-input.txt / <name>-score.txt pairs.")
    train_files: list[str] = option(["sts14-li65", "sts14-news", "sts14-wikipedia", "sts15-newswire",
                                     "sts15-wikipedia"],
                                    "File-name stems of the training sets (SemEval 2014/2015 Spanish).")
    train_score_max: float = option(4, "Maximum score of the training files (SemEval 2014/2015 Spanish use 0-4).")
    test_files: list[str] = option(["sts17-es"], "File-name stems of the test sets (SemEval 2017 Spanish track).")
    test_score_max: float = option(5, "Maximum score of the test files (0-5).")
    dev_size: int = option(220, "Random training pairs held out as dev split.", minimum=1)
    split_seed: int = option(42, "Seed of the dev hold-out.", **SEED)


@dataclass(frozen=True, kw_only=True)
class PairColumns(Params):
    """A pairs file's `columns`."""

    sentence1: str = option("sentence1", "Column of the first text.")
    sentence2: str = option("sentence2", "Column of the second text.")
    score: str = option("score", "Column of the similarity score.")
    topic: str | None = option(None, "Optional topic column.")


@dataclass(frozen=True, kw_only=True)
class PairsFileOptions(Params):
    train: str = option(_REQUIRED, "Required (no default). Train pairs file (.csv, .tsv, .jsonl, .parquet; .gz "
                                   "allowed for text formats).")
    dev: str | None = option(None, "Dev pairs file; null = no dev split.")
    test: str = option(_REQUIRED, "Required (no default). Test pairs file.")
    columns: PairColumns = option(PairColumns, "Column names in the files for each canonical field.")
    score_range: list[float] = option([0, 1], "Declared [min, max] of the raw scores; rescaled to [0, 1]. Scores "
                                      "outside are bad rows.", minItems=2, maxItems=2)
    header: bool = option(True, "CSV/TSV files start with a header row (else columns are named 0, 1, 2 ...).")


@dataclass(frozen=True, kw_only=True)
class TextColumns(Params):
    """A text_file table's `columns`."""

    text: str = option("text", "Column of the sentence.")
    topic: str | None = option(None, "Optional topic column.")


@dataclass(frozen=True, kw_only=True)
class TextFileOptions(Params):
    path: str = option(_REQUIRED, """
        Required (no default). Text file with one sentence per line (empty
        lines are skipped), or a table (.tsv / .csv with a header row, .jsonl,
        .parquet) with a text column and optionally a topic column
        (`columns`), for topic prompts and the topic suite.""")
    columns: TextColumns = option(TextColumns, "Column names of a table `path` (unused for a .txt file).")


@dataclass(frozen=True, kw_only=True)
class BeirOptions(Params):
    path: str = option(_REQUIRED, """
        Required (no default). A BEIR-format folder: corpus.jsonl
        (`_id`, `title`, `text`), queries.jsonl (`_id`, `text`) and
        qrels/test.tsv (qrels/train.tsv, dev.tsv optional; header
        query-id, corpus-id, score). The passages (title + text) are the
        unlabeled corpus; the test qrels are what the `retrieval` suite
        scores (nDCG@10, MRR@10, Recall@100). No pair splits.""")


# stsb-multi-mt's languages besides English (PhilipMay/stsb-multi-mt: STS-B machine-translated by DeepL)
STSB_MULTI_MT_LANGUAGES = ["de", "es", "fr", "it", "nl", "pl", "pt", "ru", "zh", "ja"]
LANGUAGE = {"pattern": "^[A-Za-z][A-Za-z0-9_-]{0,15}$"}  # a language code (it names files: no path characters)


@dataclass(frozen=True, kw_only=True)
class ParallelRowsOptions(Params):
    """`parallel_rows`: STS files translated row for row (augsbert.data.parallel_loaders.ParallelRowsLoader)."""

    path: str = option("stsb-multi-mt", """
        Directory with one file per language and split, named by `file_names`: row i of every language's file is row
        i of the source language's file translated (stsb-multi-mt's layout). Comma-separated, no header:
        sentence1, sentence2, score.""")
    file_names: str = option("stsb-{language}-{split}.csv", """
        File name of a language's split in `path`: `{language}` and `{split}` (train, dev, test) are filled in.""",
                        pattern=r"^[^/\\]+$")
    source_language: str = option("en", """
        The language of the originals (the teacher's): its files are the dataset's pair splits (an STS dataset
        like `stsb`), the other languages' files their translations.""", **LANGUAGE)
    languages: list[str] = option(STSB_MULTI_MT_LANGUAGES, """
        The translations' languages (stsb-multi-mt's ten by default). The multilingual student learns them all;
        each is evaluated (monolingual and cross-lingual STS from the test files, translation retrieval).""",
                                  items={"type": "string", **LANGUAGE}, minItems=1, uniqueItems=True)
    score_range: list[float] = option([0, 5], "Declared [min, max] of the scores (STS-B: 0-5); rescaled to [0, 1].",
                                      minItems=2, maxItems=2)
    bundled: bool = option(False, """
        Read the sample that ships with augsbert instead of `path`: 300 train, 100 dev and 100 test rows of
        stsb-multi-mt's `images` genre (image captions, CC BY-SA; docs/methods/multilingual.md) in en, de, es and
        fr, for the offline demo.""")


@dataclass(frozen=True, kw_only=True)
class ParallelColumns(Params):
    """A parallel file's `columns`."""

    source: str = option("source", "Column of the original (the source language's) sentence.")
    target: str = option("target", "Column of its translation.")
    language: str | None = option(None, "Optional column of each row's target language (else `language`).")


@dataclass(frozen=True, kw_only=True)
class ParallelFileOptions(Params):
    """`parallel_file`: a table of translations of your own (augsbert.data.parallel_loaders.ParallelFileLoader)."""

    path: str = option(_REQUIRED, """
        Required (no default). The parallel sentences the student trains on: a .tsv (tab) or .csv (comma) file
        with a header row naming `columns` (source, target), one translation a row (.gz allowed).""")
    test: str | None = option(None, """
        Held-out parallel sentences of the same layout for the translation-retrieval test; null = none (the
        student is then tested on English only). Its sentences never train: a train row holding one is dropped.""")
    columns: ParallelColumns = option(ParallelColumns, "Column names in the files.")
    language: str | None = option(None, """
        The target language of every row (a code: de, fr, ...); null = each row's `columns.language`.""",
                                  **LANGUAGE)
    source_language: str = option("en", "The language of the `source` column (the teacher's).", **LANGUAGE)
