"""Stage `sample_pairs`: candidate silver pairs from the target train sentences, by strategy.

Neighbour strategies (random, BM25, semantic search and their least-similar
variants) emit `top_k` partners per sentence. The KDE strategies emit a
candidate pool here (random, plus semantic search for iterative KDE) that
`label_pairs` thins out by teacher score.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..artifacts import artifact_dir, write_json
from ..data import DataError
from ..models import resolve_device
from ..sampling import bm25_neighbors, semantic_neighbors
from ..sampling.pool import PairCollector, random_partners
from .common import model_path, pool_too_small, read_split, target_pool

log = logging.getLogger(__name__)

SEMANTIC = ("semantic_search", "semantic_search_least", "iterative_kde")


def _embed(pool: list[str], params: dict, spec: dict, device: str) -> np.ndarray:
    from sentence_transformers import SentenceTransformer

    if params["semantic_model"] in ("finetuned", "pretrained_stage"):  # a planned stage's encoder
        path = str(Path(spec["inputs"]["encoder"]) / "model")
    else:
        path = model_path(params, params["model"] if params["semantic_model"] == "pretrained" else params["semantic_model"])
    model = SentenceTransformer(path, device=device)
    model.max_seq_length = params["max_length"]
    log.info("encoding %d pool sentences with %s", len(pool), path)
    return model.encode(pool, batch_size=params["batch_size"], convert_to_numpy=True, normalize_embeddings=True,
                        show_progress_bar=True)


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = spec["params"]
    data = spec["inputs"]["data"]
    train = read_split(data, "train")
    pool, eval_sentences, removed = target_pool(data, params["pool"], params["exclude_eval_sentences"])
    problem = pool_too_small(params, len(pool))
    if problem:  # before any encoding; the plan catches it too once the data artifact exists
        raise DataError(problem)
    k, seed = params["top_k"], params["seed"]
    gold_pairs = list(zip(train["sentence1"], train["sentence2"]))
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        log.info("pool: %d unique train sentences (%d dev/test sentences removed)", len(pool), removed)
        embeddings = _embed(pool, params, spec, device) if set(params["strategies"]) & set(SEMANTIC) else None
        frames, excluded = [], {}
        for strategy in params["strategies"]:
            if strategy == "target_pairs":  # domain transfer: the target's train pairs, their gold labels unused
                frames.append(train[["sentence1", "sentence2"]].assign(strategy=strategy))
                excluded[strategy] = {}
                log.info("%s: %d target train pairs (labels not used)", strategy, len(train))
                continue
            collector = PairCollector(pool, gold_pairs, eval_sentences, params["exclude_eval_sentences"])
            if strategy == "random":
                collector.add_neighbours(strategy, random_partners(len(pool), k, seed))
            elif strategy in ("bm25", "bm25_least"):
                idx, _ = bm25_neighbors(pool, k, least_similar=strategy.endswith("_least"))
                collector.add_neighbours(strategy, idx)
            elif strategy in ("semantic_search", "semantic_search_least"):
                idx, _ = semantic_neighbors(embeddings, k, exact=params["exact"],
                                            least_similar=strategy.endswith("_least"))
                collector.add_neighbours(strategy, idx)
            elif strategy == "kde":
                collector.add_neighbours(strategy, random_partners(len(pool), params["candidate_pool"]["random"],
                                                                   seed + 1))
            elif strategy == "iterative_kde":
                collector.add_neighbours(strategy, random_partners(len(pool), params["candidate_pool"]["random"],
                                                                   seed + 2))
                idx, _ = semantic_neighbors(embeddings, params["candidate_pool"]["semantic_search"],
                                            exact=params["exact"])
                collector.add_neighbours(strategy, idx)
            frame = collector.frame()
            frames.append(frame)
            excluded[strategy] = dict(collector.excluded)
            log.info("%s: %d candidate pairs (excluded: %s)", strategy, len(frame), dict(collector.excluded) or "none")
        candidates = pd.concat(frames, ignore_index=True)
        candidates.to_parquet(tmp / "candidates.parquet", index=False)
        metrics = {"pool_sentences": len(pool), "eval_sentences_removed_from_pool": removed,
                   "candidates": {s: int((candidates["strategy"] == s).sum()) for s in params["strategies"]},
                   "excluded": excluded, "device": device}
        write_json(tmp / "metrics.json", metrics)
    return metrics

