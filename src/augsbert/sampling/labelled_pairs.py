"""The silver pairs a labelling teacher's scores make (stage `labels`): the selection strategies keep candidates
(the KDE strategies those whose scores follow the gold score distribution, the others all), the same pair
from two strategies is kept once (the first strategy's, by a 128-bit digest: no texts held), and
pairs.parquet is written piece by piece with sampling_stats.json and score_densities.png (gold vs every
strategy, as thesis Figures 6.3-6.5). `merged_scores` reads the scores of N label shards, checked to tile
the candidates. The teacher's scores come in (the `labels` job scores with it): what is kept of the teacher here is
what the files record and how its pairs are shown (`ScoredBy`), so every rule is tested without a model.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pyarrow as pa
from scipy import stats

from ..data import DataError
from ..data.pool import read_split
from ..data.prompts import with_topics
from ..data.tables import read_rows
from ..store.artifacts import read_json, write_json
from .kde import iterative_kde, kde_sample
from .pool import pair_key

if TYPE_CHECKING:  # annotations only: the stage's options classes sit above sampling
    from ..stages.labels import LabelsParams

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoredBy:
    """The teacher that scored the pairs, as the labels artifact records it: its artifact's name (the pairs'
    `teacher` column), its architecture(s), and its topic prompt's delimiter with the sentences' topics (the pairs
    then carry `topic1` / `topic2`; None: no prompts)."""

    name: str
    arch: str
    delimiter: str | None = None
    topics: Mapping[str, str] = field(default_factory=dict)


def _select(strategy: str, reference: np.ndarray, scores: np.ndarray, seed: int,
            iterative_accept: str = "at_least") -> np.ndarray:
    """Indices of the candidates a selection strategy keeps (all for the sampling-only strategies)."""
    try:
        if strategy == "kde":
            return kde_sample(reference, scores, seed)
        if strategy == "iterative_kde":
            return iterative_kde(reference, scores, seed=seed, accept=iterative_accept)
    except DataError as err:  # e.g. gold scores without spread: say which stage and strategy met them, and the way out
        hint = (f"; {strategy} keeps silver pairs after the density of the gold train pairs' scores: give the dataset "
                f"more train pairs (with different scores), or leave {strategy} out of candidates.strategies"
                if "gold score" in str(err) else "")
        raise DataError(f"labels stage, strategy {strategy}: {err}{hint}") from err
    return np.arange(len(scores))


def _density(values: np.ndarray, grid: np.ndarray) -> np.ndarray | None:
    """Scott's Gaussian KDE of `values` on `grid`, or None where none exists: fewer than two scores, all equal,
    or so close that their covariance is singular (scipy raises ValueError / LinAlgError there)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) < 2 or not np.all(np.isfinite(values)) or np.ptp(values) == 0:
        return None
    try:
        return stats.gaussian_kde(values)(grid)
    except (ValueError, np.linalg.LinAlgError):
        return None


def plot_densities(path: Path, reference: np.ndarray, pairs: pd.DataFrame, title: str) -> None:
    """The figure of the gold and every strategy's score densities. A set without a density (one score, or all
    equal: a one-row train file's gold) is marked by a vertical line at its score(s) and named in the log; the
    figure is never a reason for the labels job to fail (issue 56 E3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reference = np.asarray(reference, dtype=np.float64)
    scores = np.concatenate([reference, pairs["score"].to_numpy(dtype=np.float64)])
    scores = scores[np.isfinite(scores)]
    lo, hi = (float(scores.min()), float(scores.max())) if len(scores) else (0.0, 1.0)
    grid = np.linspace(lo - 0.05, hi + 0.05, 400)
    fig, ax = plt.subplots(figsize=(7, 4))
    sets = [("gold", reference, dict(color="black", lw=2.5))]
    sets += [(strategy, group["score"].to_numpy(dtype=np.float64), dict(lw=1.5))
             for strategy, group in pairs.groupby("strategy", sort=False) if strategy != "gold"]
    for name, values, style in sets:
        density = _density(values, grid)
        if density is not None:
            ax.plot(grid, density, label=f"{name} (n={len(values)})", **style)
        elif len(values):
            distinct = np.unique(values[np.isfinite(values)])
            log.info("%s: no density of the %s scores drawn (%d score(s), %d distinct; a density needs at least two "
                     "different ones): a dashed line marks each score instead", path.name, name, len(values),
                     len(distinct))
            for i, x in enumerate(distinct[:50]):
                ax.axvline(x, ls="--", label=f"{name} (n={len(values)}, no density)" if i == 0 else None,
                           **{**style, "lw": 1.0})
    ax.set_xlabel("teacher score")
    ax.set_ylabel("density")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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


def write_pairs(tmp: Path, spec: dict, params: LabelsParams, teacher: ScoredBy, gold: pd.DataFrame,
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
        frame = frame.assign(teacher=teacher.name)
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
        "teacher": teacher.name, "teacher_arch": teacher.arch,
        "gold_reference": params.kde_reference, "reference_pairs": len(reference),
        "strategies": per_strategy, "pairs": len(pairs),
        "duplicates_across_strategies": int((~unique).sum()),
        "excluded": candidate_stats["excluded"] if candidate_stats else {},
        "pool_sentences": candidate_stats["pool_sentences"] if candidate_stats else None,
    }
    write_json(tmp / "sampling_stats.json", sampling_stats)
    plot_densities(tmp / "score_densities.png", reference, pairs, f"silver vs gold scores ({teacher.arch} teacher)")
    log.info("labelled %d pairs: %s", len(pairs), {k: v["kept"] for k, v in per_strategy.items()})
    return sampling_stats


def gold_to_score(spec: dict, teacher: ScoredBy) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The gold train pairs, and the same pairs as the teacher scores them (strategy `gold`, with `gold_score`, and
    their topics under a topic prompt): the job fills its `score` column with the teacher's scores."""
    gold = read_split(spec["inputs"]["gold"], "train")  # the teacher's gold: target (in-domain) or source
    gold_scored = gold[["sentence1", "sentence2"]].assign(strategy="gold", gold_score=gold["score"])
    if teacher.delimiter:
        gold_scored = with_topics(gold_scored, teacher.topics, gold.get("topic"))
    return gold, gold_scored


def merged_scores(spec: dict, shards: int, count: int) -> np.ndarray:
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
