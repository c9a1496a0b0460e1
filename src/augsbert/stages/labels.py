"""Stage `label_pairs`: the teacher scores pairs for the student ("silver" labels).

Scored are the gold train pairs ("label regularisation", thesis 5.2; also the
reference distribution of the KDE strategies) and the sampled candidates. The
KDE strategies then keep the candidates whose scores follow the gold score
distribution. Besides `pairs.parquet` the stage writes
`sampling_stats.json` and `score_densities.png` (gold vs every strategy, as
thesis Figures 6.3-6.5).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from ..artifacts import artifact_dir, read_json, write_json
from ..data import DataError
from ..models import resolve_device
from ..models.architectures import ARCHITECTURES
from ..sampling import iterative_kde, kde_sample
from ..sampling.pool import pair_key
from ..training import pairs_of
from .common import read_split

log = logging.getLogger(__name__)


def _select(strategy: str, reference: np.ndarray, scores: np.ndarray, seed: int) -> np.ndarray:
    """Indices of the candidates a selection strategy keeps (all for the sampling-only strategies)."""
    try:
        if strategy == "kde":
            return kde_sample(reference, scores, seed)
        if strategy == "iterative_kde":
            return iterative_kde(reference, scores, seed=seed)
    except DataError as err:  # e.g. gold scores without spread: say which stage and strategy met them
        raise DataError(f"labels stage, strategy {strategy}: {err}") from err
    return np.arange(len(scores))


def with_topics(pairs: pd.DataFrame, topics: dict[str, str], pair_topic: pd.Series | None = None) -> pd.DataFrame:
    """`pairs` with `topic1` / `topic2`: the pair's own topic where given, else each text's (`topic_map`)."""
    from ..data.tables import normalise_text

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


def run(spec: dict, out: str | Path, device: str | None = None, force: bool = False) -> dict:
    params = spec["params"]
    teacher_dir = Path(spec["inputs"]["teacher"])
    teacher_params = read_json(teacher_dir / "spec.json")["params"]
    arch_name = teacher_params["arch"]
    gold = read_split(spec["inputs"]["gold"], "train")  # the teacher's gold: target (in-domain) or source
    candidates = None
    if "candidates" in spec["inputs"]:
        candidates = pd.read_parquet(Path(spec["inputs"]["candidates"]) / "candidates.parquet")
        candidate_stats = read_json(Path(spec["inputs"]["candidates"]) / "metrics.json")
    with artifact_dir(out, spec, force) as tmp:
        device = resolve_device(device)
        arch = ARCHITECTURES[arch_name]
        model = arch.load(teacher_dir / "model", device)
        batch = params["batch_size"]
        gold_scored = gold[["sentence1", "sentence2"]].assign(strategy="gold", gold_score=gold["score"])
        delimiter = params.get("topic_prompt")
        topics = {}
        if delimiter:  # thesis 5.6.1: the teacher scores ((t1, a), (t2, b)); pairs keep plain text + topics
            from ..data.prompts import prompt_pairs, topic_map

            topics = topic_map(spec["inputs"]["topics"])
            gold_scored = with_topics(gold_scored, topics, gold.get("topic"))
            log.info("topic prompts on (delimiter %r): %d topic-labelled sentences", delimiter, len(topics))

        def shown(frame: pd.DataFrame) -> list[tuple[str, str]]:
            return pairs_of(prompt_pairs(frame, delimiter) if delimiter else frame)

        gold_scored["score"] = arch.predict(model, shown(gold_scored), batch, teacher_params)
        reference = (gold_scored["score"] if params["kde_reference"] == "teacher" else gold["score"]).to_numpy()
        parts = [gold_scored] if params["relabel_gold"] else []
        per_strategy = {}
        if candidates is not None and len(candidates):
            log.info("scoring %d candidate pairs with the %s teacher", len(candidates), arch_name)
            if delimiter:
                candidates = with_topics(candidates, topics)
            candidates["score"] = arch.predict(model, shown(candidates), batch, teacher_params)
            for strategy, group in candidates.groupby("strategy", sort=False):
                kept = group.iloc[_select(strategy, reference, group["score"].to_numpy(), params["seed"])]
                parts.append(kept)
                per_strategy[strategy] = {"candidates": len(group), "kept": len(kept),
                                          "kept_fraction": round(len(kept) / len(group), 4)}
        pairs = pd.concat(parts, ignore_index=True)
        keys = [pair_key(a, b) for a, b in zip(pairs["sentence1"], pairs["sentence2"])]
        duplicate = pd.Series(keys).duplicated().to_numpy()  # the same pair from two strategies: first one wins
        if duplicate.any():
            log.info("dropping %d pair(s) that an earlier strategy already emitted", int(duplicate.sum()))
        pairs = pairs[~duplicate].reset_index(drop=True)
        pairs["teacher"] = teacher_dir.name
        pairs.to_parquet(tmp / "pairs.parquet", index=False)
        for strategy, group in pairs.groupby("strategy", sort=False):
            entry = per_strategy.setdefault(strategy, {"candidates": len(group), "kept": len(group),
                                                       "kept_fraction": 1.0})
            entry.update(after_dedup=len(group),
                         ks_to_gold=round(float(stats.ks_2samp(group["score"], reference).statistic), 4),
                         score_mean=round(float(group["score"].mean()), 4),
                         score_std=round(float(group["score"].std(ddof=0)), 4))
        sampling_stats = {
            "teacher": teacher_dir.name, "teacher_arch": arch_name,
            "gold_reference": params["kde_reference"], "reference_pairs": len(reference),
            "strategies": per_strategy, "pairs": len(pairs),
            "duplicates_across_strategies": int(duplicate.sum()),
            "excluded": candidate_stats["excluded"] if candidates is not None else {},
            "pool_sentences": candidate_stats["pool_sentences"] if candidates is not None else None,
        }
        write_json(tmp / "sampling_stats.json", sampling_stats)
        plot_densities(tmp / "score_densities.png", reference, pairs, f"silver vs gold scores ({arch_name} teacher)")
        log.info("labelled %d pairs: %s", len(pairs), {k: v["kept"] for k, v in per_strategy.items()})
        write_json(tmp / "metrics.json", {"device": device, "pairs": len(pairs), **sampling_stats})
    return sampling_stats
