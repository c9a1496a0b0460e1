"""Stages `label_pairs` (`labels`) and `label_pairs_shard` (`label_shard`): the teacher scores pairs ("silver" labels).

Scored are the gold train pairs ("label regularisation", thesis 5.2; also the
reference distribution of the KDE strategies) and the sampled candidates. The
KDE strategies then keep the candidates whose scores follow the gold score
distribution. Besides `pairs.parquet` the stage writes
`sampling_stats.json` and `score_densities.png` (gold vs every strategy, as
thesis Figures 6.3-6.5).

Candidates are read from parquet in pieces of SCORE_CHUNK rows (pyarrow
batches) and scored piece by piece, so no job holds all candidate texts; the
teacher sorts each piece by length as it sorted the whole list before
(identical scores up to SCORE_CHUNK candidates). With `candidates.shards`
N > 1, N `label_shard` jobs score disjoint ranges of whole pieces and
`labels` merges their scores; both ways end in `write_pairs`, so the merged
artifact is the unsharded one.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from scipy import stats

from ..store.artifacts import artifact_dir, read_json, write_json
from ..data import DataError
from ..models import resolve_device
from ..models.architectures import ARCHITECTURES
from ..params import read_params
from ..stages.labels import LabelShardParams, LabelsParams
from ..stages.teacher import TeacherParams
from ..sampling import iterative_kde, kde_sample
from ..sampling.pool import pair_key
from ..sampling.shards import shard_rows
from ..training.pairs import pairs_of
from ..data.pool import read_split
from ..data.tables import normalise_text
from ..stages.teacher_ensemble import MEMBER_INPUT
from ..data.prompts import prompt_pairs, topic_map
from ..models.ensemble import combine

log = logging.getLogger(__name__)

SCORE_CHUNK = 1 << 18  # candidate pairs read and scored per call: bounded memory, one call below it


def _select(strategy: str, reference: np.ndarray, scores: np.ndarray, seed: int,
            iterative_accept: str = "at_least") -> np.ndarray:
    """Indices of the candidates a selection strategy keeps (all for the sampling-only strategies)."""
    try:
        if strategy == "kde":
            return kde_sample(reference, scores, seed)
        if strategy == "iterative_kde":
            return iterative_kde(reference, scores, seed=seed, accept=iterative_accept)
    except DataError as err:  # e.g. gold scores without spread: say which stage and strategy met them
        raise DataError(f"labels stage, strategy {strategy}: {err}") from err
    return np.arange(len(scores))


def with_topics(pairs: pd.DataFrame, topics: dict[str, str], pair_topic: pd.Series | None = None) -> pd.DataFrame:
    """`pairs` with `topic1` / `topic2`: the pair's own topic where given, else each text's (`topic_map`)."""
    out = pairs.copy()
    for side, column in ((1, "sentence1"), (2, "sentence2")):
        looked_up = out[column].map(lambda t: topics.get(normalise_text(t), ""))
        if pair_topic is not None:
            own = pd.Series(pair_topic.fillna("").astype(str).to_numpy(), index=out.index)
            looked_up = own.where(own != "", looked_up)
        out[f"topic{side}"] = looked_up
    return out


def plot_densities(path: Path, reference: np.ndarray, pairs: pd.DataFrame, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lo = min(float(reference.min()), float(pairs["score"].min()))
    hi = max(float(reference.max()), float(pairs["score"].max()))
    grid = np.linspace(lo - 0.05, hi + 0.05, 400)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(grid, stats.gaussian_kde(reference)(grid), color="black", lw=2.5, label=f"gold (n={len(reference)})")
    for strategy, group in pairs.groupby("strategy", sort=False):
        if strategy != "gold" and len(group) > 1 and group["score"].std() > 0:
            ax.plot(grid, stats.gaussian_kde(group["score"])(grid), lw=1.5, label=f"{strategy} (n={len(group)})")
    ax.set_xlabel("teacher score")
    ax.set_ylabel("density")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_rows(path: str | Path, start: int, stop: int, chunk: int | None = None,
              columns: list[str] | None = None) -> Iterator[tuple[int, pa.Table]]:
    """Rows `[start, stop)` of a parquet file as `(first row, table)` pieces of at most `chunk` rows
    (SCORE_CHUNK), cut at multiples of `chunk` counted from row 0: a shard that starts at such a multiple
    reads the very pieces a whole read does. Only the row groups that hold the range are read."""
    import pyarrow.parquet as pq

    chunk = chunk or SCORE_CHUNK
    if stop <= start:
        return
    source = pq.ParquetFile(path)
    sizes = [source.metadata.row_group(g).num_rows for g in range(source.metadata.num_row_groups)]
    offsets = np.cumsum([0, *sizes])
    first = max(0, int(np.searchsorted(offsets, start, side="right")) - 1)
    position, pending, pending_rows, emitted = int(offsets[first]), [], 0, start
    for batch in source.iter_batches(batch_size=min(chunk, 65536), row_groups=range(first, len(sizes)),
                                     columns=columns):
        lo, hi = max(position, start), min(position + batch.num_rows, stop)
        if hi > lo:
            pending.append(batch.slice(lo - position, hi - lo))
            pending_rows += hi - lo
        position += batch.num_rows
        boundary = (emitted // chunk + 1) * chunk  # the next multiple of chunk
        while pending_rows and (emitted + pending_rows >= boundary or position >= stop):
            table = pa.Table.from_batches(pending)
            size = min(pending_rows, boundary - emitted)
            yield emitted, table.slice(0, size)
            rest = table.slice(size)
            pending, pending_rows, emitted = rest.to_batches(), rest.num_rows, emitted + size
            boundary = (emitted // chunk + 1) * chunk
        if position >= stop:
            return


def candidate_count(path: str | Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


class TrainedPairModel:
    """A teacher artifact's model (CE / CBE) with the parameters it was trained with (its spec.json)."""

    def __init__(self, directory: str | Path, device: str):
        self.dir = Path(directory)
        self.params = TeacherParams.from_json(read_json(self.dir / "spec.json")["params"], f"{self.dir}/spec.json params")
        self.arch_name = self.params.arch
        self.arch = ARCHITECTURES[self.arch_name]
        self.model = self.arch.load(self.dir / "model", device)

    def score(self, pairs: list[tuple[str, str]], batch_size: int) -> np.ndarray:
        return np.asarray(self.arch.predict(self.model, pairs, batch_size, self.params), dtype=np.float64)


class Teacher:
    """The teacher model and how it is shown a pair (topic prompts, thesis 5.6.1).

    An ensemble teacher (`teacher.ensemble`: the `teacher` input is a `teacher_ensemble` artifact) scores a
    pair with each member (inputs `member_<k>`) and combines the scores as its ensemble.json says.
    """

    def __init__(self, spec: dict, params: LabelsParams | LabelShardParams, device: str):
        self.dir = Path(spec["inputs"]["teacher"])
        self.ensemble = read_json(self.dir / "ensemble.json") if (self.dir / "ensemble.json").is_file() else None
        if self.ensemble:
            members = [Path(spec["inputs"][MEMBER_INPUT.format(k)]) for k in range(len(self.ensemble["members"]))]
            for directory, recorded in zip(members, self.ensemble["members"]):
                if directory.name != recorded["key"]:
                    raise DataError(f"{self.dir}/ensemble.json: member {recorded['key']}, but the labelling spec "
                                    f"gives {directory}")
            self.members = [TrainedPairModel(directory, device) for directory in members]
            self.arch_name = "+".join(m.arch_name for m in self.members)
            log.info("ensemble teacher: %d members (%s), combined by %s", len(self.members), self.arch_name,
                     self.ensemble["combine"])
        else:
            self.members = [TrainedPairModel(self.dir, device)]
            self.arch_name = self.members[0].arch_name
        self.batch = params.batch_size
        self.delimiter = params.topic_prompt
        self.topics = {}
        if self.delimiter:  # the teacher scores ((t1, a), (t2, b)); pairs keep plain text + topics
            self.topics = topic_map(spec["inputs"]["topics"])
            log.info("topic prompts on (delimiter %r): %d topic-labelled sentences", self.delimiter, len(self.topics))

    # the (first) member's model, architecture and training parameters
    arch = property(lambda self: self.members[0].arch)
    model = property(lambda self: self.members[0].model)
    params = property(lambda self: self.members[0].params)

    def score(self, frame: pd.DataFrame) -> np.ndarray:
        shown = pairs_of(prompt_pairs(frame, self.delimiter) if self.delimiter else frame)
        if not self.ensemble:
            return self.members[0].score(shown, self.batch)
        scores = np.stack([m.score(shown, self.batch) for m in self.members])
        return combine(scores, self.ensemble["combine"], self.ensemble.get("statistics"))

    def score_rows(self, path: str | Path, start: int, stop: int, out: np.ndarray) -> None:
        """Scores of candidate rows `[start, stop)` into `out[0 : stop - start]`, one chunk in memory at a time."""
        for first, table in read_rows(path, start, stop, columns=["sentence1", "sentence2"]):
            frame = table.to_pandas()
            if self.delimiter:
                frame = with_topics(frame, self.topics)
            out[first - start:first - start + len(frame)] = self.score(frame)
            log.info("scored %d / %d candidate pairs", first - start + len(frame), stop - start)


def _pair_hashes(pairs: Iterable[tuple[str, str]], count: int) -> np.ndarray:
    """128-bit BLAKE2b digest of each unordered pair, as 16-byte records: deduplication without holding the
    texts (equal digests of different pairs: probability below 1e-20 for a billion pairs)."""
    out = np.empty(count, dtype="V16")
    for row, (a, b) in enumerate(pairs):
        a, b = pair_key(a, b)
        out[row] = hashlib.blake2b(f"{len(a)}:{a}{b}".encode(), digest_size=16).digest()
    return out


def _candidate_hashes(path: str | Path, count: int) -> np.ndarray:
    def pairs():
        for _, table in read_rows(path, 0, count, columns=["sentence1", "sentence2"]):
            yield from zip(table.column(0).to_pylist(), table.column(1).to_pylist())

    return _pair_hashes(pairs(), count)


def _kept_frames(path: Path, kept: np.ndarray) -> Iterator[pd.DataFrame]:
    """Candidate rows `kept`, in that order, with their row number: streamed when in file order, else (iterative
    KDE keeps in order of acceptance) read as one span of that strategy's rows."""
    if not len(kept):
        return
    columns = ["sentence1", "sentence2", "strategy"]
    lo, hi = int(kept.min()), int(kept.max()) + 1
    if np.all(np.diff(kept) > 0):
        for first, table in read_rows(path, lo, hi, columns=columns):
            inside = kept[(kept >= first) & (kept < first + table.num_rows)]
            if len(inside):
                yield table.take(pa.array(inside - first)).to_pandas().assign(row=inside)
        return
    span = pa.concat_tables([table for _, table in read_rows(path, lo, hi, columns=columns)])
    yield span.take(pa.array(kept - lo)).to_pandas().assign(row=kept)


def write_pairs(tmp: Path, spec: dict, params: LabelsParams, teacher: Teacher, gold: pd.DataFrame,
                gold_scored: pd.DataFrame, scores: np.ndarray | None) -> dict:
    """Select by strategy, deduplicate, write pairs.parquet piece by piece, sampling_stats.json and the plot."""
    import pyarrow.parquet as pq

    path = Path(spec["inputs"]["candidates"]) / "candidates.parquet" if scores is not None else None
    reference = (gold_scored["score"] if params.kde_reference == "teacher" else gold["score"]).to_numpy()
    per_strategy, selected = {}, []  # selected: (strategy, kept candidate rows in order)
    if scores is not None and len(scores):
        column = pq.read_table(path, columns=["strategy"]).column(0).combine_chunks().dictionary_encode()
        codes, names = column.indices.to_numpy(zero_copy_only=False), column.dictionary.to_pylist()
        present, first_rows = np.unique(codes, return_index=True)
        for code in present[np.argsort(first_rows)]:  # strategies in order of appearance
            strategy, rows = names[code], np.flatnonzero(codes == code)
            kept = rows[_select(strategy, reference, scores[rows], params.seed, params.iterative_kde_accept)]
            selected.append((strategy, kept))
            per_strategy[strategy] = {"candidates": len(rows), "kept": len(kept),
                                      "kept_fraction": round(len(kept) / len(rows), 4)}
    # the same pair from two strategies (or twice in the gold): the first one wins
    gold_part = gold_scored if params.relabel_gold else gold_scored.iloc[:0]
    keys = [_pair_hashes(zip(gold_part["sentence1"], gold_part["sentence2"]), len(gold_part))]
    if selected:
        every = _candidate_hashes(path, len(scores))
        keys += [every[kept] for _, kept in selected]
    keys = np.concatenate(keys)
    unique = np.zeros(len(keys), dtype=bool)
    unique[np.unique(keys, return_index=True)[1]] = True
    if not unique.all():
        log.info("dropping %d pair(s) that an earlier strategy already emitted", int((~unique).sum()))

    columns = ["sentence1", "sentence2", "strategy", *(["gold_score"] if params.relabel_gold else []),
               *(["topic1", "topic2"] if teacher.delimiter else []), "score", "teacher"]
    schema = pa.schema([(c, pa.float64() if c in ("gold_score", "score") else pa.string()) for c in columns])
    final_strategy, final_score = [], []

    def emit(writer, frame: pd.DataFrame) -> None:
        frame = frame.assign(teacher=teacher.dir.name)
        for c in columns:
            if c not in frame:
                frame[c] = np.nan  # gold_score of a candidate
        writer.write_table(pa.Table.from_pandas(frame[columns], schema=schema, preserve_index=False))
        final_strategy.append(frame["strategy"].to_numpy(dtype=object))
        final_score.append(frame["score"].to_numpy(dtype=np.float64))

    with pq.ParquetWriter(tmp / "pairs.parquet", schema) as writer:
        emit(writer, gold_part[unique[:len(gold_part)]])
        offset = len(gold_part)
        for strategy, kept in selected:
            mask, offset = unique[offset:offset + len(kept)], offset + len(kept)
            for frame in _kept_frames(path, kept[mask]):
                frame["score"] = scores[frame.pop("row").to_numpy()]
                emit(writer, with_topics(frame, teacher.topics) if teacher.delimiter else frame)
    pairs = pd.DataFrame({"strategy": np.concatenate(final_strategy), "score": np.concatenate(final_score)})
    for strategy, group in pairs.groupby("strategy", sort=False):
        entry = per_strategy.setdefault(strategy, {"candidates": len(group), "kept": len(group),
                                                   "kept_fraction": 1.0})
        entry.update(after_dedup=len(group),
                     ks_to_gold=round(float(stats.ks_2samp(group["score"], reference).statistic), 4),
                     score_mean=round(float(group["score"].mean()), 4),
                     score_std=round(float(group["score"].std(ddof=0)), 4))
    candidate_stats = read_json(Path(spec["inputs"]["candidates"]) / "metrics.json") \
        if "candidates" in spec["inputs"] else None
    sampling_stats = {
        "teacher": teacher.dir.name, "teacher_arch": teacher.arch_name,
        "gold_reference": params.kde_reference, "reference_pairs": len(reference),
        "strategies": per_strategy, "pairs": len(pairs),
        "duplicates_across_strategies": int((~unique).sum()),
        "excluded": candidate_stats["excluded"] if candidate_stats else {},
        "pool_sentences": candidate_stats["pool_sentences"] if candidate_stats else None,
    }
    write_json(tmp / "sampling_stats.json", sampling_stats)
    plot_densities(tmp / "score_densities.png", reference, pairs, f"silver vs gold scores ({teacher.arch_name} teacher)")
    log.info("labelled %d pairs: %s", len(pairs), {k: v["kept"] for k, v in per_strategy.items()})
    return sampling_stats


def _gold(spec: dict, teacher: Teacher) -> tuple[pd.DataFrame, pd.DataFrame]:
    gold = read_split(spec["inputs"]["gold"], "train")  # the teacher's gold: target (in-domain) or source
    gold_scored = gold[["sentence1", "sentence2"]].assign(strategy="gold", gold_score=gold["score"])
    if teacher.delimiter:
        gold_scored = with_topics(gold_scored, teacher.topics, gold.get("topic"))
    gold_scored["score"] = teacher.score(gold_scored)
    return gold, gold_scored


def _merged_scores(spec: dict, shards: int, count: int) -> np.ndarray:
    """The label shards' scores, checked to tile the candidates exactly."""
    scores, next_row = np.empty(count, dtype=np.float64), 0
    for shard in range(shards):
        shard_dir = Path(spec["inputs"][f"label_shard_{shard}"])
        start, stop = read_json(shard_dir / "metrics.json")["rows"]
        if start != next_row:
            raise DataError(f"{shard_dir}: scores of rows {start}-{stop}, expected from row {next_row}")
        scores[start:stop] = np.load(shard_dir / "scores.npy", allow_pickle=False)
        next_row = stop
    if next_row != count:
        raise DataError(f"the label shards end at row {next_row} of {count} candidates")
    return scores


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    """Stage `labels`: score every candidate here, or (candidates.shards > 1) take the label shards' scores."""
    params = read_params(LabelsParams, spec)
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        teacher = Teacher(spec, params, device)
        gold, gold_scored = _gold(spec, teacher)
        scores = None
        if "candidates" in spec["inputs"]:
            path = Path(spec["inputs"]["candidates"]) / "candidates.parquet"
            count = candidate_count(path)
            if params.shards > 1:
                scores = _merged_scores(spec, params.shards, count)
                log.info("merged the scores of %d label shards", params.shards)
            else:
                log.info("scoring %d candidate pairs with the %s teacher", count, teacher.arch_name)
                scores = np.empty(count, dtype=np.float64)
                teacher.score_rows(path, 0, count, scores)
        sampling_stats = write_pairs(tmp, spec, params, teacher, gold, gold_scored, scores)
        write_json(tmp / "metrics.json", {"device": device, "pairs": sampling_stats["pairs"], **sampling_stats})
    return sampling_stats


def run_shard(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    """Stage `label_shard`: teacher scores of whole SCORE_CHUNKs of the merged candidates, written as they come."""
    params = read_params(LabelShardParams, spec)
    path = Path(spec["inputs"]["candidates"]) / "candidates.parquet"
    count = candidate_count(path)
    start, stop = shard_rows(count, params.shards, params.shard, SCORE_CHUNK)
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        teacher = Teacher(spec, params, device)
        # scores go to disk chunk by chunk (a memory map): the job holds one chunk of texts, no score array
        scores = np.lib.format.open_memmap(tmp / "scores.npy", mode="w+", dtype=np.float64, shape=(stop - start,))
        teacher.score_rows(path, start, stop, scores)
        scores.flush()
        del scores
        metrics = {"device": device, "shard": params.shard, "shards": params.shards, "rows": [start, stop],
                   "candidates": count}
        write_json(tmp / "metrics.json", metrics)
    return metrics
