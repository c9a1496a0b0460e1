"""A data stage's artifact as the jobs read it (its splits), and the target's sentence pool: what sampling
draws partners from, and whether a strategy's `top_k` fits it (checked while planning once the data exist,
and by the jobs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataError
from .tables import normalise_text, read_pairs, sentence_pool


def read_split(data_dir: str | Path, split: str, required: bool = True) -> pd.DataFrame | None:
    path = Path(data_dir) / f"{split}.parquet"
    if not path.is_file():
        if required:
            raise DataError(f"{path}: the dataset has no {split} split")
        return None
    return read_pairs(path)


def evaluation_sentences(data: str | Path) -> set[str]:
    """The normalised dev and test sentences of a data artifact (never trained on by default)."""
    tables = [t for t in (read_split(data, s, required=False) for s in ("dev", "test")) if t is not None]
    return set(sentence_pool(tables))


def target_pool(data: str | Path, kind: str, exclude_eval: bool,
                option: str = "candidates.pool") -> tuple[list[str], set[str], int]:
    """Sorted unique sentences of the target's train split and/or unlabeled corpus.

    Returns the pool, the dev/test sentences, and how many pool sentences were
    dropped for being dev/test sentences (when `exclude_eval`).
    """
    eval_sentences = evaluation_sentences(data)
    pool = sentence_pool([read_split(data, "train")]) if kind != "unlabeled" else []
    if kind != "train":
        unlabeled = Path(data) / "unlabeled.parquet"
        # a few-label dataset (gold_fraction): the train pairs left unlabelled are unlabelled target sentences
        held_back = Path(data) / "unlabeled_pairs.parquet"
        if not unlabeled.is_file() and not held_back.is_file():
            raise DataError(f"{option} is {kind!r}, but {unlabeled} does not exist: give the dataset "
                            "an `unlabeled` text file")
        texts = []
        if unlabeled.is_file():
            corpus = pd.read_parquet(unlabeled)
            if "split" in corpus.columns:  # a topic corpus (UKP / 20 Newsgroups): its train part only
                corpus = corpus[corpus["split"].isin(["train", ""])]
            texts = corpus["text"].tolist()
        if held_back.is_file():
            pairs = pd.read_parquet(held_back, columns=["sentence1", "sentence2"])
            texts += pairs["sentence1"].tolist() + pairs["sentence2"].tolist()
        pool = sorted(set(pool) | {normalise_text(t) for t in texts} - {""})
    removed = 0
    if exclude_eval:
        removed = sum(t in eval_sentences for t in pool)
        pool = [t for t in pool if t not in eval_sentences]
    return pool, eval_sentences, removed


def partners_per_sentence(sampling: dict) -> dict[str, int]:
    """How many partners per pool sentence the strategies draw, by the sampling option that sets it."""
    strategies = set(sampling["strategies"])
    need = {}
    if strategies & {"random", "bm25", "bm25_least", "semantic_search", "semantic_search_least"}:
        need["top_k"] = sampling["top_k"]
    if strategies & {"kde", "iterative_kde"}:
        need["candidate_pool.random"] = sampling["candidate_pool"]["random"]
    if "iterative_kde" in strategies:
        need["candidate_pool.semantic_search"] = sampling["candidate_pool"]["semantic_search"]
    return need


def pool_too_small(sampling: dict, pool_size: int, prefix: str = "") -> str | None:
    """What is wrong when a strategy asks for more partners than the pool has, else None.

    Every sentence needs k other sentences (k <= pool size - 1); BM25 and faiss would
    otherwise fail deep inside the stage, after the pool was encoded.
    """
    for option, k in partners_per_sentence(sampling).items():
        if k >= pool_size:
            return (f"{prefix}candidates.{option}: {k} partners per sentence, but the pool (candidates.pool: "
                    f"{sampling['pool']}) has {pool_size} unique sentence(s), so at most {max(pool_size - 1, 0)}")
    return None


def unlabelled_pairs(source: str | Path, params) -> pd.DataFrame:
    """sentence1, sentence2 of the pair source (a data artifact's train split, `params.source: train`, else a
    candidates artifact), at most `params.max_pairs` of them (sorted rows of a seeded draw, `params.seed`)."""
    source = Path(source)
    if params.source == "train":
        pairs = read_split(source, "train")[["sentence1", "sentence2"]]  # the scores are dropped here
    else:
        pairs = pd.read_parquet(source / "candidates.parquet", columns=["sentence1", "sentence2"])
    if len(pairs) < 2:
        raise DataError(f"{source}: {len(pairs)} unlabelled pair(s); Trans-Encoder needs at least 2")
    if params.max_pairs is not None and params.max_pairs < len(pairs):
        rows = np.sort(np.random.default_rng(params.seed).choice(len(pairs), size=params.max_pairs, replace=False))
        pairs = pairs.iloc[rows]
    return pairs.reset_index(drop=True)




UNLABELED_PAIRS = "unlabeled_pairs.parquet"  # a few-label dataset's held-back pairs (stage gold_subset)


def subset_rows(n: int, fraction: float, seed: int) -> np.ndarray:
    """Sorted indices of the `round(fraction * n)` kept rows (at least 2, so a Spearman can be computed),
    drawn without replacement by numpy's PCG64 generator seeded with `seed`."""
    k = min(n, max(2, round(fraction * n)))
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))


def test_draw(n: int, k: int) -> np.ndarray:
    """Sorted indices of the test pairs an active-learning round's teacher scores with `active.test_pairs` = k:
    min(k, n) of n drawn without replacement by numpy's PCG64 seeded with 0, the same pairs for every round,
    strategy and seed (so the rounds' figures are of one subset)."""
    return np.sort(np.random.default_rng(0).choice(n, size=min(k, n), replace=False))


def withheld_scores(data: str | Path, fraction: float, seed: int, ids: np.ndarray, pairs: pd.DataFrame) -> np.ndarray:
    """Active learning's oracle (stage `active_label`, `annotator: oracle`): the gold scores of exactly the
    unlabelled pairs `ids` of a gold subset (`fraction`, `seed`: the `gold_subset` draw), read from the data
    artifact `data` that subset was drawn from; the one reader of a withheld score.

    Pair id k is the k-th row of the subset's `unlabeled_pairs.parquet`, i.e. the k-th train row the subset left
    out (`subset_rows` draws the same rows again); each pair's texts (`pairs`: sentence1, sentence2 in the order
    of `ids`) must be that row's, so a pair id of another subset or dataset is refused, not answered."""
    train = read_split(data, "train")
    kept = np.zeros(len(train), dtype=bool)
    kept[subset_rows(len(train), fraction, seed)] = True
    left_out = np.flatnonzero(~kept)
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) and (ids.min() < 0 or ids.max() >= len(left_out)):
        raise DataError(f"{data}: pair id {int(ids.max() if ids.max() >= len(left_out) else ids.min())} is not one "
                        f"of the {len(left_out)} pairs the gold subset left unlabelled")
    rows = left_out[ids]
    for column in ("sentence1", "sentence2"):
        differs = np.flatnonzero(train[column].to_numpy()[rows] != pairs[column].to_numpy())
        if len(differs):
            raise DataError(f"{data}: pair id {int(ids[differs[0]])} holds other texts than the chosen pair's "
                            f"{column} (the selection was made on another gold subset)")
    scores = train["score"].to_numpy(np.float64)[rows]
    if not np.isfinite(scores).all():
        raise DataError(f"{data}: no score for pair id {int(ids[~np.isfinite(scores)][0])} in the gold train split")
    return scores


PAIR_ID = "pair_id"  # an unlabelled pair's id: its row in the gold subset's unlabeled_pairs.parquet (round 0)


def unlabelled_with_ids(pool: str | Path) -> pd.DataFrame:
    """The unlabelled pairs of a few-label data artifact (a `gold_subset`'s or an `active_label`'s) with their
    pair ids: an active-learning round's table carries them (`pair_id`), a gold subset's rows are their ids."""
    rest = pd.read_parquet(Path(pool) / UNLABELED_PAIRS)
    if PAIR_ID not in rest.columns:
        rest.insert(0, PAIR_ID, np.arange(len(rest), dtype=np.int64))
    return rest.reset_index(drop=True)


def next_round(pool: str | Path, chosen: pd.DataFrame, scores: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The gold after a round (the pool's train pairs, then the `chosen` pairs with their `scores`) and the pairs
    still unlabelled (the pool's, but the chosen ones; no score, with their ids)."""
    train = read_split(pool, "train")
    rest = unlabelled_with_ids(pool)
    taken = rest[PAIR_ID].isin(chosen[PAIR_ID])
    if int(taken.sum()) != len(chosen) or chosen[PAIR_ID].duplicated().any():
        raise DataError(f"{pool}: the chosen pairs are not {len(chosen)} distinct unlabelled pairs of this pool")
    added = rest.set_index(PAIR_ID).loc[chosen[PAIR_ID].to_numpy()].reset_index()
    added = added[[c for c in train.columns if c in added.columns]].assign(score=np.asarray(scores, np.float64))
    return (pd.concat([train, added[train.columns]], ignore_index=True),
            rest.loc[~taken].reset_index(drop=True))
