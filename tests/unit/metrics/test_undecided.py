"""Why a verdict is undecided (docs/definitions.md §12.8): n* against hand-computed values, the
two labels, and every way a verdict reaches them (its tests, its interval, the gate)."""

import numpy as np
import pytest

from flipgate.config import Threshold
from flipgate.gate.rules import evaluate
from flipgate.metrics import undecided as undecided_module
from flipgate.metrics.onesided import Looks
from flipgate.metrics.sequential import ItemValues
from flipgate.metrics.undecided import at_size, n_star_by_interval, n_star_by_test, undecided
from flipgate.results import MetricEstimate, Undecided, Verdict, label_text


def test_at_size_keeps_the_mix_and_spreads_it():
    # 1 of 3 at 5 items: 1.67 ones, 3.33 zeros -> floors 1 and 3, the last copy to the larger
    # remainder (ones); zeros sit at 1/6, 1/2, 5/6 and ones at 1/4, 3/4
    assert at_size([1.0, 0.0, 0.0], 5).tolist() == [0, 1, 0, 1, 0]
    # an unscored item keeps its share: n* counts items drawn
    assert np.isnan(at_size([1.0, np.nan, 0.0, 0.0], 4)).sum() == 1
    assert np.nansum(at_size([1.0, np.nan, 0.0, 0.0], 8)) == 2
    assert at_size([0.2, 0.8], 6).mean() == pytest.approx(0.5)


def test_n_star_of_all_correct_items_is_the_exact_binomial_count():
    # "accuracy >= 0.5" proven by the exact binomial test at alpha 0.05 on n correct items
    # when 0.5^n <= 0.05: n = 5 (0.031), not 4 (0.0625)
    values = ItemValues.of([1.0, 1.0], kind="binary")
    assert n_star_by_test(values, 0.5, "min", 0.05, limit=20) == 5
    assert n_star_by_test(values, 0.5, "min", 0.05, limit=4) is None  # beyond the search


def test_n_star_counts_items_drawn_when_some_are_unscored():
    # 2 correct of 2 scored among 4 drawn: half the drawn items score, so the 5 correct items
    # "accuracy >= 0.5" needs take 9 drawn (4.5 each way, the remainder to the scored)
    values = ItemValues.of([1.0, np.nan, 1.0, np.nan], kind="binary")
    assert n_star_by_test(values, 0.5, "min", 0.05, limit=40) == 9


def test_n_star_of_a_violation_is_found_by_the_violation_test():
    # 8 flips in 10 against "flip_rate <= 0.5": P(X >= k | n, 0.5) with k = 0.8 n rounded is
    # 0.055 at n = 10 (k = 8) and first <= 0.05 at n = 11 (k = 9: 0.033)
    values = ItemValues.of([1.0] * 8 + [0.0] * 2, kind="binary")
    assert n_star_by_test(values, 0.5, "max", 0.05, limit=100) == 11


def test_n_star_is_infinite_on_the_bound():
    values = ItemValues.of([1.0, 0.0] * 8, kind="binary")
    assert n_star_by_test(values, 0.5, "max", 0.05, limit=10_000) is None
    assert n_star_by_interval(0.5, (0.3, 0.7), 0.5, 16) is None
    why = undecided(None, 16, 0.5, 0.5, "test")
    assert why.reason == "at its bound" and why.distance == 0
    assert "n* = ∞" in why.text()


def test_n_star_by_interval_scales_the_interval_end_toward_the_bound():
    # AUC 0.36 [0.1875, 0.64] against >= 0.5 over 4 sources: the upper end is 0.28 from the
    # estimate, the bound 0.14: it clears the bound once 0.28 * sqrt(4 / n) < 0.14, n > 16
    assert n_star_by_interval(0.36, (0.1875, 0.64), 0.5, 4) == 17
    # inside the bound the end beyond it decides: 0.1 [0.0, 0.3] against <= 0.2 over 9 items:
    # (0.2 / 0.1)^2 * 9 = 36 -> 37
    assert n_star_by_interval(0.1, (0.0, 0.3), 0.2, 9) == 37


def test_labels_split_at_ten_times_the_cap():
    assert undecided(40, 4, 0.36, 0.5, "interval").reason == "under-powered"
    assert undecided(41, 4, 0.36, 0.5, "interval").reason == "at its bound"
    why = undecided(17, 4, 0.36, 0.5, "interval")
    assert why.text() == "under-powered: 17 items would decide it (cap 4)"
    far = undecided(None, 16, 0.26, 0.25, "test")
    assert far.text() == (
        "at its bound: |estimate − bound| = 0.01; no affordable N decides it (n* > 160, cap 16)"
    )


def test_a_tested_verdict_says_why_it_is_undecided():
    t = Threshold("accuracy", 0.5, "min", "upper")
    values = ItemValues.of([1.0, 1.0], kind="binary")
    estimates = {"r": {"accuracy": MetricEstimate(estimate=1.0)}}
    (v,) = evaluate([t], estimates, "r", sequences={("r", "accuracy"): values})
    assert v.verdict == "inconclusive" and v.outcome == "fail"
    assert v.undecided == Undecided(
        reason="under-powered", n=2, n_star=5, distance=0.5, limit=20, by="test"
    )
    assert "under-powered: 5 items would decide it (cap 2)" in v.describe()
    assert Verdict.from_json(v.to_json()) == v  # the card keeps it


def test_a_sequential_verdict_counts_its_cap():
    # 13 flips of 50 against <= 0.25: 0.26, a hair beyond; at 500 items (10 x the cap of 50) the
    # exact binomial p is still 0.32, so no affordable cap decides it
    t = Threshold("flip_rate", 0.25, "max", "lower")
    values = ItemValues.of(at_size([1.0] * 13 + [0.0] * 37, 50), kind="binary")  # spread out
    (v,) = evaluate(
        [t],
        {"r": {"flip_rate": MetricEstimate(estimate=0.26)}},
        "r",
        sequences={("r", "flip_rate"): values},
        looks=Looks(cap=50),
    )
    assert v.verdict == "inconclusive"
    assert v.undecided is not None and v.undecided.reason == "at its bound"
    assert v.undecided.n == 50 and v.undecided.n_star is None
    assert v.undecided.distance == pytest.approx(0.01)


def test_an_interval_verdict_says_why_from_its_units():
    t = Threshold("abstention_auc", 0.5, "min", "lower")
    est = MetricEstimate(estimate=0.36, ci=(0.1875, 0.64), n_items=4)
    (v,) = evaluate([t], {"r": {"abstention_auc": est}}, "r")
    assert v.verdict == "inconclusive" and v.undecided is not None
    assert (v.undecided.reason, v.undecided.n_star, v.undecided.by) == (
        "under-powered",
        17,
        "interval",
    )
    # the units given by the gate where the estimate does not say
    bare = MetricEstimate(estimate=0.36, ci=(0.1875, 0.64))
    (w,) = evaluate([t], {"r": {"abstention_auc": bare}}, "r", n_items=4)
    assert w.undecided == v.undecided


def test_decided_verdicts_carry_no_reason():
    t = Threshold("flip_rate", 0.2, "max", "lower")
    est = MetricEstimate(estimate=0.1, ci=(0.05, 0.15), n_items=40)
    (v,) = evaluate([t], {"r": {"flip_rate": est}}, "r")
    assert v.verdict == "pass" and v.undecided is None
    assert "undecided" not in v.model_dump()  # left out of the card's JSON
    assert label_text(v.model_dump()) == "pass"


def test_standing_reads_the_card_json():
    t = Threshold("abstention_auc", 0.5, "min", "lower")
    est = MetricEstimate(estimate=0.36, ci=(0.1875, 0.64), n_items=4)
    (v,) = evaluate([t], {"r": {"abstention_auc": est}}, "r")
    assert (
        label_text(v.model_dump())
        == v.label_text
        == ("inconclusive (under-powered: 17 items would decide it (cap 4))")
    )


@pytest.mark.parametrize(
    "values,bound,direction",
    [
        ([-1.0] * 3 + [1.0] + [0.0] * 12, -0.05, "min"),  # n* 131 exact
        ([0.0] * 16, 0.05, "max"),  # 59
        ([1.0] * 2 + [0.0] * 14, 0.2, "max"),  # 82
    ],
)
def test_paired_n_star_beyond_the_exact_range_is_near_the_exact_tests(
    monkeypatch, values, bound, direction
):
    # the large-sample score test used past EXACT_PAIRED items finds n* within 20 % of the
    # exact unconditional test's (measured: -4 % to +19 % on seven such cases)
    paired = ItemValues.of(values, -1.0, 1.0, "paired")
    monkeypatch.setattr(undecided_module, "EXACT_PAIRED", 10_000)
    exact = n_star_by_test(paired, bound, direction, 0.05, limit=200)
    monkeypatch.setattr(undecided_module, "EXACT_PAIRED", 0)
    large_sample = n_star_by_test(paired, bound, direction, 0.05, limit=200)
    assert exact is not None and large_sample is not None
    assert 0.8 * exact <= large_sample <= 1.2 * exact


@pytest.mark.parametrize("n, b", [(9, 3), (30, 10), (300, 100)])
def test_the_score_is_finite_where_its_discriminant_vanishes(n, b):
    """At δ0 = −0.2 with no discordant pair the other way, the discriminant is (1.2b − 0.4n)²,
    zero at b = n/3: rounding must not turn its root into NaN (a NaN score never rejects)."""
    import warnings

    import numpy as np

    from flipgate.metrics.paired_exact import score_statistic

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "invalid value encountered in sqrt" fails the test
        z = score_statistic(n, -0.2)
    assert np.isfinite(z[np.add.outer(np.arange(n + 1), np.arange(n + 1)) <= n]).all()
    assert np.isfinite(z[0, b]) and np.isfinite(z[b, 0])
