"""Exact one-sided tests for paired differences in {−1, 0, +1} (docs/definitions.md §11, §12):
sizes by exact enumeration, power and peeking by simulation with known truth."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from scipy.special import gammaln, xlogy
from scipy.stats import binomtest, multinomial

from flipgate.metrics.onesided import Looks, Side
from flipgate.metrics.paired_exact import (
    PairedDesign,
    fixed_region,
    monotone,
    paired_design,
    paired_fixed_test,
    score_statistic,
)

ALPHA = 0.05


def items(b: int, c: int, n: int) -> np.ndarray:
    return np.array([1] * b + [-1] * c + [0] * (n - b - c))


def region_probability(region: np.ndarray, n: int, p_plus: float, p_minus: float) -> float:
    """P((b, c) ∈ region) under the trinomial, enumerated with scipy (independent of the module)."""
    b, c = np.nonzero(region)
    x = np.stack([b, c, n - b - c], axis=1)
    return float(multinomial.pmf(x, n, [p_plus, p_minus, 1 - p_plus - p_minus]).sum())


def oriented_region(n: int, delta0: float, side: Side) -> np.ndarray:
    """The fixed-N region in (b, c) coordinates of the side asked."""
    if side == "above":
        return fixed_region(n, delta0, ALPHA)
    return fixed_region(n, -delta0, ALPHA).T


def simulate(
    rng: np.random.Generator, p_plus: float, p_minus: float, reps: int, n: int
) -> np.ndarray:
    u = rng.random((reps, n))
    return np.where(u < p_plus, 1, np.where(u < p_plus + p_minus, -1, 0))


def test_score_statistic_matches_hand_values() -> None:
    # (6, 0) of 25 at δ0 = 0.05: B = 6·1.05 − 2.5 = 3.8, q̃ = 3.8/50 = 0.076,
    # Z = (6 − 1.25)/sqrt(25 (0.152 + 0.05 − 0.0025)) = 2.1266
    assert score_statistic(25, 0.05)[6, 0] == pytest.approx(4.75 / math.sqrt(25 * 0.1995))
    # δ0 = 0: q̃ = (b + c)/(2n), Z = (b − c)/sqrt(b + c), McNemar's score
    assert score_statistic(40, 0.0)[12, 3] == pytest.approx(9 / math.sqrt(15))
    assert np.isneginf(score_statistic(10, 0.0)[6, 5])


def test_monotone_statistic_is_closed_under_improving_moves() -> None:
    level = monotone(score_statistic(30, -0.05))
    inside = np.isfinite(level)
    raw = score_statistic(30, -0.05)
    assert (level[inside] >= raw[inside]).all()
    b, c = np.nonzero(inside)
    for bb, cc in zip(b, c):
        if cc > 0:
            assert level[bb, cc - 1] >= level[bb, cc]
        if bb + cc < 30:
            assert level[bb + 1, cc] >= level[bb, cc]


@pytest.mark.parametrize("n", [10, 25, 60])
@pytest.mark.parametrize("delta0", [0.0, 0.05, -0.05])
@pytest.mark.parametrize("side", ["above", "below"])
def test_fixed_size_at_most_alpha_by_enumeration(n: int, delta0: float, side: Side) -> None:
    region = oriented_region(n, delta0, side)
    assert region.any()
    sign = 1 if side == "above" else -1
    # on the boundary δ = δ0 across the discordance, 2,001 values (8× the module's grid)
    sizes = []
    for s in np.linspace(abs(delta0), 1.0, 2001)[::50]:
        sizes.append(region_probability(region, n, (s + delta0) / 2, (s - delta0) / 2))
    assert max(sizes) <= ALPHA
    # inside the composite null (δ beyond δ0 on the null side) the size is smaller still
    for s in (0.1, 0.4, 0.8):
        delta = delta0 - sign * 0.05
        assert region_probability(region, n, (s + delta) / 2, (s - delta) / 2) <= ALPHA


def boundary_sizes(region: np.ndarray, n: int, delta0: float, s: np.ndarray) -> np.ndarray:
    """P_s((b, c) ∈ region) at δ = δ0 for each discordance in ``s``, enumerated in numpy."""
    b, c = np.nonzero(region)
    m = n - b - c
    log_coef = gammaln(n + 1) - gammaln(b + 1) - gammaln(c + 1) - gammaln(m + 1)
    out = []
    for v in s:
        p = [(v + delta0) / 2, (v - delta0) / 2, 1 - v]
        out.append(np.exp(log_coef + xlogy(b, p[0]) + xlogy(c, p[1]) + xlogy(m, p[2])).sum())
    return np.array(out)


@pytest.mark.slow
@pytest.mark.parametrize("n", [25, 60, 200])
def test_fixed_nuisance_sup_matches_a_much_finer_grid(n: int) -> None:
    s = np.linspace(0.0, 1.0, 9601)  # 40× the module's 240 points
    for delta0 in (0.0, 0.05, -0.05):
        region = fixed_region(n, delta0, ALPHA)
        assert boundary_sizes(region, n, delta0, s[s >= abs(delta0)]).max() <= ALPHA
        # a region one level larger is over α: the region is as large as α allows
        level = monotone(score_statistic(n, delta0))
        edge = np.max(np.where(~region & np.isfinite(level), level, -np.inf))
        bigger = region | (level >= edge)
        assert boundary_sizes(bigger, n, delta0, s[s >= abs(delta0)][::40]).max() > ALPHA


def test_fixed_power_on_a_forty_percent_regression() -> None:
    rng = np.random.default_rng(43)
    d = simulate(rng, 0.40, 0.0, 2000, 25)
    rejected = [paired_fixed_test(row, 0.05, "above", ALPHA).rejected for row in d]
    assert np.mean(rejected) >= 0.95


def test_fixed_test_against_conditional_mcnemar_at_zero() -> None:
    # the unconditional p uses the number of concordant items too; on these cases it is smaller
    # than the conditional McNemar p = P[Bin(b + c, 1/2) ≥ b]
    for b, c in [(3, 0), (6, 0), (8, 2), (12, 3)]:
        p = paired_fixed_test(items(b, c, 25), 0.0, "above", ALPHA).value
        assert p < binomtest(b, b + c, 0.5, "greater").pvalue
    assert paired_fixed_test(items(3, 0, 25), 0.0, "above", ALPHA).value == pytest.approx(
        0.0539, abs=1e-4
    )
    # no evidence either way: p = 1 (McNemar's conditional p is 0.62 there)
    assert paired_fixed_test(items(5, 5, 25), 0.0, "above", ALPHA).value == 1.0


def test_fixed_sides_mirror() -> None:
    d = items(2, 9, 30)
    below = paired_fixed_test(d, 0.05, "below", ALPHA)
    above = paired_fixed_test(-d, -0.05, "above", ALPHA)
    assert below.value == above.value and below.rejected and below.side == "below"
    assert below.statistic == "p" and below.n == 30 and below.reachable is below.rejected
    with pytest.raises(ValueError):
        paired_fixed_test(np.array([0, 2]), 0.0, "above", ALPHA)


@pytest.mark.parametrize("cap", [25, 100, 200])
@pytest.mark.parametrize("delta0", [0.0, 0.05, -0.05])
@pytest.mark.parametrize("side", ["above", "below"])
@pytest.mark.slow
def test_design_exact_total_size(cap: int, delta0: float, side: Side) -> None:
    design = paired_design(delta0, side, Looks(cap), ALPHA)
    assert design.size <= ALPHA
    assert design.total_size(design.threshold) == pytest.approx(design.size)
    # the fixed-N region at FINAL_SHARE · α is the final region, and early regions exist
    assert (design.final_region == fixed_region(cap, design._bound, design.final_alpha)).all()
    assert design.threshold < math.inf
    fine = np.linspace(abs(delta0), 1.0, 2401)
    assert design.total_size(design.threshold, fine) <= ALPHA
    # one candidate lower would exceed α: the threshold is the smallest valid one
    lower = np.max([np.max(np.where(s < design.threshold, s, -np.inf)) for s in design._shapes])
    if np.isfinite(lower):
        assert design.total_size(float(lower)) > ALPHA


def run_design(design: PairedDesign, d: np.ndarray) -> tuple[bool, int]:
    """Peek at every look point; (rejected, items used)."""
    for n in design.looks.points[:-1]:
        if design.evidence(d[:n], final=False).rejected:
            return True, n
    return design.evidence(d, final=True).rejected, design.looks.cap


@pytest.mark.slow
@pytest.mark.parametrize("p_plus,p_minus", [(0.05, 0.0), (0.30, 0.25)])
def test_design_size_under_peeking_by_simulation(p_plus: float, p_minus: float) -> None:
    design = paired_design(0.05, "above", Looks(100), ALPHA)
    rng = np.random.default_rng(7)
    reps = 2000
    rate = np.mean(
        [run_design(design, row)[0] for row in simulate(rng, p_plus, p_minus, reps, 100)]
    )
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)


@pytest.mark.parametrize("cap,p_plus", [(25, 0.40), (100, 0.15)])
def test_design_rejects_wherever_the_fixed_test_does(cap: int, p_plus: float) -> None:
    design = paired_design(0.05, "above", Looks(cap), ALPHA)
    rng = np.random.default_rng(11)
    d = simulate(rng, p_plus, 0.0, 2000, cap)
    fixed = np.array([paired_fixed_test(row, 0.05, "above", ALPHA).rejected for row in d])
    seq = np.array([run_design(design, row)[0] for row in d])
    assert (seq | ~fixed).all()  # path by path: a fixed-N rejection is a design rejection
    assert seq.mean() >= fixed.mean()


@pytest.mark.slow
def test_design_stops_early_on_a_large_regression() -> None:
    start = time.perf_counter()
    design = PairedDesign(0.05, "above", Looks(200), ALPHA)
    build = time.perf_counter() - start
    rng = np.random.default_rng(5)
    used = [run_design(design, row) for row in simulate(rng, 0.40, 0.0, 2000, 200)]
    assert all(r for r, _ in used)
    mean_items = float(np.mean([n for _, n in used]))
    print(f"cap 200, +0.40: mean items to decision {mean_items:.1f}; build {build:.2f} s")
    assert mean_items < 40
    assert paired_design(0.05, "above", Looks(200), ALPHA) is paired_design(
        0.05, "above", Looks(200), ALPHA
    )


def test_design_evidence_and_futility() -> None:
    design = paired_design(0.05, "below", Looks(100), ALPHA)
    zeros = np.zeros(100, dtype=int)
    early = design.evidence(zeros[:16], final=False)
    assert early.statistic == "e" and early.critical == pytest.approx(math.exp(design.threshold))
    assert not early.rejected and early.reachable and early.n == 16
    # no discordance at all: the bound 0.05 is shown to hold long before 100 items
    first = next(n for n in design.looks.points if design.evidence(zeros[:n], n == 100).rejected)
    assert first < 100
    # 60 regressions in 64 items: even 36 fixes to come leave δ̂ = 0.24, the below side is out
    bad = items(60, 0, 64)
    assert not design.evidence(bad, final=False).reachable
    final = design.evidence(np.r_[bad, -np.ones(36, dtype=int)], final=True)
    assert final.statistic == "p" and not final.rejected and not final.reachable
    with pytest.raises(ValueError):
        design.evidence(zeros[:17], final=False)
    with pytest.raises(ValueError):
        design.evidence(zeros[:48], final=True)
