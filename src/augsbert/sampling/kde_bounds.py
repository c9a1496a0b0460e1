"""The bounds machinery of augsbert.sampling.kde: exact variances, the local (Taylor) expansion of a Gaussian KDE
over cells of scores and its Fourier representation, from which kde._Selection bounds each candidate's density
ratio (the method and its error bounds are stated in kde's docstring)."""

from __future__ import annotations

import math

import numpy as np

GRID = 2048  # kde_sample: grid points over the score range (plus 4 sd padding each side)

EPS = float(np.finfo(np.float64).eps)
TERMS = 14  # expansion terms (polynomial degree 13)
CUTOFF = 7.0  # kernels farther than this many bandwidths are bounded, not summed
CELL = 0.8  # cell width in bandwidths when cells are (re)built: |s - c| <= 0.4 h
DIRECT = 32  # below this many selected scores every kernel is summed directly
MAX_CELLS = 1 << 16
ALIAS_SD = 9.0  # periodic images of the selected set stay at least this many bandwidths away
TRUNC_SD = 9.0  # frequencies are kept up to TRUNC_SD / h
MAX_SPAN = 2000.0  # score range in bandwidths beyond which the Fourier representation is not used
TABLE_MAX = 1 << 22  # candidate column entries (complex numbers, 16 bytes each) kept in memory at once
MIN_WINDOW = 1024  # positions per window of columns at least
GOLD_FOURIER_MAX = 200_000  # up to this many candidates the gold density comes from a Fourier series
FLOOR = 1e-280
DEAD = -1e300  # upper gold bound of a selected candidate: no comparison picks it again
SQRT2PI = math.sqrt(2 * math.pi)
PHI_CUTOFF = math.exp(-0.5 * (CUTOFF - 1e-6) ** 2) / SQRT2PI
CRAMER = 1.086435 / SQRT2PI / math.sqrt(math.factorial(TERMS))  # times rho^p: truncation per point
HEADROOM = 0.4  # the frequencies cover bandwidths down to this fraction of the one they were set up for
MAX_STEP = 1 << 16  # candidates per vectorised chunk at most

_FACTORIALS = np.array([math.factorial(k) for k in range(TERMS)], dtype=np.float64)


class ExactVariance:
    """Sample variance (ddof 1) of a growing set from exact integer sums: correctly rounded, O(1) per value.

    Every float is an integer times a power of two; the scores are kept as
    integers on a common power-of-two scale, so sum x and sum x^2 carry no
    rounding and neither does n sum x^2 - (sum x)^2 (zero exactly when all
    values are equal). Python's int / int is correctly rounded.
    """

    def __init__(self):
        self.n = self.scale = self.total = self.total_sq = 0

    def add(self, x: float) -> None:
        num, den = float(x).as_integer_ratio()
        exp = den.bit_length() - 1
        if exp > self.scale:
            self.total <<= exp - self.scale
            self.total_sq <<= 2 * (exp - self.scale)
            self.scale = exp
        v = num << (self.scale - exp)
        self.total += v
        self.total_sq += v * v
        self.n += 1

    def variance(self) -> float:
        spread = self.n * self.total_sq - self.total * self.total
        return spread / ((self.n * (self.n - 1)) << (2 * self.scale)) if spread else 0.0


class LocalExpansion:
    """Taylor expansions of S(x) = sum_i phi((x - s_i) / h) about cell centres, for a fixed set of scores.

    Cell j covers [lo + j w, lo + (j + 1) w) with w = CELL h; only the cells in
    `cells` (sorted ids) are built. Sources farther than CUTOFF + rho
    bandwidths from a centre are left out and bounded by PHI_CUTOFF each.
    """

    def __init__(self, sources: np.ndarray, h: float, lo: float, cells: np.ndarray):
        self.h, self.lo, self.w = h, lo, CELL * h
        self.rho = 0.5 * CELL * (1 + 1e-9)  # |x - c| / h inside a cell, with room for rounding
        self.cells = cells
        self.centres = lo + (cells + 0.5) * self.w
        src = np.sort(sources)
        m = len(cells)
        self.coef = np.zeros((m, TERMS))
        trunc_env, float_env, inside_n = np.zeros(m), np.zeros(m), np.zeros(m)
        reach = (CUTOFF + self.rho) * h * (1 + 1e-9)
        b0 = 0
        while b0 < m:
            b1 = min(m, b0 + 256)
            while True:
                s0 = np.searchsorted(src, self.centres[b0] - reach, "left")
                s1 = np.searchsorted(src, self.centres[b1 - 1] + reach, "right")
                if (b1 - b0) * (s1 - s0) <= 1 << 20 or b1 - b0 == 1:
                    break
                b1 = b0 + (b1 - b0) // 2
            a = (self.centres[b0:b1, None] - src[None, s0:s1]) / h  # (c - s) / h
            inside = np.abs(a) <= CUTOFF + self.rho
            ph = np.where(inside, np.exp(-0.5 * a * a), 0.0) / SQRT2PI
            q = np.maximum(np.abs(a) - self.rho, 0.0)
            eq = np.where(inside, np.exp(-0.25 * q * q), 0.0)
            trunc_env[b0:b1] = eq.sum(1)
            float_env[b0:b1] = (eq * eq).sum(1) / SQRT2PI
            inside_n[b0:b1] = inside.sum(1)
            # phi(a + v) = sum_k v^k / k! phi^(k)(a), phi^(k)(a) = (-1)^k He_k(a) phi(a)
            he_prev, he = np.ones_like(a), a
            self.coef[b0:b1, 0] = ph.sum(1)
            self.coef[b0:b1, 1] = -(a * ph).sum(1)
            for k in range(1, TERMS - 1):
                he_prev, he = he, a * he - k * he_prev
                self.coef[b0:b1, k + 1] = (-1) ** (k + 1) * (he * ph).sum(1) / _FACTORIALS[k + 1]
            b0 = b1
        flt = (2 * (CUTOFF + 4) ** 2 + 12 * TERMS + inside_n + 32) * EPS * math.exp(self.rho ** 2)
        self.err = 1.01 * (CRAMER * self.rho ** TERMS * trunc_env + flt * float_env
                           + (len(src) - inside_n) * PHI_CUTOFF)

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Approximate S at `x` and a bound on its error (infinite for x outside the built cells)."""
        ids = np.floor((x - self.lo) / self.w).astype(np.int64)
        row = np.minimum(np.searchsorted(self.cells, ids), len(self.cells) - 1)
        v = (x - self.centres[row]) / self.h
        value = self.coef[row, TERMS - 1]
        for k in range(TERMS - 2, -1, -1):
            value = value * v + self.coef[row, k]
        ok = (self.cells[row] == ids) & (np.abs(v) <= self.rho)
        return value, np.where(ok, self.err[row], np.inf)


class Fourier:
    """Kernel sums sum_i exp(-lam (x - s_i)^2 / 2) from the scores' empirical characteristic function.

    With period L and frequencies w_k = 2 pi k / L (k <= K), Poisson summation
    gives the sum as (1/L) sum_k G(w_k) e^{i w_k x} E_k, up to the periodic
    images and the frequencies left out, where G(w) = sqrt(2 pi / lam)
    exp(-w^2 / (2 lam)) and E_k = sum_i e^{-i w_k s_i}. E does not depend on
    the bandwidth: for the growing selected set, an acceptance adds one
    column to it and a refit only changes the Gaussian factor G. Candidates'
    columns (c_k e^{i w_k x} for k <= K, g_hi, 1), with c_0 = 1 and
    c_k = sqrt(2) for the pair k, -k, are computed for a window of positions
    in visiting order, so that one vector-matrix product over a slice
    compares a whole chunk of candidates with the gold density:
    Re(coef @ column) = (scale * kernel sum - g_hi - add) / c, c > 0.

    The period keeps every image farther than ALIAS_SD bandwidths from every
    candidate while h grows by up to 50 %, the frequencies reach TRUNC_SD / h
    while h shrinks to `headroom` h; `usable(h)` says whether both still hold.
    """

    def __init__(self, values: np.ndarray, h: float, lo: float, hi: float, n_max: int, headroom: float = HEADROOM,
                 x: np.ndarray | None = None, g_hi: np.ndarray | None = None):
        self.x, self.g_hi = x, g_hi  # scores and upper gold bounds in visiting order (g_hi is DEAD once selected)
        self.x0, self.span = 0.5 * (lo + hi), hi - lo  # [lo, hi] holds every candidate and every source score
        self.L = self.span + 1.5 * ALIAS_SD * h
        self.dw = 2 * math.pi / self.L
        self.K = int(math.ceil(TRUNC_SD / (headroom * h) / self.dw))
        self.half_w2 = -0.5 * (self.dw * np.arange(self.K + 1)) ** 2
        # |computed column - exact| <= sqrt(2) (k (2 |theta| + 8) + 2) eps with |theta| <= pi span / L
        self.delta = math.sqrt(2) * (self.K * (2 * math.pi * self.span / self.L + 8) + 2) * EPS
        # Images and left-out frequencies for any usable h and up to n_max scores (both are far below
        # what matters; computed once): images are at least d = L - span away; the first frequency
        # left out, wc = (K + 1) dw, is at least TRUNC_SD / h.
        h_hi, h_lo = (self.L - self.span) / ALIAS_SD, TRUNC_SD / ((self.K + 1) * self.dw)
        lam_lo, lam_hi = 1 / (h_hi * h_hi), 1 / (h_lo * h_lo)
        d, wc = self.L - self.span, (self.K + 1) * self.dw
        alias = 2 * n_max * math.exp(-0.5 * lam_lo * d * d) / -math.expm1(-lam_lo * self.L * d)
        trunc = (2 * n_max / self.L) * math.sqrt(2 * math.pi / lam_lo) * math.exp(-0.5 * wc * wc / lam_hi) / (
            -math.expm1(-wc * self.dw / lam_hi))
        self.far = alias + trunc
        self.abc = self.trig(values).sum(1).conj()  # conjugated sums of the source scores' columns
        self.coef = np.zeros(self.K + 3, dtype=np.complex128)
        self.factor = np.empty(self.K + 1)
        if x is not None:
            self.window = max(MIN_WINDOW, min(len(x), TABLE_MAX // (self.K + 3)))
            self.table = np.empty((self.K + 3, min(self.window, len(x))), dtype=np.complex128)
            self.w0 = self.w1 = 0  # positions whose columns the table holds

    def trig(self, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Columns c_k e^{i k theta}, k <= K, theta = w_1 (x - x0), one per score, by repeated products."""
        base = np.exp(1j * ((np.asarray(x, dtype=np.float64) - self.x0) * self.dw))
        powers = np.empty((self.K + 1, len(base)), dtype=np.complex128) if out is None else out
        powers[0] = 1.0
        if self.K:
            np.multiply(base, math.sqrt(2), out=powers[1])
            if len(base) <= 256:  # few columns: one call beats K of them
                powers[2:] = base
                np.cumprod(powers[1:], axis=0, out=powers[1:])
            else:
                for k in range(1, self.K):
                    np.multiply(powers[k], base, out=powers[k + 1])
        return powers

    def usable(self, h: float) -> bool:
        return self.L - self.span >= ALIAS_SD * h and (self.K + 1) * self.dw * h >= TRUNC_SD

    def error(self, n: int) -> tuple[float, float]:
        """Bound on |computed - exact| kernel sum of n scores, and on the sum of |terms| of the product."""
        # (1/L) sum_k G(w_k) is the periodic kernel at 0, below 1 + 1e-16 as L > 9 h; columns are off
        # by delta each, E_k sums n of them, coefficients and products round by a few eps
        gs = 1.0 + 1e-16
        rounding = 2 * n * gs * (2 * self.delta + (2 * self.K + 16 + 1.5 * n) * EPS)
        return self.far + rounding, 2 * n * gs * (1 + self.delta) ** 2

    def set_coef(self, lam: float, scale: float, add: float) -> float:
        """Set coef so that Re(coef @ column) = (scale * kernel sum - g_hi - add) / c; returns c."""
        factor = self.factor
        np.multiply(self.half_w2, 1.0 / lam, out=factor)
        np.exp(factor, out=factor)
        np.multiply(factor, self.abc, out=self.coef[: self.K + 1])
        c = scale * math.sqrt(2 * math.pi / lam) / self.L
        self.coef[-2], self.coef[-1] = -1.0 / c, -add / c
        return c

    def kernel_sums(self, x: np.ndarray, lam: float) -> np.ndarray:
        """The kernel sums at the scores x."""
        c = self.set_coef(lam, 1.0, 0.0)
        out = np.empty(len(x))
        for b0 in range(0, len(x), 8192):
            out[b0 : b0 + 8192] = (self.coef[: self.K + 1] @ self.trig(x[b0 : b0 + 8192])).real
        return out * c

    def fill(self, a: int) -> None:
        """Compute the columns of the positions a, a + 1, ... (a window of them)."""
        self.w0, self.w1 = a, min(a + self.window, len(self.x))
        table = self.table[:, : self.w1 - a]
        self.trig(self.x[a : self.w1], out=table[: self.K + 1])
        table[self.K + 1] = self.g_hi[a : self.w1]
        table[self.K + 2] = 1.0

    def select(self, pos: int) -> None:
        """The candidate at position `pos` joins the selected set."""
        if self.w0 <= pos < self.w1:  # usually: it has just been compared
            self.table[self.K + 1, pos - self.w0] = DEAD
            column = self.table[: self.K + 1, pos - self.w0]
        else:
            column = self.trig(self.x[pos : pos + 1])[:, 0]
        self.abc += column.conj()


def direct_sum(values: np.ndarray, x: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
    """S at `x` summed kernel by kernel, and a bound on its rounding error."""
    u = (x[:, None] - values[None, :]) / h
    ph = np.exp(-0.5 * u * u) / SQRT2PI
    value = ph.sum(1)
    return value, 1.01 * ((len(values) + 8) * EPS * value + 2 * EPS * (ph * np.minimum(u * u, 1600)).sum(1))


def scipy_rounding(n: int, h: float, m: float) -> float:
    """Relative error of scipy's gaussian_kde evaluation against the exact KDE with its own bandwidth."""
    return (n + 1610 + 200 * m / h) * EPS
