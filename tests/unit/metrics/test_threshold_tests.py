"""A threshold on an item mean decided by two one-sided tests (docs/definitions.md §12.1–12.3):
hand-computed p-values and e-values per kind of value, the group-sequential stop, unscored items,
futility and a regression case's pending fixed-N tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from flipgate.metrics.betting import log_e_process
from flipgate.metrics.binary_tests import binary_design, fixed_region, last_look_region
from flipgate.metrics.onesided import Looks, sides
from flipgate.metrics.sequential import ItemValues
from flipgate.metrics.threshold_tests import decide_mean, pending_fixed

ALPHA = 0.05


def test_sides_follow_the_direction():
    assert sides("max") == ("above", "below") and sides("min") == ("below", "above")


def test_binary_fixed_n_is_the_exact_binomial_test():
    """flip_rate <= 0.25 on 11 items without a flip: conformance p = 0.75^11 = 0.042 → pass;
    on 10: p = 0.056 → undecided."""
    passed = decide_mean(ItemValues.of(np.zeros(11), kind="binary"), 0.25, "max", ALPHA)
    assert passed.decision == "pass" and passed.decided_at == 11
    assert passed.conformance.value == pytest.approx(0.75**11)
    assert passed.describe() == f"exact binomial p = {0.75**11:.4f} <= 0.0500 (n = 11)"
    undecided = decide_mean(ItemValues.of(np.zeros(10), kind="binary"), 0.25, "max", ALPHA)
    assert undecided.decision is None and undecided.conformance.value == pytest.approx(0.75**10)
    # 6 flips of 10 against <= 0.25: violation p = P[Bin(10, 0.25) >= 6]
    failed = decide_mean(ItemValues.of([1.0] * 6 + [0.0] * 4, kind="binary"), 0.25, "max", ALPHA)
    assert failed.decision == "fail"
    assert failed.violation.value == pytest.approx(float(binom.sf(5, 10, 0.25)))


def test_a_control_that_never_flips_passes_at_72_items_of_200():
    """The issue's all-zero control against flip_rate <= 0.05 at cap 200: 72 items (the SPRT
    oracle needs 64 on the batch grid; the turn-3 rule needed 144)."""
    decided = decide_mean(
        ItemValues.of(np.zeros(200), kind="binary"), 0.05, "max", ALPHA, Looks(200)
    )
    assert decided.decision == "pass" and decided.decided_at == 72
    assert decided.deciding.test == "group-sequential binomial"
    assert decided.deciding.value >= decided.deciding.critical


def test_the_planted_paired_regression_fails_at_25_items():
    """10 of 25 items newly flip, none fixed, against delta_flip_rate <= 0.05."""
    d = ItemValues.of([1.0] * 10 + [0.0] * 15, -1.0, 1.0, "paired")
    decided = decide_mean(d, 0.05, "max", ALPHA)
    assert decided.decision == "fail"
    assert decided.describe() == "exact paired (unconditional) p = 0.0013 <= 0.0500 (n = 25)"


def test_a_share_is_tested_through_the_items_at_either_end_and_by_betting_on_the_shares():
    """parse_rate >= 0.9: the ends' exact test keeps 0.8 α = 0.04, so 31 items that all parse
    prove it (0.9^31 = 0.038), 30 do not (0.042); items all half parsed prove nothing through
    the ends (none is at the top, every one above the bottom), but the betting e-process on the
    shares at 0.2 α = 0.01 proves a mean of 0.5 below 0.8."""
    passed = decide_mean(ItemValues.of(np.ones(31), kind="share"), 0.9, "min", ALPHA)
    assert passed.decision == "pass" and passed.conformance.value == pytest.approx(0.9**31)
    assert passed.deciding.test == "exact binomial on the items at the top of the range"
    assert passed.deciding.critical == pytest.approx(0.8 * ALPHA)
    assert decide_mean(ItemValues.of(np.ones(30), kind="share"), 0.9, "min", ALPHA).decision is None
    halves = decide_mean(ItemValues.of(np.full(60, 0.5), kind="share"), 0.8, "min", ALPHA)
    assert halves.decision == "fail"
    assert halves.deciding.test == "betting e-process on the shares"
    assert halves.deciding.critical == pytest.approx(1 / (0.2 * ALPHA))
    # an item parsed in no trial counts against "above": 20 of 40 at 0 prove parse_rate < 0.9
    failed = decide_mean(ItemValues.of([0.0] * 20 + [1.0] * 20, kind="share"), 0.9, "min", ALPHA)
    assert failed.decision == "fail"
    assert failed.deciding.test == "exact binomial on the items above the bottom of the range"


def test_a_share_undecided_names_both_of_its_tests():
    near = decide_mean(
        ItemValues.of(np.full(24, 0.85), kind="share"), 0.8, "min", ALPHA, Looks(100)
    )
    assert near.decision is None
    line = near.conformance.describe()
    assert line.startswith("group-sequential binomial on the items at the top of the range e = ")
    assert "; betting e-process on the shares e = " in line and line.endswith("< 100 (n = 24)")


def test_bounded_values_use_the_betting_e_process():
    """parse_rate-like bounded values all at 1 against >= 0.9: the e-process on the values,
    rejecting once it reaches 1/α = 20."""
    x = np.ones(60)
    crossed = int(np.argmax(log_e_process(x, 0.9, "above") >= math.log(20))) + 1
    decided = decide_mean(ItemValues.of(x), 0.9, "min", ALPHA)
    assert decided.decision == "pass" and decided.deciding.test == "betting e-process"
    early = decide_mean(ItemValues.of(x[: crossed - 1]), 0.9, "min", ALPHA)
    assert early.decision is None and early.conformance.value < 20


def test_a_binary_test_on_a_look_grid_leaves_unscored_items_out():
    """Binary values (a flip rate) are tested on the scored items: at each look the largest look
    point at or below the number scored so far. 11 items without a flip and one unscored at the
    cap of 12 (one look point, 12) never reach it; the cap's last look tests the 11 scored items
    with no look made before it, so at the full α: 0.75^11 = 0.042 <= 0.05, pass — as the
    fixed-N test on them. One item earlier (11 drawn, 10 scored) nothing is tested yet."""
    values = ItemValues.of([*np.zeros(11), np.nan], kind="binary")
    assert values.n == 11 and values.drawn == 12 and values.estimate == 0.0
    on_grid = decide_mean(values, 0.25, "max", ALPHA, Looks(12, 4, 12))
    assert on_grid.decision == "pass" and on_grid.decided_at == 12
    assert on_grid.conformance.test == "exact binomial" and on_grid.conformance.n == 11
    assert on_grid.conformance.value == pytest.approx(0.75**11)
    past = ItemValues.of([*np.zeros(11), np.nan, 0.0], kind="binary")  # a value past the cap
    assert decide_mean(past, 0.25, "max", ALPHA, Looks(12, 4, 12)).conformance.n == 11
    short = ItemValues.of([*np.zeros(10), np.nan], kind="binary")
    before = decide_mean(short, 0.25, "max", ALPHA, Looks(12, 4, 12))
    assert before.decision is None and before.conformance.test == "no look yet"
    fixed = decide_mean(values, 0.25, "max", ALPHA)
    assert fixed.decision == "pass" and fixed.conformance.value == pytest.approx(0.75**11)


def test_the_caps_last_look_uses_every_scored_item_at_the_level_the_looks_left():
    """A cell at its cap of 48 with 6 scored items, 5 flipping (the NF4 build's ARC cell): the
    scored count never reached the first look point (16), so the last look is the exact test at
    the full α: P[Bin(6, 0.25) >= 5] = 6 · 0.25^5 · 0.75 + 0.25^6 = 0.00464 <= its level, fail.
    Its level is the p-value of the region's edge: P[Bin(6, 0.25) >= 4] = 0.0376 (the fixed-N
    region at 0.05 is S >= 4)."""
    raw = np.full(48, np.nan)
    raw[[3, 9, 17, 25, 33, 41]] = [1, 1, 1, 0, 1, 1]
    decided = decide_mean(ItemValues.of(raw, kind="binary"), 0.25, "max", ALPHA, Looks(48))
    assert decided.decision == "fail" and decided.decided_at == 48
    violation = decided.violation
    assert violation.n == 6 and violation.value == pytest.approx(6 * 0.25**5 * 0.75 + 0.25**6)
    assert violation.critical == pytest.approx(binom.sf(3, 6, 0.25))
    # 40 of the 48 drawn: still open, and reachable through that last look
    open_ = decide_mean(ItemValues.of(raw[:40], kind="binary"), 0.25, "max", ALPHA, Looks(48))
    assert open_.decision is None and open_.violation.reachable


def test_the_last_look_after_early_looks_keeps_the_exact_level():
    """After early looks, the last look's region is the largest tail whose exact total error,
    the early boundaries included, is at most α (checked here by enumerating the looks' paths'
    law by hand: a dynamic programme over S independent of the one in binary_tests), and never
    larger than the fixed-N region at α."""
    looks = Looks(100)
    design = binary_design(0.25, "above", looks, ALPHA)
    made, n = (16, 24, 40), 45
    region = last_look_region(design, made, n)
    assert region.sum() > 0 and not (region & ~fixed_region(n, 0.25, "above", ALPHA)).any()

    def total(edge: int) -> float:
        law = {0: 1.0}
        absorbed, done = 0.0, 0
        for point in (*made, n):
            for _ in range(point - done):
                nxt: dict[int, float] = {}
                for s, w in law.items():
                    nxt[s] = nxt.get(s, 0.0) + w * 0.75
                    nxt[s + 1] = nxt.get(s + 1, 0.0) + w * 0.25
                law = nxt
            done = point
            if point == n:
                return absorbed + sum(w for s, w in law.items() if s >= edge)
            crossed = [s for s in law if design.early_region(point)[s]]
            absorbed += sum(law.pop(s) for s in crossed)
        raise AssertionError

    edge = int(np.flatnonzero(region)[0])
    assert total(edge) <= ALPHA < total(edge - 1)


def test_a_flip_rate_over_items_that_mostly_do_not_parse_is_decided_on_those_that_do():
    """Two items in three unscored (NaN) and every scored one flipping: imputing them as 0 for the
    violation test would leave it near the bound of 0.25; on the scored items it fails as soon as
    16 of them are in (the look after 48 drawn items), on the first 16 scored."""
    x = np.tile([1.0, np.nan, np.nan], 33)
    decided = decide_mean(ItemValues.of(x, kind="binary"), 0.25, "max", ALPHA, Looks(100))
    assert decided.decision == "fail" and decided.decided_at == 48
    assert decided.violation.n == 16


def test_unscored_paired_values_count_against_each_test_on_a_look_grid():
    """Paired differences keep the imputation: NaN enters the violation test of a max bound as
    the range's low end and the conformance test as its high end."""
    x = np.r_[np.full(15, -1.0), np.nan]
    values = ItemValues.of(x, -1.0, 1.0, "paired")
    imputed = decide_mean(
        ItemValues.of(np.r_[np.full(15, -1.0), 1.0], -1.0, 1.0, "paired"),
        0.05,
        "max",
        ALPHA,
        Looks(16),
    )
    got = decide_mean(values, 0.05, "max", ALPHA, Looks(16))
    assert got.conformance.value == pytest.approx(imputed.conformance.value)


def test_futility_when_neither_test_can_reject_by_the_cap():
    """flip_rate <= 0.5 at cap 40 after 16 of 32 flips: neither the violation (needs ≥ 26 flips
    of 40) nor the conformance test (≤ 14) can still reject."""
    values = ItemValues.of(np.tile([0.0, 1.0], 16), kind="binary")
    decided = decide_mean(values, 0.5, "max", ALPHA, Looks(40))
    assert decided.decision is None and decided.futile
    assert not decide_mean(values, 0.5, "max", ALPHA, Looks(200)).futile


def test_a_regression_case_waits_for_its_planned_pairs():
    """Before its planned 25 pairs a case is undecided, reachable while the best continuation
    could still make a test reject; at 25 the fixed-N test decides."""
    some = ItemValues.of([1.0] * 6 + [0.0] * 10, -1.0, 1.0, "paired")
    waiting = pending_fixed(some, 0.05, "max", ALPHA, 25)
    assert waiting.decision is None and not waiting.futile
    assert waiting.violation.describe() == (
        "exact paired (unconditional) once 25 items are in: pending (n = 16)"
    )
    full = ItemValues.of([1.0] * 10 + [0.0] * 15, -1.0, 1.0, "paired")
    assert pending_fixed(full, 0.05, "max", ALPHA, 25).decision == "fail"
    # unscored pairs count as compared items: 25 compared, 20 scored, decided on the 20
    gaps = ItemValues.of([1.0] * 10 + [0.0] * 10 + [np.nan] * 5, -1.0, 1.0, "paired")
    decided = pending_fixed(gaps, 0.05, "max", ALPHA, 25)
    assert decided.decision == "fail" and decided.violation.n == 20


@pytest.mark.parametrize("spread", ["all_or_none", "partial"])
@pytest.mark.slow
def test_a_shares_error_at_the_bound_is_at_most_alpha_under_peeking(spread):
    """Shares of K = 6 trials whose mean is exactly the bound 0.8, on the look grid to a cap of
    100: each of the union's sides rejects in at most α of 1,000 cells (within simulation
    error: 3 standard errors)."""
    rng = np.random.default_rng(3)
    reps, cap = 1000, 100
    if spread == "all_or_none":
        shares = (rng.random((reps, cap)) < 0.8).astype(float)
    else:  # per-item parse probabilities Beta(4, 1) (mean 0.8), 6 trials each
        shares = rng.binomial(6, rng.beta(4.0, 1.0, (reps, cap))) / 6.0
    decisions = [
        decide_mean(ItemValues.of(row, kind="share"), 0.8, "min", ALPHA, Looks(cap)).decision
        for row in shares
    ]
    limit = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)
    assert decisions.count("fail") / reps <= limit
    assert decisions.count("pass") / reps <= limit


def test_a_binary_test_whose_scored_items_cannot_reach_a_look_point_waits_for_the_cap():
    """Cap 25, first look point 16: after 16 drawn items of which 6 were scored, every one
    flipping, no look point can be reached (at most 15 scored by the cap), but the cap's last
    look tests the scored items at the full α: the cell draws on, and fails at the cap on its 9
    scored items (0.25^9). Futile only where even that look cannot reject: with nothing scored
    after 16 of a cap of 18, at most 2 scored items, 2 of 2 flipping has p = 0.0625 > 0.05 and 2
    without a flip 0.5625; a cap of 19 leaves 3 (0.25^3 = 0.016)."""
    x = np.tile([1.0, np.nan, np.nan], 9)
    assert np.count_nonzero(~np.isnan(x[:16])) == 6
    waiting = decide_mean(ItemValues.of(x[:16], kind="binary"), 0.25, "max", ALPHA, Looks(25))
    assert waiting.decision is None and not waiting.futile
    at_cap = decide_mean(ItemValues.of(x[:25], kind="binary"), 0.25, "max", ALPHA, Looks(25))
    assert at_cap.decision == "fail" and at_cap.violation.value == pytest.approx(0.25**9)
    nothing = ItemValues.of(np.full(16, np.nan), kind="binary")
    assert decide_mean(nothing, 0.25, "max", ALPHA, Looks(18)).futile
    assert not decide_mean(nothing, 0.25, "max", ALPHA, Looks(19)).futile
