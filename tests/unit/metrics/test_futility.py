"""Predictive futility (flipgate.metrics.futility, docs/definitions.md §12.3): the exact binary
tables against a brute-force simulation, the completions, and a regression case's chance."""

from __future__ import annotations

import numpy as np
import pytest

from flipgate.metrics.binary_tests import binary_design
from flipgate.metrics.futility import binary_chance, completions
from flipgate.metrics.onesided import Looks, Side
from flipgate.metrics.sequential import ItemValues
from flipgate.metrics.threshold_tests import decide_mean, pending_fixed

ALPHA = 0.05


def brute_force_chance(
    m: float, side: Side, looks: Looks, n: int, s: int, draws: int = 40_000
) -> float:
    """Draw the rate from Beta(s + ½, n − s + ½), the remaining items from it, and run the design
    at every later look point."""
    design = binary_design(m, side, looks, ALPHA)
    rng = np.random.default_rng(5)
    rate = rng.beta(s + 0.5, n - s + 0.5, draws)
    rest = (rng.random((draws, looks.cap - n)) < rate[:, None]).cumsum(axis=1)
    hit = np.zeros(draws, dtype=bool)
    for point in (p for p in looks.points if p > n):
        total = s + rest[:, point - n - 1]
        region = np.asarray(design.final) if point == looks.cap else design.early_region(point)
        hit |= region[total]
    return float(hit.mean())


@pytest.mark.parametrize(
    ("m", "side", "cap", "n", "s"),
    [
        (0.25, "above", 100, 32, 9),  # a flip rate near its bound
        (0.25, "below", 100, 32, 9),
        (0.8, "above", 80, 48, 41),  # a parse rate's items at the top
        (0.05, "below", 40, 16, 0),  # a control that never flipped, cap 40
        (0.5, "above", 40, 24, 12),
    ],
)
def test_the_binary_table_is_the_simulated_predictive_probability(m, side, cap, n, s):
    looks = Looks(cap, 8, 16)
    got = binary_chance(binary_design(m, side, looks, ALPHA), n, s)
    want = brute_force_chance(m, side, looks, n, s)
    assert got is not None
    assert abs(got - want) <= 4 * np.sqrt(want * (1 - want) / 40_000) + 2e-3


def test_no_chance_after_the_cap_or_at_an_edge():
    looks = Looks(40, 8, 16)
    assert binary_chance(binary_design(0.5, "above", looks, ALPHA), 40, 20) is None
    assert binary_chance(binary_design(0.0, "above", looks, ALPHA), 16, 0) is None


def test_completions_keep_the_items_so_far_and_draw_from_them_and_the_ends():
    x = np.array([0.0, 1.0, np.nan, 1.0])
    paths = completions(x, 0.0, 1.0, 10, draws=500)
    assert paths.shape == (500, 10)
    np.testing.assert_array_equal(paths[:, :4], np.broadcast_to(x, (500, 4)))
    drawn = paths[:, 4:]
    assert set(np.unique(drawn[~np.isnan(drawn)]).tolist()) <= {0.0, 1.0}
    assert np.isnan(drawn).any()  # an unscored item can be drawn again
    # seeded by the values: the same items give the same completions
    np.testing.assert_array_equal(completions(x, 0.0, 1.0, 10, draws=500), paths)


def test_a_cell_near_its_bound_is_unlikely_to_be_decided_and_a_clear_one_is_not():
    """A flip rate at its bound after 80 of 100 items: neither test is likely to reject (below
    0.05 together); after its first 16 a decision was still possible."""
    looks = Looks(100, 8, 16)
    at_bound = ItemValues.of(np.tile([1.0, 0.0, 0.0, 0.0], 20), kind="binary")
    decided = decide_mean(at_bound, 0.25, "max", ALPHA, looks)
    assert decided.decision is None and not decided.futile
    assert decided.chance is not None and decided.chance < 0.05 and decided.unlikely
    early = decide_mean(
        ItemValues.of(at_bound.values[:16], kind="binary"), 0.25, "max", ALPHA, looks
    )
    assert early.chance is not None and early.chance > 0.05 and not early.unlikely


def test_a_regression_case_reports_its_chance_of_a_decision_at_its_planned_pairs():
    """Paired differences candidate − baseline on 16 of 100 planned pairs: 8 newly flipping and
    none fixed will almost surely fail delta <= 0.05 at 100; identical answers cannot prove
    non-inferiority (0.95^100 < 0.05 needs no discordance at all, but the completions draw
    some) only with a small chance, and a margin of 0.3 is easily proven."""
    worse = ItemValues.of(np.r_[np.ones(8), np.zeros(8)], -1.0, 1.0, "paired")
    failing = pending_fixed(worse, 0.05, "max", ALPHA, 100)
    assert failing.decision is None and failing.violation.chance is not None
    assert failing.violation.chance > 0.9
    same = ItemValues.of(np.zeros(16), -1.0, 1.0, "paired")
    wide = pending_fixed(same, 0.3, "max", ALPHA, 100)
    assert wide.conformance.chance is not None and wide.conformance.chance > 0.9
    assert wide.violation.chance is not None and wide.violation.chance < 0.05
