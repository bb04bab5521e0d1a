"""Exact one-sided tests for paired differences d_i ∈ {−1, 0, +1} (docs/definitions.md §11, §12).

Per item d_i = candidate − baseline; b = #(+1), c = #(−1), δ = P(+1) − P(−1). Side ``above``
tests H0: δ ≤ δ0, side ``below`` H0: δ ≥ δ0. The nuisance is the discordance s = P(+1) + P(−1).

*Fixed N* (:func:`paired_fixed_test`): an exact unconditional test. Outcomes (b, c) are ordered
by the restricted-MLE score statistic of Tango (1998) for a paired difference (variance taken
at the maximum-likelihood (p+, p−) under δ = δ0), made monotone (a +1 added or a −1 removed
never makes an outcome less extreme), and the p-value is the largest trinomial probability of
the outcomes at least as extreme over the nuisance on the null boundary δ = δ0. A monotone
region is an increasing event of the items, so its probability over the whole composite null
is largest on that boundary. The nuisance is maximised on :data:`NUISANCE_POINTS` values of s
(denser at low discordance); tests/unit/metrics/test_paired_exact.py checks it against a grid
40× finer.

*Group-sequential* (:class:`PairedDesign`): at the cap the fixed-N region at α; at each earlier
look point n the early region {log E_n(b, c) ≥ h}, where E_n is a mixture of fixed bets on
u = (d + 1)/2 against m′ = (1 + δ0)/2 (an e-process under H0). The scalar h is the smallest for
which the exact probability of entering an early region at some look or the final region,
computed by dynamic programming over (b, c) with absorption and maximised over the nuisance, is
at most α. The final region contains the fixed-N region, so the design rejects wherever the
fixed-N test does, and more often (it also stops early).

Side ``below`` is side ``above`` for −d: counts (b, c) swap and δ0 changes sign.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from scipy.special import gammaln, xlogy
from scipy.stats import norm

from flipgate.metrics.onesided import FINAL_SHARE, Evidence, Looks, Side

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: nuisance values s on the null boundary (s = |δ0| + (1 − |δ0|)·u², u uniform on [0, 1])
NUISANCE_POINTS = 240
#: the sup over the nuisance is refined on this many points around each of the grid's top maxima
REFINE_POINTS = 64
#: the fractions c_j of the largest admissible bet in the early regions' mixture of fixed bets
BET_FRACTIONS = (0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.85, 1.0)
#: nuisance rows × cells per block when summing probabilities (bounds memory at ~ 4M floats)
_BLOCK = 4_000_000
#: relative tolerance under which two statistic values count as tied
_TIE = 1e-9

SizeCurve = Callable[[FloatArray], FloatArray]


def counts(d: npt.ArrayLike) -> tuple[int, int]:
    """(b, c) = (#(+1), #(−1)) of paired differences ``d`` (values in {−1, 0, 1})."""
    values = np.asarray(d)
    if values.ndim != 1 or not np.isin(values, (-1, 0, 1)).all():
        raise ValueError("paired differences must be a 1-D array of values in {-1, 0, 1}")
    return int((values == 1).sum()), int((values == -1).sum())


def _oriented(b: int, c: int, delta0: float, side: Side) -> tuple[int, int, float]:
    """The same question for side ``above``: (b, c, δ0) for ``above``, (c, b, −δ0) for below."""
    if not -1.0 < delta0 < 1.0:
        raise ValueError(f"delta0 must lie in (-1, 1) (value: {delta0!r})")
    return (b, c, delta0) if side == "above" else (c, b, -delta0)


def nuisance_grid(delta0: float, points: int = NUISANCE_POINTS) -> FloatArray:
    """Discordances s from |δ0| to 1, denser at low discordance."""
    u = np.linspace(0.0, 1.0, points)
    grid: FloatArray = abs(delta0) + (1.0 - abs(delta0)) * u**2
    return grid


def sup_over_nuisance(delta0: float, curve: SizeCurve) -> float:
    """max over s of ``curve`` (a probability as a function of the discordance s on the null
    boundary): on :func:`nuisance_grid`, then on :data:`REFINE_POINTS` between the neighbours
    of each of its three largest grid values."""
    grid = nuisance_grid(delta0)
    values = curve(grid)
    best = float(values.max())
    for i in np.argsort(-values)[:3]:
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
        best = max(best, float(curve(np.linspace(lo, hi, REFINE_POINTS)).max()))
    return best


def _triangle(n: int) -> tuple[IntArray, IntArray]:
    """Index grids (b, c) of shape (n + 1, n + 1); outcomes are the cells with b + c ≤ n."""
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    return b, c


def score_statistic(n: int, delta0: float) -> FloatArray:
    """Tango's restricted-MLE score Z(b, c) for H0: δ ≤ δ0 at n items, shape (n + 1, n + 1),
    −inf outside b + c ≤ n: Z = (b − c − nδ0) / sqrt(n(2q̃ + δ0 − δ0²)) with q̃ the MLE of p−
    under p+ − p− = δ0 (the root of 2n q² − B q − c δ0(1 − δ0) = 0, B = b(1 + δ0) + c(1 − δ0)
    − 2nδ0)."""
    b, c = _triangle(n)
    return np.where(b + c <= n, _score(b, c, n, delta0), -np.inf)


def _score(
    b: npt.ArrayLike, c: npt.ArrayLike, n: int, delta0: float, correction: float = 0.0
) -> FloatArray:
    """Tango's Z (:func:`score_statistic`) of outcomes (b, c) at n items, its numerator
    reduced by ``correction``."""
    b, c = np.asarray(b, dtype=float), np.asarray(c, dtype=float)
    big_b = b * (1 + delta0) + c * (1 - delta0) - 2 * n * delta0
    # the discriminant is a square where it should vanish ((1.2b − 0.4n)² at δ0 = −0.2, c = 0):
    # rounding can leave it a hair below 0, whose root would be NaN and the test silently "accept"
    discriminant = np.maximum(big_b**2 + 8 * n * c * delta0 * (1 - delta0), 0.0)
    q = (big_b + np.sqrt(discriminant)) / (4 * n)
    variance = np.maximum(n * (2 * q + delta0 - delta0**2), 1e-12)
    z: FloatArray = (b - c - n * delta0 - correction) / np.sqrt(variance)
    return z


def score_test_rejects(d: np.ndarray, delta0: float, side: Side, alpha: float) -> bool:
    """Tango's score test in its large-sample form, Z ≥ the normal 1 − α quantile with b − c
    reduced by one half (a continuity correction): the asymptotic version of
    :func:`paired_fixed_test`, whose exact table costs n² cells per nuisance value, for sizes
    where that is too dear (flipgate.metrics.undecided). On seven cases of 16 items (n* from 29
    to 131) the items it needs were 4 % fewer to 19 % more than the exact test's; uncorrected,
    up to 18 % fewer; corrected by a whole count, up to 47 % more."""
    b, c, bound = _oriented(*counts(d), delta0, side)
    return bool(_score(b, c, len(d), bound, correction=0.5) >= norm.ppf(1 - alpha))


def mixture_log_e(n: int, delta0: float) -> FloatArray:
    """log of the mean over c_j ∈ :data:`BET_FRACTIONS` of Π(1 + λ_j(u_i − m′)), λ_j = c_j/m′,
    u = (d + 1)/2, m′ = (1 + δ0)/2, after b (+1)s, c (−1)s among n: an e-process for δ ≤ δ0."""
    b, c = _triangle(n)
    m = (1 + delta0) / 2
    lam = np.asarray(BET_FRACTIONS)[:, None, None] / m
    with np.errstate(divide="ignore"):
        logs = (
            xlogy(b, 1 + lam * (1 - m))
            + xlogy(n - b - c, 1 + lam * (0.5 - m))
            + xlogy(c, np.maximum(1 - lam * m, 0.0))
        )
    top = logs.max(axis=0)
    finite = np.where(np.isfinite(top), top, 0.0)
    mean = finite + np.log(np.exp(logs - finite).mean(axis=0))
    return np.where((b + c <= n) & np.isfinite(top), mean, -np.inf)


def monotone(statistic: FloatArray) -> FloatArray:
    """The smallest statistic ≥ ``statistic`` that never falls when b grows or c shrinks: the
    maximum over the outcomes (b′ ≤ b, c′ ≥ c) an outcome dominates (regions {T ≥ t} of it are
    closed under adding a +1 and removing a −1)."""
    along_b = np.maximum.accumulate(statistic, axis=0)
    closed: FloatArray = np.maximum.accumulate(along_b[:, ::-1], axis=1)[:, ::-1]
    return np.where(np.isfinite(statistic), closed, -np.inf)


def _log_weights(n: int, b: IntArray, c: IntArray, delta0: float, s: FloatArray) -> FloatArray:
    """log P(b, c) at n items for each discordance s (rows) on the boundary p+ − p− = δ0, up to
    the multinomial coefficient."""
    p_plus = np.clip((s + delta0) / 2, 0.0, 1.0)
    p_minus = np.clip((s - delta0) / 2, 0.0, 1.0)
    p_zero = np.clip(1.0 - s, 0.0, 1.0)
    weights: FloatArray = (
        xlogy(b[None, :], p_plus[:, None])
        + xlogy(c[None, :], p_minus[:, None])
        + xlogy((n - b - c)[None, :], p_zero[:, None])
    )
    return weights


def _region_curve(n: int, b: IntArray, c: IntArray, delta0: float) -> SizeCurve:
    """s ↦ P_s((b, c) ∈ the cells given) at n items, in blocks of nuisance rows."""
    log_coef = gammaln(n + 1) - gammaln(b + 1) - gammaln(c + 1) - gammaln(n - b - c + 1)

    def curve(s: FloatArray) -> FloatArray:
        rows = max(1, _BLOCK // max(1, b.size))
        parts = [
            np.exp(_log_weights(n, b, c, delta0, s[i : i + rows]) + log_coef).sum(axis=1)
            for i in range(0, s.size, rows)
        ]
        return np.concatenate(parts)

    return curve


@lru_cache(maxsize=64)
def _fixed_table(n: int, delta0: float) -> tuple[FloatArray, FloatArray]:
    """(monotone score T*, p-value on the nuisance grid) of every outcome (b, c) at n items,
    side ``above``; +inf/−inf off the triangle b + c ≤ n."""
    level = monotone(score_statistic(n, delta0))
    b, c = _triangle(n)
    inside = np.isfinite(level)
    order = np.argsort(-level[inside], kind="stable")
    bb, cc, tt = b[inside][order], c[inside][order], level[inside][order]
    log_coef = gammaln(n + 1) - gammaln(bb + 1) - gammaln(cc + 1) - gammaln(n - bb - cc + 1)
    ends = np.flatnonzero(np.r_[tt[1:] < tt[:-1] - _TIE * np.maximum(1.0, np.abs(tt[:-1])), True])
    p_sorted = np.zeros(ends.size)
    grid = nuisance_grid(delta0)
    rows = max(1, _BLOCK // bb.size)
    for i in range(0, grid.size, rows):
        w = np.exp(_log_weights(n, bb, cc, delta0, grid[i : i + rows]) + log_coef)
        p_sorted = np.maximum(p_sorted, np.cumsum(w, axis=1)[:, ends].max(axis=0))
    pvalue = np.full(level.shape, np.inf)
    pvalue[bb, cc] = np.minimum(1.0, p_sorted[np.searchsorted(ends, np.arange(bb.size))])
    return level, pvalue


@lru_cache(maxsize=8192)
def _refined_p(n: int, delta0: float, b: int, c: int) -> float:
    """The p-value of outcome (b, c) (side above) with the sup over the nuisance refined."""
    level = _fixed_table(n, delta0)[0]
    tie = _TIE * max(1.0, abs(float(level[b, c])))
    rb, rc = np.nonzero(level >= level[b, c] - tie)
    return min(1.0, sup_over_nuisance(delta0, _region_curve(n, rb, rc, delta0)))


@lru_cache(maxsize=64)
def fixed_region(n: int, delta0: float, alpha: float) -> npt.NDArray[np.bool_]:
    """The fixed-N exact rejection region at level α (side above), shape (n + 1, n + 1): the
    outcomes whose p-value is ≤ α; the sup over the nuisance of its size is ≤ α."""
    level, pvalue = _fixed_table(n, delta0)
    region = pvalue <= alpha
    while region.any():  # the grid's boundary level, checked on the refined sup
        edge = np.unravel_index(np.argmin(np.where(region, level, np.inf)), level.shape)
        if _refined_p(n, delta0, int(edge[0]), int(edge[1])) <= alpha:
            break
        region &= level > level[edge] + _TIE * max(1.0, abs(float(level[edge])))
    return region


def paired_fixed_test(d: np.ndarray, delta0: float, side: Side, alpha: float) -> Evidence:
    """The exact unconditional one-sided test of δ against ``delta0`` on all of ``d`` (module
    docstring). ``reachable`` is ``rejected``: no values remain that could change it."""
    b, c, bound = _oriented(*counts(d), delta0, side)
    n = len(d)
    p = _refined_p(n, bound, b, c) if n else 1.0
    rejected = p <= alpha
    return Evidence("exact paired (unconditional)", side, rejected, "p", p, alpha, n, rejected)


@dataclass(frozen=True)
class _Look:
    """One early look point: its sample size, shape (log e-value) and early region (side
    above)."""

    n: int
    shape: FloatArray
    region: npt.NDArray[np.bool_]


Absorbed = list[tuple[int, IntArray, IntArray, FloatArray]]


class PairedDesign:
    """Group-sequential exact test of δ against ``delta0`` on the grid ``looks`` (module
    docstring); build through :func:`paired_design` to share the cached calibration."""

    def __init__(self, delta0: float, side: Side, looks: Looks, alpha: float) -> None:
        self.delta0, self.side, self.looks, self.alpha = delta0, side, looks, alpha
        _, _, self._bound = _oriented(0, 0, delta0, side)
        # the exact test at the cap keeps FINAL_SHARE of α when there are earlier looks
        self.final_alpha = FINAL_SHARE * alpha if len(looks.points) > 1 else alpha
        self.final_region = fixed_region(looks.cap, self._bound, self.final_alpha)
        self._shapes = [monotone(mixture_log_e(n, self._bound)) for n in looks.points[:-1]]
        self.threshold, self.size = self._calibrate()
        self._looks = [
            _Look(n, shape, shape >= self.threshold) for n, shape in zip(looks.points, self._shapes)
        ]

    def _absorbed(self, threshold: float) -> Absorbed:
        """(n, b, c, log mass) of the cells where paths are absorbed — the early regions
        {shape ≥ threshold} and the final region — with log mass the log of the number of paths
        that reach the cell without being absorbed earlier (a DP over (b, c), item by item)."""
        cap = self.looks.cap
        state = np.zeros((cap + 1, cap + 1))
        state[0, 0] = 1.0  # path counts × 3^−k: every step +1 / 0 / −1 at 1/3 each
        cells: Absorbed = []
        done = 0
        for n, shape in zip(self.looks.points, [*self._shapes, None]):
            for k in range(done + 1, n + 1):  # (b, c) → (b + 1, c), (b, c), (b, c + 1)
                new = state[: k + 1, : k + 1] / 3.0
                new[1:, :k] += state[:k, :k] / 3.0
                new[:k, 1:] += state[:k, :k] / 3.0
                state[: k + 1, : k + 1] = new
            done = n
            area = state[: n + 1, : n + 1]
            region = self.final_region if shape is None else shape >= threshold
            hit = region & (area > 0)
            b, c = np.nonzero(hit)
            cells.append((n, b, c, np.log(area[hit]) + n * np.log(3.0)))
            area[hit] = 0.0
        return cells

    def total_size(self, threshold: float, nuisance: FloatArray | None = None) -> float:
        """Exact P(enter an early region {shape ≥ threshold} at a look point, or the final
        region at the cap) at δ = δ0, maximised over the discordances ``nuisance`` (None: the
        grid, refined — :func:`sup_over_nuisance`)."""
        cells = self._absorbed(threshold)

        def curve(s: FloatArray) -> FloatArray:
            total = np.zeros(s.size)
            for n, b, c, log_mass in cells:
                total += np.exp(_log_weights(n, b, c, self._bound, s) + log_mass).sum(axis=1)
            return total

        if nuisance is not None:
            return float(curve(nuisance).max())
        return sup_over_nuisance(self._bound, curve)

    def _calibrate(self) -> tuple[float, float]:
        """The smallest early threshold whose exact total size is ≤ α: bisection over the
        shapes' distinct values (+inf: no early region) on the nuisance grid, then the refined
        sup checked and the threshold raised while it exceeds α."""
        finite = [s[np.isfinite(s)] for s in self._shapes]
        candidates = np.r_[np.unique(np.concatenate([*finite, np.zeros(0)])), np.inf]
        grid = nuisance_grid(self._bound)
        lo, hi = 0, candidates.size - 1  # +inf leaves the fixed-N region alone: size ≤ α
        while lo < hi:
            mid = (lo + hi) // 2
            if self.total_size(float(candidates[mid]), grid) <= self.alpha:
                hi = mid
            else:
                lo = mid + 1
        while True:
            size = self.total_size(float(candidates[hi]))
            if size <= self.alpha or hi == candidates.size - 1:
                return float(candidates[hi]), size
            hi += 1

    def evidence(self, d: np.ndarray, final: bool) -> Evidence:
        """The design's verdict after the first n = len(d) values: an early look (n a look
        point before the cap) or, with ``final``, the fixed-N region at the cap."""
        n = len(d)
        b, c, _ = _oriented(*counts(d), self.delta0, self.side)
        if final or n == self.looks.cap:
            if n != self.looks.cap:
                raise ValueError(
                    f"PairedDesign: the final look is at the cap {self.looks.cap}, not {n}"
                )
            p = _refined_p(n, self._bound, b, c)
            rejected = bool(self.final_region[b, c])
            return Evidence(
                "exact paired (group-sequential)",
                self.side,
                rejected,
                "p",
                p,
                self.final_alpha,
                n,
                rejected,
            )
        look = next((k for k, x in enumerate(self._looks) if x.n == n), None)
        if look is None:
            raise ValueError(f"PairedDesign: {n} values is not a look point {self.looks.points}")
        shape = self._looks[look].shape
        rejected = bool(self._looks[look].region[b, c])
        return Evidence(
            "exact paired (group-sequential)",
            self.side,
            rejected,
            "e",
            float(np.exp(shape[b, c])),
            float(np.exp(self.threshold)),
            n,
            rejected or self._reachable(look, b, c),
        )

    def rejects_after(self, paths: npt.ArrayLike, n: int) -> npt.NDArray[np.bool_]:
        """Per row of ``paths`` (completed paired differences, shape (rows, cap)): whether the
        design rejects at a look point after ``n`` (region lookups, no p-value: the futility
        rule's simulated completions, flipgate.metrics.futility)."""
        d = np.asarray(paths)
        up, down = np.cumsum(d == 1, axis=1), np.cumsum(d == -1, axis=1)
        b_all, c_all = (up, down) if self.side == "above" else (down, up)
        out = np.zeros(d.shape[0], dtype=bool)
        for look in self._looks:
            if look.n > n:
                out |= look.region[b_all[:, look.n - 1], c_all[:, look.n - 1]]
        cap = self.looks.cap
        out |= self.final_region[b_all[:, cap - 1], c_all[:, cap - 1]]
        return out

    def _reachable(self, look: int, b: int, c: int) -> bool:
        """Whether a path from (b, c) at look ``look`` that goes all +1 enters a later region
        (regions are monotone, so no other continuation does better)."""
        n = self._looks[look].n
        for later in self._looks[look + 1 :]:
            if later.region[b + later.n - n, c]:
                return True
        return bool(self.final_region[b + self.looks.cap - n, c])


@lru_cache(maxsize=128)
def paired_design(delta0: float, side: Side, looks: Looks, alpha: float) -> PairedDesign:
    """The cached :class:`PairedDesign` for (δ0, side, looks, α)."""
    return PairedDesign(delta0, side, looks, alpha)
