"""Distribution-matching selection of silver pairs by their teacher scores.

`kde_sample` is the AugSBERT paper's sampling function; `iterative_kde` the
thesis' Algorithm 1. Densities are Gaussian KDEs with Scott's bandwidth, as
`scipy.stats.gaussian_kde` computes them, evaluated on a fine grid (linear
binning + FFT convolution), which makes one refit cost O(grid log grid)
instead of O(selected x candidates).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

GRID = 4096


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


class BinnedKDE:
    """A 1-d Gaussian KDE that adds points in O(1) and evaluates on a grid in O(grid log grid).

    Points are linearly binned onto the grid; the density is the binned counts
    convolved with the Gaussian kernel, done as a product of Fourier transforms
    (the kernel's transform is analytic, so a new bandwidth costs nothing).
    """

    def __init__(self, grid: np.ndarray):
        self.grid = grid
        self.step = grid[1] - grid[0]
        self.size = 2 * len(grid)  # zero padding: no wrap-around
        self.freq = np.fft.rfftfreq(self.size, d=self.step)
        self.counts_hat = np.zeros(len(self.freq), dtype=np.complex128)
        self.phase = np.exp(-2j * np.pi * np.arange(len(self.freq)) / self.size)
        self.n, self.total, self.total_sq = 0, 0.0, 0.0

    def add(self, x: float) -> None:
        pos = (x - self.grid[0]) / self.step
        left = int(np.clip(np.floor(pos), 0, len(self.grid) - 2))
        frac = float(np.clip(pos - left, 0.0, 1.0))
        # transform of a unit mass at bins `left` and `left + 1`
        base = self.phase ** left
        self.counts_hat += base * ((1 - frac) + frac * self.phase)
        self.n += 1
        self.total += x
        self.total_sq += x * x

    def density(self) -> np.ndarray:
        if self.n < 2:
            raise ValueError("a KDE needs at least two points")
        var = max((self.total_sq - self.total**2 / self.n) / (self.n - 1), 1e-12)
        h = scott_bandwidth(self.n, np.sqrt(var))
        kernel_hat = np.exp(-2 * (np.pi * self.freq * h) ** 2)
        dens = np.fft.irfft(self.counts_hat * kernel_hat, n=self.size)[: len(self.grid)]
        return np.maximum(dens, 0.0) / (self.n * self.step)


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
    """
    gold = np.asarray(gold_scores, dtype=np.float64)
    cand = np.asarray(candidate_scores, dtype=np.float64)
    if len(cand) < 2:
        return np.arange(len(cand))
    order = np.random.default_rng(seed).permutation(len(cand))
    grid = _grid(gold, cand)
    gold_at = np.interp(cand, grid, density_on_grid(gold, grid))
    selected = BinnedKDE(grid)
    chosen = [int(order[0]), int(order[1])]
    for i in chosen:
        selected.add(cand[i])
    remaining = order[2:]
    while len(remaining):
        current = selected.density()
        accepted_any = False
        keep = np.ones(len(remaining), dtype=bool)
        pos, chunk = 0, 64
        while pos < len(remaining):
            idx = remaining[pos : pos + chunk]
            hits = np.flatnonzero(gold_at[idx] >= np.interp(cand[idx], grid, current))
            if not len(hits):
                pos += chunk
                chunk = min(chunk * 2, 65536)
                continue
            j = pos + int(hits[0])
            i = int(remaining[j])
            chosen.append(i)
            keep[j] = False
            selected.add(cand[i])
            current = selected.density()
            accepted_any = True
            pos, chunk = j + 1, 64
        remaining = remaining[keep]
        if not accepted_any:
            break
    return np.asarray(chosen, dtype=np.int64)
