"""How many items a stage's job iterates over, estimated before it runs (its `items` hook; the scheduler's
formulas are augsbert.scheduling.resources'), and what the time estimate counts of a job (its data's splits and
text lengths in tokens; augsbert.scheduling.estimate prices them).

Once a stage's input artifact exists its own counts are read (`data` metrics.json sizes, `candidates`
metrics.json counts, `labels` pairs.parquet rows); before that, `DATASET_SIZES` (the sizes of the corpora
this workflow knows) or `DEFAULT_SIZE` for a dataset of your own. A `gold_subset` node (gold_fraction) has its
data's sizes with the kept share of the train pairs (`kept_pairs`).

`text_chars`: the mean characters of a dataset's texts (a text of its gold pairs, a passage of its corpus, a
sentence of a passage), which the time estimate turns into tokens: computed from the prepared data once its data
job ran, else from the loader's own source files, cached per process.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ..config.datasets import PairsFileOptions
from ..errors import DataError
from ..params import default_of

# train pairs and unlabeled sentences of the corpora config/config.yaml defines (docs/guide/data.md)
DATASET_SIZES = {
    "lee": {"train": 300, "unlabeled": 300},
    "stsb": {"train": 5749, "unlabeled": 0},
    "bws_cross_topic": {"train": 2125, "unlabeled": 0},
    "bws_in_topic": {"train": 2125, "unlabeled": 0},
    "spanish_sts": {"train": 1400, "unlabeled": 0},
    "stsb_multi_mt": {"train": 5749, "unlabeled": 0},  # the English pairs; each row is 2 parallel pairs per language
    "stsb_multi_mt_sample": {"train": 300, "unlabeled": 0},
}
DEFAULT_SIZE = {"train": 10000, "unlabeled": 0}  # a dataset of your own, before its data job has run
# dev and test pairs of the same corpora (the time estimate scores them; augsbert.scheduling.estimate)
EVAL_SIZES = {"lee": {"dev": 45, "test": 105}, "stsb": {"dev": 1500, "test": 1379},
              "stsb_multi_mt": {"dev": 1500, "test": 1379}, "stsb_multi_mt_sample": {"dev": 100, "test": 100}}
COUNT_LIMIT_BYTES = 256 * 2**20  # files counted line by line while planning; a larger one: DEFAULT_SIZE


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def kept_pairs(n: int, fraction: float) -> int:
    """Gold train pairs a `gold_subset` keeps of `n`: round(fraction x n), at least 2, at most n (the count of
    augsbert.data.pool.subset_rows, which draws them)."""
    return min(n, max(2, round(fraction * n)))


def _subset_source(plan, node):
    """The data node a not yet built `gold_subset` node draws from, or an active-learning round's labelled data
    (`active_label`: through its pool down to the gold subset); None: neither, or no plan."""
    if plan is None or node.stage not in ("gold_subset", "active_label"):
        return None
    if node.stage == "active_label":
        return _subset_source(plan, plan.nodes[dict(node.inputs)["pool"]])
    return plan.nodes[dict(node.inputs)["data"]]


def _derived_train(plan, node, source_train: int) -> int:
    """Train pairs of a not yet built gold subset (its kept share of the data's `source_train`) or active-learning
    round (its pool's, plus one batch: round(batch x source_train), at least 1)."""
    if node.stage == "gold_subset":
        return kept_pairs(source_train, float(node.params["fraction"]))
    inputs = dict(node.inputs)
    batch = float(plan.nodes[inputs["selection"]].params["batch"])
    return data_sizes(plan.nodes[inputs["pool"]], plan)["train"] + batch_pairs(batch, source_train)


def batch_pairs(batch: float, gold_pairs: int) -> int:
    """Pairs an active-learning round labels: round(`active.batch` x the dataset's gold train pairs), at least 1 (the
    selection job's choice and the sizing of the round's data before it exists)."""
    return max(1, round(batch * gold_pairs))


def epochs(node, params_class: type | None) -> int:
    """Passes a job makes over its items: its spec's `epochs`, else the default its params class declares for a spec
    that leaves it out, else (no such option, or null: a step budget decides) one."""
    value = node.params.get("epochs")
    if value is None and params_class is not None and "epochs" in getattr(params_class, "__dataclass_fields__", {}):
        value = default_of(params_class, "epochs")
    return int(value) if value else 1


def labelled_pairs(plan, node, total: bool = False) -> int:
    """Gold train pairs of a data, gold-subset or active-learning node; `total`: of the dataset it was drawn from."""
    return data_sizes((_subset_source(plan, node) or node) if total else node, plan)["train"]


def data_sizes(node, plan=None) -> dict[str, int]:
    """Train pairs and unlabeled sentences of a data node (or a gold_subset node, given the `plan`): its artifact's
    counts, else the estimate."""
    metrics = _read_json(Path(node.path) / "metrics.json")
    if metrics and isinstance(metrics.get("sizes"), dict):
        sizes = metrics["sizes"]
        return {"train": int(sizes.get("train") or 0), "unlabeled": int(sizes.get("unlabeled") or 0)}
    source = _subset_source(plan, node)
    if source is not None:
        sizes = data_sizes(source, plan)
        return {**sizes, "train": _derived_train(plan, node, sizes["train"])}
    if node.params.get("dataset") not in DATASET_SIZES:  # a dataset of your own: its files' rows where countable
        counted = counted_sizes(node)
        if counted:
            return {"train": counted["train"], "unlabeled": counted["unlabeled"]}
    return dict(DATASET_SIZES.get(node.params.get("dataset"), DEFAULT_SIZE))


def _lines(path: Path) -> int | None:
    try:
        if path.stat().st_size > COUNT_LIMIT_BYTES or path.suffix in (".parquet", ".gz"):
            return None
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)


def counted_sizes(node) -> dict[str, int] | None:
    """The rows of a `pairs_file` dataset's files (lines, less the header), before its data job has run: what a
    dataset of your own holds. None for another loader or a file that cannot be counted cheaply."""
    settings = node.settings
    if settings.get("loader") != "pairs_file":
        return None
    base = Path(settings.get("data_dir") or ".")
    sizes = {}
    for split in ("train", "dev", "test", "unlabeled"):
        if not settings.get(split):
            sizes[split] = 0
            continue
        path = Path(os.path.expanduser(settings[split]))
        lines = _lines(path if path.is_absolute() else base / path)
        if lines is None:
            return None
        header = split != "unlabeled" and settings.get("header", default_of(PairsFileOptions, "header")) \
            and path.suffix.lower() in (".csv", ".tsv")
        sizes[split] = max(0, lines - (1 if header else 0))
    return sizes


def split_sizes(node, plan=None) -> dict[str, int]:
    """Train, dev, test pairs and unlabeled sentences of a data node (or a gold_subset node, given the `plan`):
    its artifact's counts, else the files' rows (counted_sizes), else the known corpora's sizes, else
    DEFAULT_SIZE with dev and test a tenth of it."""
    metrics = _read_json(Path(node.path) / "metrics.json")
    if metrics and isinstance(metrics.get("sizes"), dict):
        return {k: int(metrics["sizes"].get(k) or 0) for k in ("train", "dev", "test", "unlabeled")}
    source = _subset_source(plan, node)
    if source is not None:
        sizes = split_sizes(source, plan)
        return {**sizes, "train": _derived_train(plan, node, sizes["train"])}
    counted = counted_sizes(node)
    if counted:
        return counted
    known = DATASET_SIZES.get(node.params.get("dataset"), DEFAULT_SIZE)
    guess = {"dev": known["train"] // 10, "test": known["train"] // 10}
    return {**known, **EVAL_SIZES.get(node.params.get("dataset"), guess)}


def dataset_items(node) -> int:
    """A data job's rows: train pairs and unlabeled sentences of the corpus (the estimate: its job makes them)."""
    sizes = DATASET_SIZES.get(node.params.get("dataset"), DEFAULT_SIZE)
    return sizes["train"] + sizes["unlabeled"]


def pool_sentences(node, plan=None) -> int:
    """Sentences a sampling or pre-training stage reads: both sides of every train pair plus the unlabeled ones (a
    gold_subset node, given the `plan`: its data's, as the pairs it leaves unlabelled stay in the pool)."""
    sizes = data_sizes(_subset_source(plan, node) or node, plan)
    return 2 * sizes["train"] + sizes["unlabeled"]


def silver_pairs(plan, candidates_key: str) -> int:
    """Candidate pairs of a sampling node: counted in its metrics.json, else top_k per pool sentence and strategy
    (`target_pairs`: the unlabelled train pairs it takes)."""
    node = plan.nodes[candidates_key]
    metrics = _read_json(Path(node.path) / "metrics.json")
    if metrics and isinstance(metrics.get("candidates"), dict):
        return sum(int(v) for v in metrics["candidates"].values())
    data = plan.nodes[dict(node.inputs)["data"]]
    strategies = node.params.get("strategies") or []
    drawn = sum(1 for s in strategies if s != "target_pairs") if strategies else 1
    pairs = pool_sentences(data, plan) * int(node.params.get("top_k") or 1) * drawn
    if "target_pairs" in strategies:  # the target's train pairs, or those a few-label gold subset left unlabelled
        labelled = data_sizes(data, plan)["train"] if _subset_source(plan, data) is not None else 0
        pairs += labelled_pairs(plan, data, total=True) - labelled
    return pairs


def label_pairs(plan, labels_key: str) -> int:
    """Pairs a labels node scores: its pairs.parquet rows once written, else its candidates plus the gold pairs
    (a Trans-Encoder `trans_encoder` node: its unlabelled pairs)."""
    node = plan.nodes[labels_key]
    path = Path(node.path) / "pairs.parquet"
    if path.is_file():
        import pyarrow.parquet as pq  # pyarrow is heavy to import, and read only once an artifact exists

        return pq.ParquetFile(path).metadata.num_rows
    inputs = dict(node.inputs)
    if "labels" in inputs:  # a stage over labelled pairs (a filter between labels and student): at most theirs
        return label_pairs(plan, inputs["labels"])
    if node.stage == "trans_encoder":
        source = plan.nodes[inputs["pairs"]]
        pairs = silver_pairs(plan, source.key) if source.stage == "candidates" else data_sizes(source, plan)["train"]
        return min(pairs, node.params.get("max_pairs") or pairs)
    pairs = data_sizes(plan.nodes[inputs["gold"]], plan)["train"]
    if "candidates" in inputs:
        pairs += silver_pairs(plan, inputs["candidates"])
    return pairs


def default_items(plan, node) -> int:
    """Training on gold, or evaluating: the train pairs of its `data` input stand for the data's size."""
    inputs = dict(node.inputs)
    if "data" in inputs:
        return data_sizes(plan.nodes[inputs["data"]], plan)["train"]
    if "eval" in inputs:  # an RCL entropy model trained on an NLI triples file, evaluated on the target
        return data_sizes(plan.nodes[inputs["eval"]], plan)["train"]
    return DEFAULT_SIZE["train"]


def pool_items(plan, node) -> int:
    """A sampling or pre-training job: the sentences of its `data` input's pool."""
    inputs = dict(node.inputs)
    return pool_sentences(plan.nodes[inputs["data"]], plan) if "data" in inputs else default_items(plan, node)


def trained_items(plan, node) -> int:
    """A pair model: the pairs of its `labels` input (teacher-scored), else its gold train pairs."""
    inputs = dict(node.inputs)
    return label_pairs(plan, inputs["labels"]) if "labels" in inputs else default_items(plan, node)


# ------------------------------------------------------------------ text lengths (the time estimate's tokens)
SCORE_FIELD_CHARS = 5  # a pairs_file row's score field and separators, left out of its texts' characters
LOAD_LIMIT_BYTES = 32 * 2**20  # a loader's source files read whole while planning; larger: not read (None)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")  # where a passage's sentences end (the inverse cloze's queries too)
TEXT_SAMPLE = 50_000  # texts of a prepared table read for its means (the first ones): planning stays fast
_TEXT_CHARS: dict[tuple, dict[str, float]] = {}  # the cache: (what was read, its files' size and mtime) -> means


def _stamp(paths) -> tuple | None:
    """(path, size, mtime) of each file, None where one cannot be read: what a cached figure was computed from."""
    try:
        return tuple((str(p), os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in paths)
    except OSError:
        return None


def _means(pairs: list[str], corpus: list[str]) -> dict[str, float]:
    """Mean characters of a text of the gold pairs (`pairs`), of a passage (`corpus`) and of a sentence of a passage
    (`sentence`); a part without texts is left out."""
    out = {}
    if pairs:
        out["pairs"] = sum(map(len, pairs)) / len(pairs)
    if corpus:
        out["corpus"] = sum(map(len, corpus)) / len(corpus)
        sentences = [s for text in corpus for s in SENTENCE_END.split(text) if s.strip()]
        out["sentence"] = sum(map(len, sentences)) / len(sentences) if sentences else out["corpus"]
    return out


def _prepared_chars(folder: Path) -> dict[str, float] | None:
    """The means of a data artifact's own tables: its train pairs, its corpus (a BEIR corpus' passages, else the
    unlabeled texts); of a large table its first TEXT_SAMPLE rows."""
    files = [folder / "train.parquet", folder / "beir" / "corpus.parquet", folder / "unlabeled.parquet"]
    found = [f for f in files if f.is_file()]
    if not found:
        return None
    import pyarrow.parquet as pq  # heavy: read only once an artifact exists

    def column(path: Path, names: tuple[str, ...]) -> list[str]:
        """The texts of columns `names` in the first TEXT_SAMPLE rows of table `path`."""
        if not path.is_file():
            return []
        table = pq.ParquetFile(path)
        wanted = [n for n in names if n in table.schema_arrow.names]
        batch = next(table.iter_batches(batch_size=TEXT_SAMPLE, columns=wanted), None) if wanted else None
        if batch is None:
            return []
        return [t for name in wanted for t in batch.column(name).to_pylist() if isinstance(t, str)]

    corpus_file = files[1] if files[1].is_file() else files[2]
    return _means(column(files[0], ("sentence1", "sentence2")),
                  column(corpus_file, ("passage",) if corpus_file == files[1] else ("text",)))


def _pairs_file_chars(node) -> dict[str, float]:
    """A `pairs_file` dataset: its train file's bytes per row over its two texts (less the score field), its
    unlabeled file's bytes per line (bytes: a file of any size is read in no time)."""
    settings, out = node.settings, {}
    base = Path(settings.get("data_dir") or ".")
    counted = counted_sizes(node) or {}
    for split, part, parts, less in (("train", "pairs", 2, SCORE_FIELD_CHARS), ("unlabeled", "corpus", 1, 0)):
        rows, path = counted.get(split), settings.get(split)
        if rows and isinstance(path, str):
            full = Path(os.path.expanduser(path))
            full = full if full.is_absolute() else base / full
            try:
                out[part] = max(1.0, (full.stat().st_size / rows - less) / parts)
            except OSError:
                continue
    if "corpus" in out:
        out["sentence"] = out["corpus"]  # a line of an unlabeled file: one sentence
    return out


def _source_files(node) -> list | None:
    """The raw files a data node's loader reads (its `inputs`), None where one is missing or the loader unknown."""
    from ..data import get_loader  # the loaders import pandas: read only for the estimate

    settings = node.settings
    if settings.get("files") == "missing" or settings.get("download") and settings.get("files") == []:
        return None
    try:
        return get_loader(settings["loader"]).inputs(settings["dataset"], settings,
                                                     Path(settings.get("data_dir") or "."))
    except (DataError, OSError):
        return None


def _source_chars(node, paths: list) -> dict[str, float]:
    """The means from the loader's own source files `paths` (the packaged Lee corpus, your STS / BWS files ...),
    read as its data job reads them (Loader.load); {} where they are larger than LOAD_LIMIT_BYTES or unreadable."""
    from ..data import RowReport, get_loader

    settings = node.settings
    try:
        if sum(os.stat(p).st_size for p in paths) > LOAD_LIMIT_BYTES:
            return {}
        prepared = get_loader(settings["loader"]).load(settings["dataset"], settings,
                                                       Path(settings.get("data_dir") or "."),
                                                       RowReport(settings["dataset"], "skip"))
    except (DataError, OSError, ValueError, KeyError):
        return {}
    train = prepared.splits.get("train")
    pairs = [*train["sentence1"], *train["sentence2"]] if train is not None else []
    corpus = prepared.unlabeled["text"].tolist() if prepared.unlabeled is not None else []
    return _means(pairs, corpus)


def text_chars(node, plan=None) -> dict[str, float]:
    """Mean characters of a data node's texts: `pairs` (a text of its gold train pairs), `corpus` (a passage of
    its corpus: a BEIR corpus, else the unlabeled texts) and `sentence` (a sentence of a passage). From the prepared
    data once its data job ran; before, a `pairs_file` dataset's bytes per row, any other loader's source files as
    its job reads them. A part that none of these gives is left out (the estimate's default then). A gold_subset
    node, given the `plan`: its data's. Cached per process by the files read (path, size, mtime)."""
    node = _subset_source(plan, node) or node
    folder = Path(node.path)
    if (folder / "metrics.json").is_file():
        key = ("prepared", _stamp(p for p in (folder / "train.parquet", folder / "beir" / "corpus.parquet",
                                             folder / "unlabeled.parquet") if p.is_file()))
        compute = lambda: _prepared_chars(folder) or {}  # noqa: E731
    elif node.settings.get("loader") == "pairs_file":
        return _pairs_file_chars(node)
    else:
        paths = _source_files(node)
        stamp = _stamp(paths) if paths is not None else None
        if stamp is None:  # a missing or unreadable file: nothing to read
            return {}
        key = ("source", node.params_json, stamp)
        compute = lambda: _source_chars(node, paths)  # noqa: E731
    if key not in _TEXT_CHARS:
        _TEXT_CHARS[key] = compute()
    return _TEXT_CHARS[key]


# ------------------------------------------------------------------ what the time estimate counts of a job
CHARS_PER_TOKEN = 4.0  # English text through a WordPiece / BPE vocabulary
DEFAULT_TEXT_CHARS = 120  # a dataset whose texts cannot be read before its data job (no source files here)
DEFAULT_QUERY_CHARS = 40  # a dataset's own queries (BEIR qrels) before its data job: a short question
DEFAULT_MAX_LENGTH = 256  # a job whose settings name no max_length


def metrics(node) -> dict:
    """A built node's metrics.json ({} before its job has run)."""
    return _read_json(Path(node.path) / "metrics.json") or {}


def input_splits(plan, node) -> dict[str, int]:
    """Train, dev and test pairs and unlabeled sentences of the data a job reads (its `data` input, else its `gold`
    input: split_sizes); {} without one."""
    inputs = dict(node.inputs)
    data = inputs.get("data") or inputs.get("gold")
    return split_sizes(plan.nodes[data], plan) if data else {}


def upstream_data(plan, node):
    """The nearest data node the job reads, directly or through the models it reads (labels: the teacher's
    data), breadth first in input order; None without one."""
    seen, queue = set(), [node]
    while queue:
        current = queue.pop(0)
        for _, key in current.inputs:
            upstream = plan.nodes.get(key)
            if upstream is None or key in seen:
                continue
            if upstream.stage == "data":
                return upstream
            seen.add(key)
            queue.append(upstream)
    return None


def text_tokens(plan, node, part: str = "pairs") -> float:
    """Tokens of one text of the job's data (special tokens left out): the mean characters of a text of its gold
    pairs (`pairs`), of a passage of its corpus (`corpus`) or of a sentence of a passage (`sentence`), computed from
    the data (text_chars), else DEFAULT_TEXT_CHARS; characters / CHARS_PER_TOKEN."""
    data = node if node.stage == "data" else upstream_data(plan, node)
    chars = text_chars(data, plan) if data is not None else {}
    return chars.get(part, DEFAULT_TEXT_CHARS) / CHARS_PER_TOKEN


def beir_rows(data, table: str) -> int | None:
    """Rows of a prepared BEIR table (`corpus`, `qrels_train`, ...) of data node `data`, None before its job."""
    path = Path(data.path) / "beir" / f"{table}.parquet"
    if not path.is_file():
        return None
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows
