"""Active learning's choice: which still-unlabelled pairs an annotator labels next (stage `active_select`,
docs/methods/active.md).

Each strategy is one entry of `STRATEGIES`: what it reads of the round's teacher, what its statistic is, where it
comes from, and how it picks `k` pairs. A strategy sees the scored pairs through a `Scorer` (the teacher, its
ensemble members, its dropout passes, a pair encoder; augsbert.models.uncertainty builds the real one, a test
passes arrays), so what a strategy picks is a function of those scores alone: ties go to the pair that comes
first in the pool (stable sorts), and every random draw is seeded with the run's seed and the round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from ..errors import DataError
from ..params import default_of
from ..stages.active_select import SelectParams


class Scorer(Protocol):
    """What a strategy may ask of the round's teacher about `pairs` (the candidates, in pool order)."""

    def members(self, pairs: list[tuple[str, str]]) -> np.ndarray: ...  # (members, pairs): each member's scores

    def passes(self, pairs: list[tuple[str, str]], passes: int, seed: int) -> np.ndarray: ...  # (passes, pairs)

    def teacher(self, pairs: list[tuple[str, str]]) -> np.ndarray: ...  # (pairs,): the teacher's (combined) score

    def embed(self, pairs: list[tuple[str, str]]) -> np.ndarray: ...  # (pairs, dims): one vector per pair


@dataclass(frozen=True)
class Request:
    """One round's choice: `k` of the candidate `pairs`; the pairs labelled so far (kde's reference); the options
    the strategies read."""

    pairs: list[tuple[str, str]]
    k: int
    seed: int
    round: int
    labelled: list[tuple[str, str]]  # the pairs labelled in rounds 0 .. r (kde: the teacher's scores of them)
    # the `active` options the strategies read, their defaults the section's (stages/active_select.py)
    passes: int = default_of(SelectParams, "passes")  # mc_dropout (and diverse without a committee)
    candidate_factor: int = default_of(SelectParams, "candidate_factor")  # diverse: the top candidate_factor x k
    clusters: int | None = default_of(SelectParams, "clusters")  # diverse: k-means clusters (None: k)
    uncertainty: str = default_of(SelectParams, "uncertainty")  # diverse: which statistic ranks its candidates


@dataclass(frozen=True)
class Picked:
    """The chosen candidates (positions in the request's pairs, in the order picked), the statistic of every
    candidate (NaN where the strategy computes none), the teacher's score of every candidate (NaN where not
    scored) and, for diverse, each candidate's cluster (-1: not clustered)."""

    positions: np.ndarray
    statistic: np.ndarray
    teacher_score: np.ndarray
    cluster: np.ndarray | None = None


@dataclass(frozen=True)
class Strategy:
    choose: Callable[[Request, Scorer], Picked]
    statistic: str  # what the `uncertainty` column of its choice holds
    citation: str
    scores: bool = True  # False: it scores nothing (random), so the pool is not capped by `max_pool` for it


def random_draw(n: int, k: int, seed: int, round_: int) -> np.ndarray:
    """`k` of `n` positions drawn uniformly without replacement, numpy PCG64 seeded with [seed, round]."""
    return np.random.default_rng([seed, round_]).choice(n, size=k, replace=False)


def round_seed(seed: int, round_: int) -> int:
    """A 32-bit seed of its own for round `round_` of run `seed` (numpy's SeedSequence of the two): dropout masks
    and k-means starts differ per round and never exceed what torch and scikit-learn take."""
    return int(np.random.SeedSequence([seed, round_]).generate_state(1)[0])


def top(statistic: np.ndarray, k: int) -> np.ndarray:
    """Positions of the `k` largest values, largest first; ties: the earlier position first."""
    return np.argsort(-np.asarray(statistic, dtype=np.float64), kind="stable")[:k]


def committee_spread(scores: np.ndarray) -> np.ndarray:
    """Query by committee for regression: per pair the standard deviation (population) over the members of their
    scores, each member's scores z-scored over the scored pairs first (so members on other scales, a CE's sigmoid
    and a CBE's cosine, weigh alike). A member whose scores are all equal contributes zeros."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] < 2:
        raise ValueError(f"a committee needs at least two members' scores, got shape {scores.shape}")
    sd = scores.std(axis=1, keepdims=True)
    z = (scores - scores.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0)
    return z.std(axis=0)


def mc_variance(scores: np.ndarray) -> np.ndarray:
    """MC dropout: per pair the variance (population) of its scores over the dropout passes."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] < 2:
        raise ValueError(f"MC dropout needs at least two passes' scores, got shape {scores.shape}")
    return scores.var(axis=0)


def one_per_cluster(statistic: np.ndarray, clusters: np.ndarray, k: int) -> np.ndarray:
    """`k` positions spread over the clusters: in turns, the most uncertain remaining pair of each cluster that
    still has one (clusters ordered by their most uncertain pair), so no cluster gives a second pair while another
    still has a candidate. Ties: the earlier position."""
    statistic, clusters = np.asarray(statistic, dtype=np.float64), np.asarray(clusters)
    queues = {}
    for position in top(statistic, len(statistic)):
        queues.setdefault(int(clusters[position]), []).append(int(position))
    order = list(queues)  # by their best pair (insertion follows the ranking)
    picked: list[int] = []
    while len(picked) < k and any(queues[c] for c in order):
        for c in order:
            if queues[c] and len(picked) < k:
                picked.append(queues[c].pop(0))
    return np.asarray(picked, dtype=np.int64)


def kmeans_clusters(embeddings: np.ndarray, n_clusters: int, seed: int) -> np.ndarray:
    """k-means (scikit-learn, k-means++ starts, 4 restarts, seeded) labels of the rows of `embeddings`."""
    from sklearn.cluster import KMeans

    n_clusters = max(1, min(int(n_clusters), len(embeddings)))
    return KMeans(n_clusters=n_clusters, n_init=4, random_state=seed).fit_predict(np.asarray(embeddings))


def _bandwidth(values: np.ndarray) -> float:
    """Scott's rule for a 1-d Gaussian KDE (scipy's gaussian_kde default): sd (ddof 1) x n^(-1/5)."""
    sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
    return sd * len(values) ** -0.2 if sd > 0 else 0.05  # one label, or all equal: a twentieth of the [0, 1] scale


def thinnest(predicted: np.ndarray, labelled: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The thesis' KDE idea applied to labels: pairs whose teacher score lies where the labelled pairs' scores are
    thinnest. `labelled`: the teacher's scores of the labelled pairs (the scale of `predicted`; the thesis' KDE
    reference is the teacher's scores of the gold pairs too). Greedily, `k` times: the candidate at the lowest
    density of a Gaussian KDE (Scott's bandwidth of the labelled scores, fixed) over the labelled scores and the
    scores of the pairs picked so far (a picked pair counts as labelled at its predicted score, so the next pick
    goes elsewhere). Returns the positions in the order picked and each candidate's density under the labelled
    scores alone (the statistic)."""
    predicted = np.asarray(predicted, dtype=np.float64)
    labelled = np.asarray(labelled, dtype=np.float64)
    h = _bandwidth(labelled)

    def kernels(centres: np.ndarray) -> np.ndarray:  # (candidates,) sum of the kernels at each predicted score
        return np.exp(-0.5 * ((predicted[:, None] - centres[None, :]) / h) ** 2).sum(axis=1)

    mass = kernels(labelled)
    density = mass / (len(labelled) * h * np.sqrt(2 * np.pi))
    free = np.ones(len(predicted), dtype=bool)
    picked = []
    for _ in range(min(k, len(predicted))):
        i = int(np.flatnonzero(free)[np.argmin(mass[free])])  # argmin: the first of equal values
        picked.append(i)
        free[i] = False
        mass += np.exp(-0.5 * ((predicted - predicted[i]) / h) ** 2)
    return np.asarray(picked, dtype=np.int64), density


def _none(n: int) -> np.ndarray:
    return np.full(n, np.nan)


def choose_random(request: Request, scorer: Scorer) -> Picked:
    n = len(request.pairs)
    return Picked(random_draw(n, request.k, request.seed, request.round), _none(n), _none(n))


def choose_committee(request: Request, scorer: Scorer) -> Picked:
    scores = scorer.members(request.pairs)
    statistic = committee_spread(scores)
    return Picked(top(statistic, request.k), statistic, scorer.teacher(request.pairs))


def choose_mc_dropout(request: Request, scorer: Scorer) -> Picked:
    statistic = mc_variance(scorer.passes(request.pairs, request.passes, round_seed(request.seed, request.round)))
    return Picked(top(statistic, request.k), statistic, scorer.teacher(request.pairs))


def choose_diverse(request: Request, scorer: Scorer) -> Picked:
    ranked = STRATEGIES[request.uncertainty].choose(request, scorer)
    candidates = top(ranked.statistic, min(len(request.pairs), request.candidate_factor * request.k))
    clusters = kmeans_clusters(scorer.embed([request.pairs[i] for i in candidates]), request.clusters or request.k,
                               round_seed(request.seed, request.round))
    chosen = candidates[one_per_cluster(ranked.statistic[candidates], clusters, request.k)]
    cluster = np.full(len(request.pairs), -1, dtype=np.int64)
    cluster[candidates] = clusters
    return Picked(chosen, ranked.statistic, ranked.teacher_score, cluster)


def choose_kde(request: Request, scorer: Scorer) -> Picked:
    predicted = scorer.teacher(request.pairs)
    positions, density = thinnest(predicted, scorer.teacher(request.labelled), request.k)
    return Picked(positions, density, predicted)


STRATEGIES: dict[str, Strategy] = {
    "random": Strategy(choose_random, "none (a uniform draw)",
                       "The baseline every strategy is measured against: a uniform draw without replacement (numpy "
                       "PCG64 seeded with [run seed, round]).", scores=False),
    "committee": Strategy(choose_committee, "standard deviation of the members' z-scored scores",
                          "Query by committee (Seung, Opper & Sompolinsky, COLT 1992), for regression as the spread of "
                          "the committee's outputs (RayChaudhuri & Hamey, ICNN 1995); the committee is "
                          "teacher.ensemble."),
    "mc_dropout": Strategy(choose_mc_dropout, "variance of the teacher's scores over the dropout passes",
                           "MC dropout (Gal & Ghahramani, ICML 2016; for active learning Gal, Islam & Ghahramani, "
                           "ICML 2017): the teacher scores each pair `passes` times with its dropout on."),
    "diverse": Strategy(choose_diverse, "the committee's or MC dropout's statistic (the pairs ranked by it)",
                        "Diverse mini-batches (after Zhdanov, arXiv 1901.05954, 2019): the candidate_factor x batch "
                        "most uncertain pairs are clustered by k-means on their pair embedding, and each cluster "
                        "gives its most uncertain pair in turn."),
    "kde": Strategy(choose_kde, "density of the teacher's scores of the labelled pairs (Gaussian KDE) at the "
                    "pair's teacher score",
                    "The thesis' KDE idea (its iterative KDE matches silver scores to the gold density) turned to "
                    "labels: pairs whose predicted score lies where the labelled scores are thinnest."),
}


def choose(strategy: str, request: Request, scorer: Scorer) -> Picked:
    """The pairs `strategy` chooses for `request`, checked: `k` distinct candidates."""
    if request.k > len(request.pairs):
        raise DataError(f"active learning: {request.k} pairs to choose in round {request.round}, but only "
                        f"{len(request.pairs)} unlabelled pair(s) are left (lower active.batch or active.rounds)")
    picked = STRATEGIES[strategy].choose(request, scorer)
    if len(picked.positions) != request.k or len(set(picked.positions.tolist())) != request.k:
        raise AssertionError(f"{strategy} picked {len(picked.positions)} position(s), not {request.k} distinct ones")
    return picked


def capped(n: int, max_pool: int | None, seed: int, round_: int) -> np.ndarray:
    """Positions of the pairs scored in a round: all `n`, or a seeded draw (numpy PCG64 with [seed, round, 1]) of
    `max_pool` of them, in pool order."""
    if max_pool is None or max_pool >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng([seed, round_, 1]).choice(n, size=max_pool, replace=False))


def _mean(values: np.ndarray) -> float | None:
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    return float(values.mean()) if len(values) else None


def choice_tables(candidates, picked: Picked, strategy: str, unlabelled: int):
    """The chosen pairs (in the order picked, with their statistic, teacher score and cluster), every scored
    candidate's figures (none for a strategy that scores nothing), and the selection's metrics."""
    import pandas as pd

    scores = STRATEGIES[strategy].scores
    figures = pd.DataFrame({"pair_id": candidates["pair_id"].to_numpy(), "uncertainty": picked.statistic,
                            "teacher_score": picked.teacher_score,
                            "cluster": picked.cluster if picked.cluster is not None else -1})
    figures["chosen"] = False
    figures.loc[picked.positions, "chosen"] = True
    chosen = candidates.iloc[picked.positions].reset_index(drop=True).assign(
        uncertainty=picked.statistic[picked.positions], teacher_score=picked.teacher_score[picked.positions],
        cluster=figures["cluster"].to_numpy()[picked.positions], rank=np.arange(len(picked.positions)))
    metrics = {"strategy": strategy, "statistic": STRATEGIES[strategy].statistic, "unlabelled": unlabelled,
               "scored": len(candidates) if scores else 0, "batch": len(picked.positions),
               "chosen": {"mean_uncertainty": _mean(chosen["uncertainty"]),
                          "teacher_score_mean": _mean(chosen["teacher_score"])},
               "scored_mean_uncertainty": _mean(picked.statistic)}
    if picked.cluster is not None:
        metrics["chosen"]["clusters"] = int(len(set(chosen["cluster"].tolist())))
    return chosen, figures if scores else figures.iloc[:0], metrics


def score_distribution(scores, bins: int = 10) -> dict:
    """Mean, standard deviation (population), range and a histogram of `bins` equal bins over 0-1 (the data's
    scale) of labels."""
    scores = np.asarray(scores, dtype=np.float64)
    if not len(scores):
        return {"pairs": 0, "mean": None, "std": None, "min": None, "max": None, "histogram": [0] * bins}
    counts, _ = np.histogram(np.clip(scores, 0.0, 1.0), bins=bins, range=(0.0, 1.0))
    return {"pairs": int(len(scores)), "mean": float(scores.mean()), "std": float(scores.std()),
            "min": float(scores.min()), "max": float(scores.max()), "histogram": counts.astype(int).tolist()}
