"""Exact one-sided tests for a rate of binary per-item values (an item flips, parses, is right):
the fixed-N binomial test and its group-sequential extension (docs/definitions.md §12.2).

**Fixed N** (``sequential: false``, ``flipgate compare`` of fixed runs, and every cap): the exact
binomial test at the full α. Side ``above`` (null: rate ≤ m) rejects when P[Bin(N, m) ≥ S] ≤ α,
side ``below`` when P[Bin(N, m) ≤ S] ≤ α; S = the number of ones.

**Group-sequential** (a cell that looks after every batch): at the cap the region is the fixed-N
region at :data:`~flipgate.metrics.onesided.FINAL_SHARE` · α, so the test rejects wherever that
test would. At each earlier look point n it also rejects when the fixed-bet
mixture e-process (flipgate.metrics.betting, a function of (n, S_n) for binary values) reaches a
critical value e*; e* is the smallest value whose *exact* total error — the probability, at rate
m, of crossing an early boundary at some look point or landing in the final region — is at most
α, computed by dynamic programming over S_n. The e-process is used as the shape of the boundary,
not with Ville's bound, so no α is left unspent: the α the final test does not keep, the
discreteness slack of the fixed-N test and the paths both regions reject pay for the early
stops. The null is composite (rate ≤ m); every
region is monotone in S, so the error is largest at rate = m.

**Last look short of the cap** (a cell at its cap with s < cap scored values, the rest unscored):
:func:`last_look_region` — the largest tail of S_s whose exact total error, the early boundaries
at the look points actually tested included, is at most α.

Measured (benchmarks/gate_operating_characteristics.py): a control that never flips proves
``flip_rate <= 0.05`` at cap 200 after 72 items (Wald's SPRT: 59; 64 on the batch grid).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt
from scipy.stats import binom

from flipgate.metrics.betting import FIXED_FRACTIONS, max_bet
from flipgate.metrics.onesided import FINAL_SHARE, Evidence, Looks, Side

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]

FIXED = "exact binomial"
SEQUENTIAL = "group-sequential binomial"
#: the early boundaries' bets: the fixed-bet mixture plus the all-in bet (the SPRT against a rate
#: of 0 or 1, harmless for binary values)
SHAPE_FRACTIONS = (*FIXED_FRACTIONS, 1.0)


def binomial_p_value(s: int, n: int, m: float, side: Side) -> float:
    """The exact one-sided p-value of ``s`` ones in ``n`` binary values against rate ``m``."""
    if side == "above":
        return float(binom.sf(s - 1, n, m))
    return float(binom.cdf(s, n, m))


def fixed_region(n: int, m: float, side: Side, alpha: float) -> BoolArray:
    """Over S = 0..n: whether the fixed-N exact binomial test rejects at level ``alpha``."""
    s = np.arange(n + 1)
    p = binom.sf(s - 1, n, m) if side == "above" else binom.cdf(s, n, m)
    out: BoolArray = p <= alpha
    return out


def shape_log_e(n: int, s: npt.ArrayLike, m: float, side: Side) -> FloatArray:
    """log of the mixture of fixed bets (:data:`SHAPE_FRACTIONS`) after ``s`` ones in ``n``
    binary values: Π over values of (1 ± λ(u − m)) depends on (n, S) only."""
    ones = np.asarray(s, dtype=float)[..., None]
    lams = np.asarray(SHAPE_FRACTIONS) * max_bet(m, side)
    up, down = (1.0 - m, -m) if side == "above" else (-(1.0 - m), m)
    zeros = n - ones
    with np.errstate(divide="ignore", invalid="ignore"):
        per_one, per_zero = np.log1p(lams * up), np.log1p(lams * down)
        # a bet that loses everything on a value kills its term only where such a value occurred
        log_k = np.where(ones > 0, ones * per_one, 0.0) + np.where(zeros > 0, zeros * per_zero, 0.0)
    peak = np.max(log_k, axis=-1, keepdims=True)
    safe = np.where(np.isfinite(peak), peak, 0.0)
    out: FloatArray = np.log(np.exp(log_k - safe).mean(axis=-1)) + safe[..., 0]
    return np.where(np.isfinite(peak[..., 0]), out, -np.inf)


def _step(dist: FloatArray, m: float) -> FloatArray:
    """The distribution of S after one more value with P(1) = m."""
    out: FloatArray = dist * (1.0 - m)
    out[1:] += dist[:-1] * m
    return out


@dataclass(frozen=True)
class BinaryDesign:
    """A calibrated group-sequential test of one side; build with :func:`binary_design`."""

    m: float
    side: Side
    looks: Looks
    alpha: float
    #: the early boundaries' critical log e-value (inf: no early stops)
    log_critical: float
    #: the final region over S = 0..cap
    final: tuple[bool, ...]
    #: the exact error at rate m (≤ alpha)
    size: float
    #: the level of the exact test at the cap (:data:`FINAL_SHARE` · α with early looks)
    final_alpha: float

    def region(self, point: int) -> BoolArray:
        """Over S = 0..point: where the design rejects at look ``point`` — its final region at
        the cap, the early boundary before it (a bound at an edge of [0, 1]: the fixed-N test at
        every look, as :meth:`evidence`)."""
        if point == self.looks.cap:
            return np.asarray(self.final, dtype=bool)
        if not 0.0 < self.m < 1.0:
            return fixed_region(point, self.m, self.side, self.alpha)
        return self.early_region(point)

    def early_region(self, n: int) -> BoolArray:
        s = np.arange(n + 1)
        out: BoolArray = shape_log_e(n, s, self.m, self.side) >= self.log_critical
        return out

    def evidence(self, x: npt.ArrayLike, final: bool) -> Evidence:
        """The test after the binary values ``x`` (drawn order); ``final``: this is the cap's
        look (the fixed-N region decides), else an early look (the e-process boundary)."""
        values = np.asarray(x, dtype=float)
        n, s = int(values.size), int(values.sum())
        if final or not 0.0 < self.m < 1.0:
            level = self.final_alpha if final else self.alpha
            return binary_fixed_test(values, self.m, self.side, level)
        log_e = float(shape_log_e(n, s, self.m, self.side))
        rejected = log_e >= self.log_critical
        return Evidence(
            SEQUENTIAL,
            self.side,
            bool(rejected),
            "e",
            math.exp(min(log_e, 700.0)),
            math.exp(min(self.log_critical, 700.0)),
            n,
            bool(rejected) or self.reachable(n, s),
        )

    def reachable(self, n: int, s: int) -> bool:
        """Whether some continuation of ``s`` ones in ``n`` values can still enter a region at a
        later look point or at the cap (the most favourable continuation: all ones for side
        ``above``, all zeros for ``below``)."""
        for point in (p for p in self.looks.points if p > n):
            best = s + (point - n) if self.side == "above" else s
            region = self.final if point == self.looks.cap else self.early_region(point)
            if region[best]:
                return True
        return False


def _early_paths(
    m: float, side: Side, log_critical: float, points: Iterable[int], n: int
) -> tuple[float, FloatArray]:
    """At rate m, the probability of crossing the early boundary (``log_critical``) at one of
    ``points`` (ascending, each ≤ ``n``), and the law of S_n over the paths that did not."""
    dist = np.zeros(n + 1)
    dist[0] = 1.0
    absorbed, done = 0.0, 0
    s = np.arange(n + 1)
    for point in points:
        for _ in range(point - done):
            dist = _step(dist, m)
        done = point
        early = (shape_log_e(point, s, m, side) >= log_critical) & (s <= point)
        absorbed += float(dist[early].sum())
        dist = np.where(early, 0.0, dist)
    for _ in range(n - done):
        dist = _step(dist, m)
    return absorbed, dist


def _size(m: float, looks: Looks, log_critical: float, final: BoolArray, side: Side) -> float:
    """The exact probability, at rate m, of crossing an early boundary or ending in ``final``."""
    absorbed, dist = _early_paths(m, side, log_critical, looks.points[:-1], looks.cap)
    return absorbed + float(dist[final].sum())


@cache
def binary_design(m: float, side: Side, looks: Looks, alpha: float) -> BinaryDesign:
    """The group-sequential binary test of one side on ``looks`` at level ``alpha``: the final
    region is the fixed-N region at the cap at :data:`FINAL_SHARE` · α (all of α without an
    earlier look point), and the early boundary is the lowest whose exact total error stays
    within ``alpha`` (bisection on the log critical value)."""
    early = len(looks.points) > 1 and 0.0 < m < 1.0
    final_alpha = FINAL_SHARE * alpha if early else alpha
    final = fixed_region(looks.cap, m, side, final_alpha)
    regions = tuple(map(bool, final))
    if not early:
        size = _size(m, looks, math.inf, final, side) if 0.0 < m < 1.0 else 0.0
        return BinaryDesign(m, side, looks, alpha, math.inf, regions, size, final_alpha)
    low, high = 0.0, 60.0  # log critical values: high keeps every early region empty
    for _ in range(50):
        mid = (low + high) / 2
        if _size(m, looks, mid, final, side) <= alpha:
            high = mid
        else:
            low = mid
    size = _size(m, looks, high, final, side)
    return BinaryDesign(m, side, looks, alpha, high, regions, size, final_alpha)


@cache
def last_look_region(design: BinaryDesign, tested: tuple[int, ...], n: int) -> BoolArray:
    """Over S = 0..n: where a last look at ``n`` values rejects, after early looks at the look
    points ``tested`` (ascending, each below the cap, with the design's early boundary): the
    largest region of the fixed-N test's shape whose exact total error at rate m, those looks
    included, is at most α. This is the cap's look of a cell whose scored values fell short of
    the cap (unscored items): which look points were tested and n depend on the scored count
    alone, so the test keeps its level. With no earlier look it is the fixed-N region at the
    full α; it is never larger than that region (its own probability is at most α)."""
    m, side, alpha = design.m, design.side, design.alpha
    if not 0.0 < m < 1.0 or not tested:
        return fixed_region(n, m, side, alpha)
    absorbed, dist = _early_paths(m, side, design.log_critical, tested, n)
    # the region is a tail: S >= c (side above) or S <= c (below); grow it while the total holds
    tail = np.cumsum(dist[::-1])[::-1] if side == "above" else np.cumsum(dist)
    out: BoolArray = absorbed + tail <= alpha * (1.0 + 1e-12)
    return out


def last_look_test(design: BinaryDesign, tested: Iterable[int], x: npt.ArrayLike) -> Evidence:
    """The test at a cell's last look on ``x``, fewer values than the cap (every one it could
    score), after early looks at the look points ``tested`` (any order;
    :func:`last_look_region`): the exact binomial p-value against the region's level, the
    largest p-value it rejects."""
    values = np.asarray(x, dtype=float)
    n, ones = int(values.size), int(values.sum())
    region = last_look_region(design, tuple(sorted(tested)), n)
    inside = np.flatnonzero(region)
    if inside.size == 0:
        level = 0.0
    else:  # the region's edge: its smallest S (side above) or largest (below)
        edge = int(inside[0] if design.side == "above" else inside[-1])
        level = binomial_p_value(edge, n, design.m, design.side)
    p = binomial_p_value(ones, n, design.m, design.side)
    rejected = bool(region[ones])
    return Evidence(FIXED, design.side, rejected, "p", p, level, n, rejected)


def binary_fixed_test(x: npt.ArrayLike, m: float, side: Side, alpha: float) -> Evidence:
    """The fixed-N exact binomial test of one side on the binary values ``x``."""
    values = np.asarray(x, dtype=float)
    n, s = int(values.size), int(values.sum())
    p = binomial_p_value(s, n, m, side)
    return Evidence(FIXED, side, p <= alpha, "p", p, alpha, n, p <= alpha)
