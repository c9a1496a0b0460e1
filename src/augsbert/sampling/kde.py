"""Distribution-matching selection of silver pairs by their teacher scores.

`kde_sample` is the AugSBERT paper's sampling function; `iterative_kde` the
thesis' Algorithm 1. Densities are Gaussian KDEs with Scott's bandwidth, as
`scipy.stats.gaussian_kde` computes them, evaluated on a fine grid (linear
binning + FFT convolution), which makes one refit cost O(grid log grid)
instead of O(selected x candidates).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

GRID = 2048  # grid points over the score range (plus 4 sd padding each side)
DRIFT = 0.01  # relative bandwidth drift that triggers a full rebuild of the growing KDE


def _grid(*arrays: np.ndarray, pad_sd: float = 4.0) -> np.ndarray:
    lo = min(float(a.min()) for a in arrays)
    hi = max(float(a.max()) for a in arrays)
    spread = max(float(max(a.std() for a in arrays)), 1e-3)
    return np.linspace(lo - pad_sd * spread, hi + pad_sd * spread, GRID)


def scott_bandwidth(n: int, std: float) -> float:
    """Kernel standard deviation of scipy's gaussian_kde in 1-d: sample std (ddof 1) x n^(-1/5)."""
    return std * n ** (-1 / 5)


def density_on_grid(points: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Gaussian KDE (Scott) of `points` on `grid` (exact scipy evaluation; used once per fixed set)."""
    return stats.gaussian_kde(points)(grid)


def _binned_density(points: np.ndarray, grid: np.ndarray, h: float) -> np.ndarray:
    """Gaussian KDE with kernel sd `h` on a regular grid: linear binning + FFT convolution."""
    step = grid[1] - grid[0]
    pos = np.clip((points - grid[0]) / step, 0, len(grid) - 1.000001)
    left = pos.astype(np.int64)
    frac = pos - left
    counts = np.bincount(left, 1 - frac, minlength=len(grid)) + np.bincount(left + 1, frac, minlength=len(grid))
    size = 2 * len(grid)
    freq = np.fft.rfftfreq(size, d=step)
    dens = np.fft.irfft(np.fft.rfft(counts, size) * np.exp(-2 * (np.pi * freq * h) ** 2), size)[: len(grid)]
    return np.maximum(dens, 0.0) / (len(points) * step)


class _GrowingKDE:
    """Unnormalised kernel sum S(x) = sum_i K_h(x - s_i) of a growing set, kept on the grid.

    Adding a point adds its kernel in a window of +-5 h (O(window)); the
    density is S / n, so the 1/n normalisation is exact at every step. Scott's
    bandwidth shrinks as the set grows: the whole sum is rebuilt with the
    current bandwidth whenever it has drifted by more than DRIFT (1 %), so the
    kernel width is never more than 1 % off what a refit would use.
    """

    def __init__(self, grid: np.ndarray, points: list[float]):
        self.grid = grid
        self.step = grid[1] - grid[0]
        self.points = list(points)
        self.total = float(np.sum(points))
        self.total_sq = float(np.sum(np.square(points)))
        self._rebuild()

    @property
    def n(self) -> int:
        return len(self.points)

    def bandwidth(self) -> float:
        n = len(self.points)
        var = max((self.total_sq - self.total * self.total / n) / (n - 1), 1e-12)
        return math.sqrt(var) * n ** -0.2

    def _rebuild(self) -> None:
        self.h = self.bandwidth()
        self.sum = _binned_density(np.asarray(self.points), self.grid, self.h) * self.n
        self.half = int(np.ceil(5 * self.h / self.step)) + 1

    def add(self, x: float) -> None:
        self.points.append(x)
        self.total += x
        self.total_sq += x * x
        if abs(self.bandwidth() / self.h - 1) > DRIFT:
            self._rebuild()
            return
        centre = int(round((x - self.grid[0]) / self.step))
        lo, hi = max(0, centre - self.half), min(len(self.grid), centre + self.half + 1)
        z = (self.grid[lo:hi] - x) / self.h
        self.sum[lo:hi] += np.exp(-0.5 * z * z) * (1 / (self.h * math.sqrt(2 * math.pi)))


def kde_sample(gold_scores, candidate_scores, seed: int) -> np.ndarray:
    """AugSBERT paper's sampler: keep a candidate with probability min(1, F_gold(s) / F_silver(s))."""
    gold = np.asarray(gold_scores, dtype=np.float64)
    cand = np.asarray(candidate_scores, dtype=np.float64)
    grid = _grid(gold, cand)
    f_gold = np.interp(cand, grid, density_on_grid(gold, grid))
    f_silver = np.interp(cand, grid, density_on_grid(cand, grid))
    keep_prob = np.minimum(1.0, f_gold / np.maximum(f_silver, 1e-300))
    rng = np.random.default_rng(seed)
    return np.flatnonzero(rng.random(len(cand)) < keep_prob)


def iterative_kde(gold_scores, candidate_scores, seed: int) -> np.ndarray:
    """Thesis Algorithm 1: grow a selected set whose score density follows the gold density.

    Candidates are shuffled (seeded); the first two start the selected set.
    Passes go over the remaining candidates in order; a candidate whose gold
    density is at least the selected set's density at its score is moved into
    the set, and the set's KDE is refitted at once. Passes stop when one
    accepts nothing. Returns indices into `candidate_scores`.

    Fast but faithful: densities live on a 2048-point grid; between two
    acceptances the candidates are tested in vectorised chunks against the
    same density (exactly the comparisons the sequential algorithm makes), and
    an acceptance updates the kernel sum locally instead of refitting.
    """
    gold = np.asarray(gold_scores, dtype=np.float64)
    cand = np.asarray(candidate_scores, dtype=np.float64)
    if len(cand) < 2:
        return np.arange(len(cand))
    order = np.random.default_rng(seed).permutation(len(cand))
    grid = _grid(gold, cand)
    step = grid[1] - grid[0]
    gold_h = scott_bandwidth(len(gold), float(gold.std(ddof=1)) if len(gold) > 1 else 1e-3)
    gold_grid = _binned_density(gold, grid, gold_h)
    pos = np.clip((cand - grid[0]) / step, 0, len(grid) - 1.000001)
    left = pos.astype(np.int64)
    frac = pos - left
    gold_at = gold_grid[left] * (1 - frac) + gold_grid[left + 1] * frac
    chosen = [int(order[0]), int(order[1])]
    selected = _GrowingKDE(grid, [cand[i] for i in chosen])
    remaining = order[2:]
    while len(remaining):
        keep = np.ones(len(remaining), dtype=bool)
        accepted_any = False
        pos_, chunk = 0, 64
        while pos_ < len(remaining):
            idx = remaining[pos_ : pos_ + chunk]
            l, f = left[idx], frac[idx]
            sel = (selected.sum[l] * (1 - f) + selected.sum[l + 1] * f)
            hits = np.flatnonzero(gold_at[idx] * selected.n >= sel)
            if not len(hits):
                pos_ += chunk
                chunk = min(chunk * 4, 1 << 16)
                continue
            j = pos_ + int(hits[0])
            i = int(remaining[j])
            chosen.append(i)
            keep[j] = False
            selected.add(cand[i])
            accepted_any = True
            pos_, chunk = j + 1, 16
        remaining = remaining[keep]
        if not accepted_any:
            break
    return np.asarray(chosen, dtype=np.int64)
