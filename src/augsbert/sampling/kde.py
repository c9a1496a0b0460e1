"""Distribution-matching selection of silver pairs by their teacher scores.

`kde_sample` is the AugSBERT paper's sampling function; `iterative_kde` the
thesis' Algorithm 1, computed exactly: it keeps the very indices, in the same
order, that a literal implementation keeps (scipy's `gaussian_kde` refitted
after every acceptance), at a small fraction of its cost.

How `iterative_kde` is fast and still exact
-------------------------------------------
Both densities are Gaussian KDEs with Scott's bandwidth, S(x) / (n h) with
the kernel sum S(x) = sum_i phi((x - s_i) / h). Every comparison "gold
density >= selected density" is first made between intervals that provably
contain scipy's two floating-point values; only when the intervals overlap
does scipy itself decide (the literal computation, bit for bit). In practice
that happens for a handful of comparisons per run, or none: exact ties, and
candidates far in the tails of both densities, where the absolute parts of
the bounds exceed the densities themselves (a candidate set with very many
of those is correspondingly slower).

* Selected set (grows, and its bandwidth changes with every acceptance):
  Fourier series of the periodised kernel sum (`Fourier`). Its coefficients
  are the set's empirical characteristic function, which does not depend on
  the bandwidth, times a Gaussian factor that carries the whole refit: an
  acceptance adds one precomputed column, a refit recomputes K + 1
  exponentials, and one vector-matrix product compares a chunk of candidates.
  Bounds: periodic images (none within ALIAS_SD bandwidths), frequencies left
  out (beyond TRUNC_SD / h), and rounding of every column, sum and product.
* Gold (a fixed set): the same Fourier series, once, for up to
  GOLD_FOURIER_MAX candidates; for more, Taylor ("local") expansions of S
  about the centres of cells of width CELL h, TERMS multiply-adds per
  candidate. Their truncation bound per gold score, from Taylor's remainder
  and Cramer's inequality |He_p(u)| phi(u) <= 1.086435 sqrt(p!) exp(-u^2 / 4)
  / sqrt(2 pi), is 1.086435 / sqrt(2 pi) rho^p / sqrt(p!) exp(-max(|a| - rho,
  0)^2 / 4), with rho h the half cell width and a h the distance to the cell
  centre; scores farther than CUTOFF bandwidths are left out and bounded by
  phi(CUTOFF) each.
* The selected set's bandwidth: scipy's sample variance (ddof 1) times
  n^(-2/5), from exact integer sums of the accepted scores, so it is correctly
  rounded at every step, in O(1) per acceptance.
* From exact values to scipy's floating-point ones: summation and exp rounding,
  (n + 1610 + 200 M / h) eps relatively (M the largest |score|; |r| <= 40 for
  every kernel that does not underflow), and, for the selected set, scipy's
  bandwidth (np.cov, a vecdot for Scott's factor) differing from ours by
  eta <= (2 n + 36) eps + ((n + 2) eps M / sd)^2, which moves a kernel u
  bandwidths away by at most eta (1 + u^2) relatively; FLOOR (1e-280)
  absolutely, for underflowed kernels.

Every bound is enlarged by 1 % before use.
"""

from __future__ import annotations

import contextlib
import logging
import math

import numpy as np
from scipy import stats

from ..errors import DataError  # defined there: the data layer (the same class) imports pandas
from .kde_bounds import (
    CELL,
    CUTOFF,
    DEAD,
    DIRECT,
    EPS,
    FLOOR,
    GOLD_FOURIER_MAX,
    GRID,
    MAX_CELLS,
    MAX_SPAN,
    MAX_STEP,
    SQRT2PI,
    ExactVariance,
    Fourier,
    LocalExpansion,
    direct_sum,
    scipy_rounding,
)

log = logging.getLogger(__name__)


def _grid(*arrays: np.ndarray, pad_sd: float = 4.0) -> np.ndarray:
    lo = min(float(a.min()) for a in arrays)
    hi = max(float(a.max()) for a in arrays)
    spread = max(float(max(a.std() for a in arrays)), 1e-3)
    return np.linspace(lo - pad_sd * spread, hi + pad_sd * spread, GRID)


def density_on_grid(points: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Gaussian KDE (Scott) of `points` on `grid` (exact scipy evaluation; used once per fixed set)."""
    return stats.gaussian_kde(points)(grid)


def _check_gold(gold: np.ndarray, what: str) -> None:
    """User-facing errors for gold scores a Gaussian KDE cannot be fitted on."""
    if len(gold) < 2:
        raise DataError(f"{what}: {len(gold)} gold score(s); a Gaussian KDE needs at least two")
    if not np.all(np.isfinite(gold)):
        raise DataError(f"{what}: the gold scores contain NaN or infinite values")
    if np.ptp(gold) == 0:
        raise DataError(f"{what}: the gold scores have no spread (all {len(gold)} equal {gold[0]:g}); "
                        "a Gaussian KDE of them does not exist, it needs at least two different gold scores")


def kde_sample(gold_scores, candidate_scores, seed: int) -> np.ndarray:
    """AugSBERT paper's sampler: keep a candidate with probability min(1, F_gold(s) / F_silver(s)).

    Candidates whose scores have no density (one candidate, or all scores equal) are all kept: no subset of
    them follows the gold density better than the whole (as `iterative_kde` keeps fewer than three); the log
    says so."""
    gold = np.asarray(gold_scores, dtype=np.float64)
    cand = np.asarray(candidate_scores, dtype=np.float64)
    _check_gold(gold, "KDE sampling")
    if not np.all(np.isfinite(cand)):
        raise DataError("KDE sampling: the candidate scores contain NaN or infinite values")
    if len(cand) < 2 or np.ptp(cand) == 0:
        log.warning("KDE sampling: %s: no density to compare with the gold one, so all are kept",
                    f"all {len(cand)} candidate scores equal {cand[0]:g}" if len(cand) > 1 else "a single candidate")
        return np.arange(len(cand))
    grid = _grid(gold, cand)
    f_gold = np.interp(cand, grid, density_on_grid(gold, grid))
    f_silver = np.interp(cand, grid, density_on_grid(cand, grid))
    keep_prob = np.minimum(1.0, f_gold / np.maximum(f_silver, 1e-300))
    rng = np.random.default_rng(seed)
    return np.flatnonzero(rng.random(len(cand)) < keep_prob)



class _Selection:
    """Algorithm 1's state: the selected set, its bandwidth, and the candidates in visiting order.

    Candidates are addressed by their position in `seq`, the visiting order;
    a selected candidate's upper gold bound is set to DEAD, so that no
    comparison ever picks it again.
    """

    def __init__(self, gold: np.ndarray, cand: np.ndarray, seq: np.ndarray, strict: bool = False):
        self.strict = strict  # accept on gold density > selected density (Algorithm 1's words), else >=
        self.cand = cand
        self.lo, self.hi = float(cand.min()), float(cand.max())
        self.m = float(max(np.abs(cand).max(), np.abs(gold).max()))
        self.gold_kde = stats.gaussian_kde(gold)
        self.gold_exact: dict[int, float] = {}
        self.values = np.empty(len(cand))
        self.n = 0
        self.var = ExactVariance()
        self.fourier: Fourier | None = None
        self.kde = None  # scipy's KDE of the current selected set, fitted on demand
        self.stale = True  # the Fourier coefficients are not yet set for this state
        self.exact_calls = 0
        self._gold_bounds(gold)
        self.set_sequence(seq)

    def _gold_bounds(self, gold: np.ndarray) -> None:
        """Interval [g_lo, g_hi] around scipy's gold density at every candidate."""
        h = float(self.gold_kde.cho_cov[0, 0])  # scipy's kernel sd: its evaluation divides by exactly this
        lo, hi = min(self.lo, float(gold.min())), max(self.hi, float(gold.max()))
        if len(self.cand) <= GOLD_FOURIER_MAX and (hi - lo) / h <= 400:
            # few candidates: the Fourier series (columns for every candidate, one product)
            fourier = Fourier(gold, h, lo, hi, len(gold), headroom=1.0)
            s = fourier.kernel_sums(self.cand, 1.0 / (h * h))
            err, total = fourier.error(len(gold))
            err += (2 * fourier.K + 12) * EPS * total  # the final products
        else:  # many: local expansions, TERMS multiply-adds per candidate
            w = CELL * h
            ids = np.floor((self.cand - self.lo) / w).astype(np.int64)
            dense = int(ids.max()) + 1
            cells = np.arange(dense) if dense <= MAX_CELLS else np.unique(ids)
            s, err = LocalExpansion(gold, h, self.lo, cells)(self.cand)
            s, err = s * SQRT2PI, err * SQRT2PI  # in units of exp(-u^2 / 2) kernels, as the Fourier sums
        norm = 1.0 / (len(gold) * h * SQRT2PI)
        g, err = s * norm, 1.01 * err * norm
        err = err + scipy_rounding(len(gold), h, self.m) * 1.01 * (g + err) + FLOOR
        self.g_lo, self.g_hi = g - err, g + err
        self.g_max = float(self.g_hi.max())

    def set_sequence(self, seq: np.ndarray) -> None:
        """Visit the candidates `seq` (indices) from now on; positions refer to it."""
        self.seq = seq
        self.x = self.cand[seq]
        self.g_hi_seq = self.g_hi[seq]
        if self.fourier is not None:
            self._new_fourier()

    def _new_fourier(self) -> None:
        self.fourier = Fourier(self.values[: self.n], self.h, self.lo, self.hi, len(self.cand),
                                x=self.x, g_hi=self.g_hi_seq)
        self.stale = True

    def start(self, first: int, second: int) -> None:
        """The selected set starts with these two candidates (not in the visiting order)."""
        self._add(first, None)
        self._add(second, None)

    def accept(self, pos: int) -> int:
        """Move the candidate at position `pos` into the selected set; returns its index."""
        i = int(self.seq[pos])
        self._add(i, pos)
        return i

    def _add(self, i: int, pos: int | None) -> None:
        x = float(self.cand[i])
        self.values[self.n] = x
        self.n += 1
        self.var.add(x)
        self.kde = None
        self.stale = True
        fourier = self.fourier
        if pos is not None:
            self.g_hi_seq[pos] = DEAD
            if fourier is not None:
                fourier.select(pos)
        var = self.var.variance()
        self.point_mass = var == 0.0
        if self.point_mass:
            return
        self.sd = math.sqrt(var)
        self.h = self.sd * self.n ** -0.2  # Scott: sd (ddof 1) x n^(-1/5), as gaussian_kde
        if self.n < DIRECT or not (1e-150 < self.h < 1e150) or (self.hi - self.lo) / self.h > MAX_SPAN:
            self.fourier = None
        elif fourier is None or not fourier.usable(self.h):
            self._new_fourier()

    def _tolerance(self) -> tuple[float, float]:
        """Gap between the exact KDE with our bandwidth and scipy's floating-point value.

        Relative: scipy's rounding, and its bandwidth differing from ours by
        eta, which moves a kernel at u bandwidths by at most eta (1 + u^2)
        relatively; absolute (in kernel-sum units): that for kernels beyond
        U = CUTOFF + 4 bandwidths, each below (1 + U^2) exp(-U^2 / 2).
        """
        n = self.n
        eta = (2 * n + 36) * EPS + ((n + 2) * EPS * self.m / self.sd) ** 2  # bandwidth: ours vs scipy's
        if eta > 1e-6:
            return 1.0, math.inf  # no useful bound: scipy decides
        u2 = (CUTOFF + 4) ** 2
        return (1.01 * (scipy_rounding(n, self.h, self.m) + eta * (1 + u2)),
                1.01 * n * eta * (1 + u2) * math.exp(-0.5 * u2))

    def compare(self, a: int, b: int):
        """Compare the candidates at positions a..b-1 (at most max_step()) with bounds on scipy's densities.

        Returns z = (s_lo - g_hi) / z_scale per position, z_scale > 0 (> 0:
        certainly rejected; huge once selected), with [s_lo, s_hi] around the
        selected and [g_lo, g_hi] around the gold density, and a function
        (z[j], a + j) -> an upper bound of s_hi - g_lo there (<= 0: certainly accepted).
        """
        fourier = self.fourier
        if fourier is not None:
            if self.stale:
                self._set_fourier_bounds()
            self.z_scale = self.c
            if a < fourier.w0 or b > fourier.w1:
                fourier.fill(a)
                assert b <= fourier.w1, "chunks are at most max_step() positions"
            return (fourier.coef @ fourier.table[:, a - fourier.w0 : b - fourier.w0]).real, self._fourier_upper
        self.z_scale = 1.0
        if self.point_mass:  # infinitely dense at its value, zero elsewhere
            z = np.where(self.x[a:b] == self.values[0], 1.0, -1.0)
            z[self.g_hi_seq[a:b] == DEAD] = np.inf
            if self.strict:  # gold > 0 is certain where its lower bound is positive, else scipy decides
                return z, lambda z_j, pos: z_j if self.g_lo[self.seq[pos]] > 0 else 0.0
            return z, lambda z_j, pos: z_j
        n, h = self.n, self.h
        if not (1e-150 < h < 1e150):
            return -self.g_hi_seq[a:b], lambda z_j, pos: 1.0  # scipy decides
        rel, extra = self._tolerance()
        norm = 1.0 / (n * h * SQRT2PI)  # density = norm * sum_i exp(-u_i^2 / 2)
        floor = FLOOR + extra * norm
        s, err = direct_sum(self.values[:n], self.x[a:b], h)
        s, err = s * SQRT2PI * norm, err * SQRT2PI * norm  # direct_sum includes the 1 / sqrt(2 pi)
        z_hi = (s + err) * (1 + rel) + floor - self.g_lo[self.seq[a:b]]
        return (s - err) * (1 - rel) - floor - self.g_hi_seq[a:b], lambda z_j, pos: z_hi[pos - a]

    def _set_fourier_bounds(self) -> None:
        """Coefficients for this state: c Re(coef @ column) = (1 - rel) s~ - g_hi - add_lo <= s_sc - g_hi."""
        n, h = self.n, self.h
        rel, extra = self._tolerance()
        norm = 1.0 / (n * h * SQRT2PI)
        err, total = self.fourier.error(n)
        err = 1.01 * err * norm + FLOOR + extra * norm  # s_sc in [(1 - rel)(s~ - err), (1 + rel)(s~ + err)]
        # the product rounds by at most (terms + 8) eps times the sum of |terms| (times c)
        self.dot = (2 * self.fourier.K + 12) * EPS * (total * norm * (1 + rel) + self.g_max + 2 * err)
        self.add_lo = err * (1 + rel) + self.dot
        self.add_hi = err * (1 + rel)
        self.ratio = (1 + rel) / (1 - rel)
        self.c = self.fourier.set_coef(1.0 / (h * h), norm * (1 - rel), self.add_lo)
        self.stale = False

    def _fourier_upper(self, zc: float, pos: int) -> float:
        """Upper bound of s_hi - g_lo from zc = Re(coef @ column) = (s_lo - g_hi) / c, rounded."""
        i = self.seq[pos]
        g_hi, g_lo = float(self.g_hi[i]), float(self.g_lo[i])
        z = zc * self.c
        low = z + self.dot + g_hi + self.add_lo  # >= (1 - rel) s~
        value = low * self.ratio + self.add_hi - g_lo  # >= s_sc - g_lo
        return value + 8 * EPS * (abs(z) + self.dot + g_hi + self.add_lo + abs(value) + g_lo) * self.ratio

    def max_step(self) -> int:
        return MAX_STEP if self.fourier is None else min(MAX_STEP, self.fourier.window)

    def exact(self, pos: int) -> bool:
        """The literal comparison, with scipy's own floating-point evaluation."""
        self.exact_calls += 1
        i = int(self.seq[pos])
        x = self.cand[i]
        if i not in self.gold_exact:
            self.gold_exact[i] = self.gold_kde(x)[0]
        if self.point_mass:  # only `strict` asks here: density 0 away from the point, accepted when gold > 0
            return self.gold_exact[i] > 0.0
        if self.kde is None:
            self.kde = stats.gaussian_kde(self.values[: self.n])
        if self.strict:
            return self.gold_exact[i] > self.kde(x)[0]
        return self.gold_exact[i] >= self.kde(x)[0]


def _order(n: int, seed: int, order) -> np.ndarray:
    if order is None:
        return np.random.default_rng(seed).permutation(n)
    order = np.asarray(order)
    if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
        raise ValueError(f"order must be a permutation of the {n} candidate indices")
    return order.astype(np.int64)


def iterative_kde(gold_scores, candidate_scores, seed: int = 0, *, order=None, accept: str = "at_least") -> np.ndarray:
    """Thesis Algorithm 1: grow a selected set whose score density follows the gold density.

    The candidates are visited in `order` (default: a shuffle seeded with
    `seed`); the first two start the selected set. Passes go over the
    remaining candidates in that order: a candidate whose gold density is at
    least the selected set's density at its score joins the set (`accept:
    "greater"`: only one whose gold density is greater, Algorithm 1's words;
    the two differ only where the densities are equal), and the set's KDE is
    refitted at once. Passes stop after one that accepts nothing.
    Densities are Gaussian KDEs with Scott's bandwidth exactly as
    `scipy.stats.gaussian_kde` computes them. Returns the kept indices into
    `candidate_scores` in the order they were selected, identical to the
    literal algorithm's (see the module docstring for how it is computed).

    Degenerate sets follow the KDE's limit as the bandwidth goes to 0: while
    the selected set has no spread (its first two scores are equal) it is a
    point mass, infinitely dense at its value and zero elsewhere, so a
    candidate with that score is rejected and any other is accepted (a gold
    density is never below 0). Gold scores without spread have no KDE, and
    raise a `DataError`. With fewer than three candidates all are kept.
    """
    gold = np.asarray(gold_scores, dtype=np.float64).ravel()
    cand = np.asarray(candidate_scores, dtype=np.float64).ravel()
    _check_gold(gold, "iterative KDE")
    if accept not in ("at_least", "greater"):
        raise ValueError(f"accept must be 'at_least' or 'greater', not {accept!r}")
    if not np.all(np.isfinite(cand)):
        raise DataError("iterative KDE: the candidate scores contain NaN or infinite values")
    order = _order(len(cand), seed, order)
    if len(cand) <= 2:
        return order
    with _one_blas_thread():  # the products are small and sequential: BLAS threads only contend
        return _iterative_kde(gold, cand, order, strict=accept == "greater")


_BLAS = []  # a threadpoolctl controller, made once (finding the libraries takes a millisecond)


def _one_blas_thread():
    """Limit BLAS to one thread: the products here are small and sequential, and threads only contend."""
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - installed with scikit-learn
            _BLAS.append(None)
        else:
            _BLAS.append(ThreadpoolController())
    return contextlib.nullcontext() if _BLAS[0] is None else _BLAS[0].limit(limits=1, user_api="blas")


def _iterative_kde(gold: np.ndarray, cand: np.ndarray, order: np.ndarray, strict: bool = False) -> np.ndarray:
    seq = order[2:]
    state = _Selection(gold, cand, seq, strict)
    chosen = [int(order[0]), int(order[1])]
    state.start(*chosen)
    gap = 16.0  # running mean of positions visited per acceptance: sizes the vectorised chunks
    while True:
        accepted_any = False
        pos, run = 0, 0  # run: positions passed without acceptance under the current state
        step = max(16, int(2 * gap))
        while pos < len(state.seq):
            end = min(pos + min(step, state.max_step()), len(state.seq))
            z_lo, z_hi = state.compare(pos, end)
            hit = None
            # z_lo > 0 (strict: >= 0): certainly rejected, and rejections leave the state as it is; an upper
            # bound <= 0 (strict: < 0): certainly accepted; else scipy decides
            for j in ((z_lo < 0) if strict else (z_lo <= 0)).nonzero()[0]:
                j = int(j)
                upper = z_hi(float(z_lo[j]), pos + j)
                if (upper < 0 if strict else upper <= 0) or state.exact(pos + j):
                    hit = j
                    break
            if hit is None:
                run += end - pos
                pos = end
                step = min(2 * step, state.max_step())
                continue
            chosen.append(state.accept(pos + hit))
            accepted_any = True
            gap = 0.8 * gap + 0.2 * (run + hit + 1)
            step = max(16, int(2 * gap))
            pos += hit + 1
            run = 0
        if not accepted_any:
            return np.asarray(chosen, dtype=np.int64)
        alive = state.g_hi_seq != DEAD
        if alive.mean() < 0.5:  # passes visit the survivors only: drop the selected from the sequence
            state.set_sequence(state.seq[alive])
