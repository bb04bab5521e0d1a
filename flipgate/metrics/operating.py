"""The shipped gate decision (:func:`flipgate.metrics.threshold_tests.decide_mean`) simulated over
many replications at once, for its operating characteristics (docs/definitions.md §12.7).

:func:`simulate_gate` takes per-item values of many simulated cells, shape
``(replications, cap)`` in drawn order, and decides each one exactly as a sequential cell does
(flipgate.gate.sequential.run_sequential calling ``decide_mean`` after every look): the same two
one-sided tests (violation → fail, conformance → pass), each at α, the first look at which one of
them rejects decides, and at one look a violation wins. It reads the tests' rejection regions
instead of calling them per replication:

- binary values: the group-sequential binomial design's early region over S_n at every look
  before the cap and its final (fixed-N) region at the cap
  (:func:`flipgate.metrics.binary_tests.binary_design`); fixed N: the exact binomial region at n;
- paired differences in {−1, 0, 1}: the paired design's early regions {monotone mixture
  log e-value ≥ threshold} over (b, c) and its final region (:mod:`flipgate.metrics.paired_exact`);
  fixed N: the exact unconditional region at n;
- bounded values: the betting e-process (:func:`flipgate.metrics.betting.log_e_process`) of every
  replication at once; it rejects at the first item where it reaches 1/α and decides at the first
  look point at or after it.

Unscored items (NaN) are left out of a binary test (each look at the largest look point the scored
count has reached) and enter the other tests as the value least favourable to them, as in
``decide_mean``.
Besides the decision it reports where the cell would stop when futility also stops it (both tests
unable to reject by the cap however the remaining items go, §12.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.stats import beta as beta_distribution

from flipgate.metrics import binary_tests, paired_exact
from flipgate.metrics.betting import best_growth, log_e_process
from flipgate.metrics.futility import FUTILITY_CHANCE, binary_chance_table
from flipgate.metrics.onesided import Looks, Side, sides
from flipgate.metrics.sequential import ItemValues, ValueKind
from flipgate.metrics.threshold_tests import decide_mean

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: a replication's verdict: pass, undecided, fail
PASS, UNDECIDED, FAIL = -1, 0, 1
#: simulated per-item values: ``draw(rng, replications, n)`` -> an array (replications, n), as
#: flipgate.gate.sequential.bernoulli_items / paired_items
Draw = Callable[[np.random.Generator, int, int], FloatArray]


@dataclass(frozen=True)
class OperatingResult:
    """How each simulated cell came out."""

    #: per replication: −1 pass, +1 fail, 0 undecided
    decision: npt.NDArray[np.int8]
    #: per replication: items drawn — the deciding look, else the cap
    items: IntArray
    #: per replication: items drawn when a cell also stops once both tests are futile (the look
    #: at which neither can reject by the cap any more), as
    #: flipgate.gate.sequential.run_sequential does
    stopped: IntArray
    cap: int

    @property
    def replications(self) -> int:
        return int(self.decision.size)

    @property
    def fail_share(self) -> float:
        return float(np.mean(self.decision == FAIL))

    @property
    def pass_share(self) -> float:
        return float(np.mean(self.decision == PASS))

    @property
    def decided_share(self) -> float:
        return float(np.mean(self.decision != UNDECIDED))


@dataclass(frozen=True)
class _SideScan:
    """One one-sided test over every replication: the look point (items) at which it first
    rejects (0: never), and per look whether it is still unrejected and cannot reject any more."""

    reject_at: IntArray
    #: shape (replications, looks)
    dead: BoolArray
    #: shape (replications, looks): the predictive probability that it rejects at a later look
    #: (flipgate.metrics.futility; binary designs only: 1 where it is not computed, 0 where dead)
    chance: FloatArray | None = None


def _impute(values: FloatArray, side: Side, low: float, high: float) -> FloatArray:
    out: FloatArray = np.where(np.isnan(values), low if side == "above" else high, values)
    return out


def _first_true(hit: BoolArray, points: IntArray) -> IntArray:
    """Per row, the look point of the first True column (0 if none)."""
    any_hit = hit.any(axis=1)
    first = np.argmax(hit, axis=1)
    out: IntArray = np.where(any_hit, points[first], 0).astype(np.int64)
    return out


def _scan_regions(
    stat: list[IntArray | tuple[IntArray, IntArray]],
    regions: list[BoolArray],
    reachable: list[BoolArray],
    points: tuple[int, ...],
) -> _SideScan:
    """A test given by a rejection region per look over a statistic (S, or (b, c)), and a
    table per look of the cells from which a later region can still be entered."""
    hits, alive = [], []
    for s, region, reach in zip(stat, regions, reachable):
        hits.append(region[s])
        alive.append(reach[s])
    hit = np.stack(hits, axis=1)
    reach_now = np.stack(alive, axis=1)
    rejected_so_far = np.logical_or.accumulate(hit, axis=1)
    return _SideScan(_first_true(hit, np.asarray(points)), ~rejected_so_far & ~reach_now)


def _binary_side(
    raw: FloatArray, bound: float, side: Side, alpha: float, looks: Looks | None
) -> _SideScan:
    """The binary test of one side on the scored values (decide_mean's ``_scored_scan``): at
    each look the largest look point p at or below the scored count so far, once per p, on the
    first p scored values (without unscored items: every look, as before), and at the cap, with
    fewer scored values than the cap, a last look on all of them (``last_look_region``)."""
    cap = raw.shape[1]
    if looks is None:  # rows with a gap are decided one by one (simulate_gate)
        x = _impute(raw, side, 0.0, 1.0)
        region = binary_tests.fixed_region(cap, bound, side, alpha)
        s_cap = x.sum(axis=1).round().astype(np.int64)
        return _scan_regions([s_cap], [region], [region], (cap,))
    points = looks.points
    design = binary_tests.binary_design(bound, side, looks, alpha)
    regions = {n: design.region(n) for n in points}
    tables = binary_chance_table(design) if 0.0 < bound < 1.0 else {}
    scored = ~np.isnan(raw)
    rank = np.cumsum(scored, axis=1)
    ones = np.cumsum(np.where(scored, raw, 0.0), axis=1).round().astype(np.int64)
    # ones among the first k scored values, k = 0..cap
    by_rank = np.zeros((raw.shape[0], cap + 1), dtype=np.int64)
    rows, cols = np.nonzero(scored)
    by_rank[rows, rank[rows, cols]] = ones[rows, cols]
    grid = np.asarray(points)
    reps = raw.shape[0]
    hit = np.zeros((reps, len(points)), dtype=bool)
    dead = np.zeros((reps, len(points)), dtype=bool)
    chance = np.ones((reps, len(points)))
    before = np.zeros(reps, dtype=np.int64)
    tested = np.zeros((reps, len(points)), dtype=bool)  # which look points each row tested
    optimistic = {n: binary_tests.fixed_region(n, bound, side, alpha) for n in range(1, cap)}
    for j, d in enumerate(points):
        count = rank[:, d - 1]
        where = np.searchsorted(grid, count, side="right") - 1
        point = np.where(where >= 0, grid[np.maximum(where, 0)], 0)
        ones_now = by_rank[np.arange(reps), point]
        for p in np.unique(point[point > 0]):
            at = point == p
            hit[at, j] = regions[p][ones_now[at]] & (p != before[at])
            if p in tables:
                chance[at, j] = tables[p][ones_now[at]]
        # reachable through the look points the scored values can still reach by the cap
        most = count + (cap - d)
        alive = np.zeros(reps, dtype=bool)
        for q in points:
            ahead = (q > point) & (q <= most)
            best = ones_now + (q - point) if side == "above" else ones_now
            alive |= ahead & regions[q][np.clip(best, 0, q)]
        # the cap's last look on fewer scored values than the cap
        short = (most < cap) & (most > point)
        for q in np.unique(most[short]):
            at = short & (most == q)
            best = ones_now[at] + (q - point[at]) if side == "above" else ones_now[at]
            alive[at] |= optimistic[int(q)][np.clip(best, 0, q)]
        dead[:, j] = ~alive
        tested[np.arange(reps), np.maximum(where, 0)] |= where >= 0
        before = np.where(point > 0, point, before)
    # the cap's look for the rows short of scored values: every scored value, at the level the
    # looks each row made leave (and nothing after it)
    count = rank[:, cap - 1]
    last = len(points) - 1
    short = (count > 0) & (count < cap)
    keys: dict[tuple[tuple[int, ...], int], list[int]] = {}
    for row in np.flatnonzero(short).tolist():
        keys.setdefault((tuple(grid[tested[row]].tolist()), int(count[row])), []).append(row)
    for (made, n), members in keys.items():
        region = binary_tests.last_look_region(design, made, n)
        idx = np.asarray(members, dtype=np.int64)
        final = region[by_rank[idx, n]]
        hit[idx, last] |= final
        dead[idx, last] = ~final
    rejected_so_far = np.logical_or.accumulate(hit, axis=1)
    dead &= ~rejected_so_far
    return _SideScan(
        _first_true(hit, grid), dead, np.where(dead, 0.0, np.where(rejected_so_far, 1.0, chance))
    )


def _paired_side(
    x: FloatArray, bound: float, side: Side, alpha: float, looks: Looks | None
) -> _SideScan:
    """Side ``above`` on the counts (b, c) = (#+1, #−1); side ``below`` is side above for −d
    (b and c swap, δ0 changes sign), as in paired_exact."""
    ups, downs = (x == 1.0), (x == -1.0)
    if side == "below":
        ups, downs = downs, ups
    oriented = bound if side == "above" else -bound
    cap = x.shape[1]
    if looks is None:
        region = paired_exact.fixed_region(cap, oriented, alpha)
        stat_fixed = (ups.sum(axis=1), downs.sum(axis=1))
        return _scan_regions([stat_fixed], [region], [region], (cap,))
    design = paired_exact.paired_design(bound, side, looks, alpha)
    points = looks.points
    b_total, c_total = np.cumsum(ups, axis=1), np.cumsum(downs, axis=1)
    stat: list[IntArray | tuple[IntArray, IntArray]] = [
        (b_total[:, n - 1], c_total[:, n - 1]) for n in points
    ]
    regions = [
        paired_exact.monotone(paired_exact.mixture_log_e(n, oriented)) >= design.threshold
        for n in points[:-1]
    ] + [np.asarray(design.final_region)]
    reachable = []
    for j, n in enumerate(points):
        if j == len(points) - 1:
            reachable.append(regions[j])
            continue
        b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
        reach = regions[j].copy()
        for later, region in zip(points[j + 1 :], regions[j + 1 :]):
            reach |= region[b + (later - n), c]  # the all-+1 continuation (regions are monotone)
        reachable.append(reach)
    return _scan_regions(stat, regions, reachable, points)


def _bounded_side(
    u: FloatArray, m: float, side: Side, alpha: float, looks: Looks | None
) -> _SideScan:
    """The betting e-process: it rejects once it reaches 1/α at any item (flipgate.metrics.betting
    .betting_test); a rejection by item t is seen at the first look point ≥ t."""
    cap = u.shape[1]
    points = np.asarray(looks.points if looks is not None else (cap,))
    critical = math.log(1.0 / alpha)
    if 0.0 < m < 1.0:
        log_e = log_e_process(u, m, side)
        crossed = log_e >= critical
        left = np.maximum(cap - points, 0) * math.log(best_growth(m, side))
        reach_now = log_e[:, points - 1] + left >= critical
    else:  # the bound at an edge of [0, 1]: any value beyond it refutes "mean ≤ 0" (or ≥ 1)
        refutable = (side == "above" and m <= 0.0) or (side == "below" and m >= 1.0)
        beyond = (u > m) if side == "above" else (u < m)
        crossed = np.logical_or.accumulate(beyond, axis=1) & refutable
        reach_now = np.full((u.shape[0], points.size), refutable)
    rejected_by = np.logical_or.accumulate(crossed, axis=1)[:, points - 1]
    return _SideScan(_first_true(rejected_by, points), ~rejected_by & ~reach_now)


def _side(
    values: FloatArray,
    kind: ValueKind,
    low: float,
    high: float,
    bound: float,
    side: Side,
    alpha: float,
    looks: Looks | None,
) -> _SideScan:
    if kind == "binary":  # the unscored items are left out, not imputed
        return _binary_side(values, bound, side, alpha, looks)
    x = _impute(values, side, low, high)
    if kind == "paired":
        return _paired_side(x, bound, side, alpha, looks)
    span = high - low
    return _bounded_side((x - low) / span, (bound - low) / span, side, alpha, looks)


def simulate_gate(
    values: npt.ArrayLike,
    kind: ValueKind,
    low: float,
    high: float,
    bound: float,
    direction: Literal["max", "min"],
    alpha: float,
    looks: Looks | None,
) -> OperatingResult:
    """Decide ``metric <= bound`` (``max``) or ``>= bound`` (``min``) on every row of ``values``
    (shape ``(replications, cap)``, per-item values in [low, high] in drawn order) as
    ``decide_mean`` does, with ``looks`` (its cap must be the number of columns) or, with None, a
    fixed-N run on all columns (docs/definitions.md §12.1–12.3)."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"simulate_gate: values must be (replications, cap), not {x.shape}")
    cap = int(x.shape[1])
    if looks is not None and looks.cap != cap:
        raise ValueError(f"simulate_gate: looks.cap {looks.cap} != the values' {cap} columns")
    violation_side, conformance_side = sides(direction)
    violation = _side(x, kind, low, high, bound, violation_side, alpha, looks)
    conformance = _side(x, kind, low, high, bound, conformance_side, alpha, looks)
    fail_at, pass_at = violation.reject_at, conformance.reject_at
    fails = (fail_at > 0) & ((pass_at == 0) | (fail_at <= pass_at))
    passes = ~fails & (pass_at > 0)
    decision = np.where(fails, FAIL, np.where(passes, PASS, UNDECIDED)).astype(np.int8)
    items = np.where(fails, fail_at, np.where(passes, pass_at, cap)).astype(np.int64)
    points = np.asarray(looks.points if looks is not None else (cap,))
    futile = violation.dead & conformance.dead
    if violation.chance is not None and conformance.chance is not None:
        # the predictive futility rule: both tests unlikely to reject by the cap
        futile |= violation.chance + conformance.chance < FUTILITY_CHANCE
    futile_at = np.where(futile.any(axis=1), points[np.argmax(futile, axis=1)], cap)
    stopped = np.minimum(items, futile_at).astype(np.int64)
    # a cell stopped for futility before its decision look is undecided (the shipped rule)
    decision = np.where(items <= futile_at, decision, UNDECIDED).astype(np.int8)
    items = np.where(items <= futile_at, items, cap).astype(np.int64)
    if looks is None:  # a fixed-N test is on the scored items: rows with a gap, one by one
        for row in np.flatnonzero(np.isnan(x).any(axis=1)):
            decided = decide_mean(
                ItemValues.of(x[row], low, high, kind), bound, direction, alpha
            ).decision
            decision[row] = {"fail": FAIL, "pass": PASS, None: UNDECIDED}[decided]
    return OperatingResult(decision, items, stopped, cap)


def beta_items(mean: float, concentration: float = 4.0) -> Draw:
    """Cells whose per-item value in [0, 1] is Beta(κ·mean, κ·(1 − mean)), κ = ``concentration``
    (a bounded continuous value such as a per-item disagreement)."""

    def draw(rng: np.random.Generator, replications: int, n: int) -> FloatArray:
        a, b = concentration * mean, concentration * (1.0 - mean)
        values: FloatArray = rng.beta(a, b, size=(replications, n))
        return values

    return draw


def bernoulli_llr(x: FloatArray, p: float, p0: float) -> FloatArray:
    """Per item, log [P_p(x) / P_p0(x)] of binary values ``x``."""
    with np.errstate(divide="ignore"):
        ones = np.log(p) - np.log(p0) if p > 0 else -np.inf
        zeros = np.log1p(-p) - np.log1p(-p0) if p < 1 else -np.inf
    out: FloatArray = np.where(x == 1.0, ones, zeros)
    return out


def trinomial_llr(
    x: FloatArray, truth: tuple[float, float], null: tuple[float, float]
) -> FloatArray:
    """Per item, the log likelihood ratio of paired differences ``x`` in {−1, 0, 1} under
    (P(+1), P(−1)) = ``truth`` against ``null``."""

    def log_p(p_plus: float, p_minus: float) -> tuple[float, float, float]:
        with np.errstate(divide="ignore"):
            return (
                float(np.log(p_plus)),
                float(np.log(p_minus)),
                float(np.log(1.0 - p_plus - p_minus)),
            )

    up1, down1, zero1 = log_p(*truth)
    up0, down0, zero0 = log_p(*null)
    with np.errstate(invalid="ignore"):
        out: FloatArray = np.where(
            x == 1.0, up1 - up0, np.where(x == -1.0, down1 - down0, zero1 - zero0)
        )
    return out


def nearest_paired_null(worse: float, better: float, delta0: float) -> tuple[float, float]:
    """(P(+1), P(−1)) on the null boundary δ = δ0 with the truth's discordance P(+1) + P(−1)
    (at least |δ0|, the least a boundary point has)."""
    discordance = max(worse + better, abs(delta0))
    return (discordance + delta0) / 2, (discordance - delta0) / 2


def beta_llr(x: FloatArray, mean: float, mean0: float, concentration: float = 4.0) -> FloatArray:
    """Per item, log [Beta(κ·mean, κ(1 − mean)) / Beta(κ·mean0, κ(1 − mean0))] densities."""
    u = np.clip(x, 1e-300, 1.0 - 1e-16)
    k = concentration
    out: FloatArray = beta_distribution.logpdf(
        u, k * mean, k * (1 - mean)
    ) - beta_distribution.logpdf(u, k * mean0, k * (1 - mean0))
    return out


def sprt_oracle(
    llr: FloatArray, looks: Looks, truth_violates: bool, alpha: float, beta: float
) -> OperatingResult:
    """Wald's SPRT of the truth's distribution (H1) against the nearest null at the bound (H0),
    from per-item log likelihood ratios ``llr`` (replications, cap), looking on ``looks`` and
    truncated at its cap: it accepts H1 once the summed ratio reaches log((1 − β)/α) and H0 once
    it falls to log(β/(1 − α)). Accepting H1 is the truth's verdict (fail when the truth violates
    the bound, else pass); accepting H0 the other one. The oracle knows the truth: its mean items
    are the limit a test of the bound can approach (docs/definitions.md §12.7)."""
    points = np.asarray(looks.points)
    with np.errstate(invalid="ignore"):
        total = np.cumsum(llr, axis=1)[:, points - 1]
    upper = total >= math.log((1.0 - beta) / alpha)
    lower = total <= math.log(beta / (1.0 - alpha))
    up_at, down_at = _first_true(upper, points), _first_true(lower, points)
    to_h1 = (up_at > 0) & ((down_at == 0) | (up_at < down_at))
    to_h0 = ~to_h1 & (down_at > 0)
    truth_verdict = FAIL if truth_violates else PASS
    decision = np.where(to_h1, truth_verdict, np.where(to_h0, -truth_verdict, UNDECIDED))
    items = np.where(to_h1, up_at, np.where(to_h0, down_at, looks.cap)).astype(np.int64)
    return OperatingResult(decision.astype(np.int8), items, items, looks.cap)
