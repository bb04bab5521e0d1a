"""Sequential gates (docs/definitions.md §12): the betting confidence sequence's coverage under
continuous peeking, hand-computed bets, the stopping rule, its operating characteristics on
simulated cells of known truth (the issue's table), and an order cell that stops early."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.auditors import make_auditor
from support.scripted import ScriptedBackend

from flipgate.cards.disclosure import card_section, stop_line
from flipgate.config import Threshold
from flipgate.gate.rules import evaluate
from flipgate.gate.sequential import (
    SequentialStop,
    bernoulli_items,
    look,
    paired_items,
    run_sequential,
    simulate,
)
from flipgate.metrics.betting import log_e_process
from flipgate.metrics.onesided import Looks
from flipgate.metrics.sequential import (
    ItemValues,
    SequentialSettings,
    confidence_sequence,
    interval,
    predictable_bets,
)
from flipgate.order.measure import order_cells

LEVEL = 0.95


def test_bets_are_the_predictable_plug_in_of_the_paper_by_hand():
    """λ_1 uses the prior variance 1/4; λ_2 the variance after x_1 = 1 (μ̂_1 = 3/4, σ̂²_1 =
    (1/4 + 1/16)/2)."""
    bets = predictable_bets(np.array([1.0, 0.0]), 0.05)
    assert bets[0] == pytest.approx(math.sqrt(2 * math.log(40) / (0.25 * 1 * math.log(2))))
    assert bets[1] == pytest.approx(math.sqrt(2 * math.log(40) / (0.15625 * 2 * math.log(3))))


def test_a_mean_leaves_the_sequence_when_a_gambler_hand_computed_reaches_2_over_alpha():
    """The first time m = 0.5 leaves the sequence of an all-ones stream is the first time the
    bettor on 'above 0.5', betting min(λ_t, 1/2 / 0.5) of his capital, reaches 2/α."""
    x = np.ones(60)
    bets = predictable_bets(x, 0.05)
    capital, first = 1.0, None
    for t, bet in enumerate(bets, start=1):
        capital *= 1 + min(bet, 1.0) * (1 - 0.5)
        if capital >= 2 / 0.05:
            first = t
            break
    lower, _ = confidence_sequence(x, 0.05)
    # the grid widens by one step: the lower bound passes 0.5 + 1/1000 at that same step
    assert first is not None and lower[first - 1] > 0.5 and lower[first - 2] <= 0.501


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_coverage_holds_at_every_look_at_once(p):
    """Bernoulli(p), 400 sequences of 200: the share whose sequence ever misses p is at most α
    (plus 3 standard errors)."""
    rng = np.random.default_rng(7)
    x = (rng.random((400, 200)) < p).astype(float)
    lower, upper = confidence_sequence(x, 0.05)
    ever_missed = ((lower > p) | (upper < p)).any(axis=1).mean()
    assert ever_missed <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)


def test_coverage_of_a_continuous_bounded_mean():
    """Beta(2, 5) values (mean 2/7), as a paired difference rescaled from [−1, 1] would look."""
    rng = np.random.default_rng(3)
    x = rng.beta(2, 5, size=(400, 150))
    lower, upper = confidence_sequence(x, 0.05)
    assert ((lower > 2 / 7) | (upper < 2 / 7)).any(axis=1).mean() <= 0.05 + 3 * math.sqrt(
        0.05 * 0.95 / 400
    )


def test_bounds_never_widen_and_shrink_with_evidence():
    lower, upper = confidence_sequence(np.zeros(200), 0.05)
    assert (np.diff(upper) <= 0).all() and (lower == 0).all()
    assert upper[15] > 0.25 >= upper[24]  # 25 unflipped items prove flip_rate <= 0.25, 16 do not
    assert upper[199] < 0.05


def test_interval_on_the_values_own_scale_drops_unscorable_items():
    lo, hi = interval([1.0, -1.0, np.nan] * 20, LEVEL, -1.0, 1.0)
    assert -1 <= lo < 0 < hi <= 1
    assert interval([], LEVEL) == (0.0, 1.0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        confidence_sequence([1.5], 0.05)


def flip(bound=0.25, rule="lower", metric="flip_rate", direction="max"):
    return Threshold(metric, bound, direction, rule, level=LEVEL)


#: the kind of each metric's per-item values, as flipgate.summary.item_values gives them
KINDS = {"flip_rate": "binary", "delta_flip_rate": "paired", "delta_order": "paired"}


def scripted(values: dict[str, np.ndarray], low=0.0, high=1.0):
    """``measure(n)`` over fixed per-item values; records the n it was asked for."""
    asked = []

    def measure(n):
        asked.append(n)
        return {
            ("regex", m): ItemValues.of(v[:n], low, high, KINDS.get(m, "bounded"))
            for m, v in values.items()
        }

    return measure, asked


KEY = dict(model_id="m", dataset="d", cell="option_order", calls_per_item=6)


def test_a_clear_cell_stops_at_min_items_and_names_what_decided():
    measure, asked = scripted({"flip_rate": np.ones(100)})
    stop = run_sequential(SequentialSettings(8, 16), 100, [flip()], "regex", measure, **KEY)
    assert asked == [8, 16] and stop.n_items == 16 and stop.batches == 2
    assert stop.reason == "decided" and stop.decided_by == [flip().label]
    assert stop.calls_saved == (100 - 16) * 6 and stop.calls_used == 16 * 6
    assert stop.thresholds[0].decision == "fail" and stop.thresholds[0].decided_at == 16
    line = stop_line("option_order", card_section(stop, LEVEL))
    assert line == (
        "option_order: 16/100 items used, stopping batch 2 (8 items a batch, from 16); decided by "
        f"flip_rate <= 0.25 (lower) ({stop.thresholds[0].test}); 504 model calls saved (96 used)"
    )


def test_a_cell_waits_for_its_last_threshold_and_keeps_earlier_decisions():
    """flip_rate (all flips) is decided at 16; parse_rate >= 0.9 (all parsed, a bounded
    per-item value) waits for its betting e-process to reach 1/α = 20: the cell stops at the first
    look point where it has, and flip_rate keeps its decision at 16."""
    measure, _ = scripted({"flip_rate": np.ones(200), "parse_rate": np.ones(200)})
    parse = flip(0.9, "upper", "parse_rate", "min")
    stop = run_sequential(SequentialSettings(8, 16), 200, [flip(), parse], "regex", measure, **KEY)
    by = {d.metric: d for d in stop.thresholds}
    assert by["flip_rate"].decided_at == 16 and by["parse_rate"].decision == "pass"
    crossed = int(np.argmax(log_e_process(np.ones(200), 0.9, "above") >= math.log(20))) + 1
    expected = next(n for n in range(16, 201, 8) if n >= crossed)
    assert stop.decided_by == [parse.label] and stop.n_items == expected == 40
    assert by["parse_rate"].test.startswith("betting e-process e = ")


def test_undecided_runs_to_the_cap_and_point_or_warn_rules_never_hold():
    # 55 flips spread over the first 96 items, then 4 without: at 96 a fail is still reachable
    # (55 + 4 = 59 and P[Bin(100, ½) ≥ 59] ≤ 0.05), at the cap neither test rejects
    spread = np.diff(np.arange(97) * 55 // 96)
    flips = np.r_[spread, np.zeros(4)].astype(float)
    halves = np.tile([0.0, 1.0], 50)
    measure, asked = scripted({"flip_rate": flips, "osi": halves})
    rules = [flip(0.5), Threshold("osi", 0.5, "min", "warn", level=LEVEL)]
    stop = run_sequential(SequentialSettings(8, 16), 100, rules, "regex", measure, **KEY)
    assert stop.reason == "cap" and stop.n_items == 100 and asked[-1] == 100
    assert [d.holds for d in stop.thresholds] == [True, False]
    line = stop_line("option_order", card_section(stop, LEVEL))
    assert "at the cap, undecided: flip_rate <= 0.5 (lower)" in line


def test_a_threshold_that_can_no_longer_be_decided_stops_holding_the_cell(monkeypatch):
    """flip_rate <= 0.5 at cap 40: after 32 items with 16 flips the exact binomial test at the
    cap needs S ≥ 26 ones to fail (P[Bin(40, ½) ≥ 26] ≤ 0.05 < P[≥ 25]) and S ≤ 14 to pass;
    16 + 8 = 24 < 26 and 16 > 14, so neither test can reject: the cell stops at 32, futile
    (the predictive rule, which stops it earlier, is switched off here: see the next test)."""
    from scipy.stats import binom

    monkeypatch.setattr("flipgate.metrics.threshold_tests.FUTILITY_CHANCE", 0.0)

    assert binom.sf(25, 40, 0.5) <= 0.05 < binom.sf(24, 40, 0.5)
    assert binom.cdf(14, 40, 0.5) <= 0.05 < binom.cdf(15, 40, 0.5)
    halves = np.tile([0.0, 1.0], 20)
    measure, asked = scripted({"flip_rate": halves})
    stop = run_sequential(SequentialSettings(8, 16), 40, [flip(0.5)], "regex", measure, **KEY)
    (standing,) = stop.thresholds
    assert stop.reason == "undecidable" and stop.n_items == asked[-1] < 40
    assert standing.futile and standing.note == "cannot be decided within the cap 40"
    assert stop.n_items == 32  # at 24 (12 flips) a fail was still reachable: 12 + 16 = 28 ≥ 26


def test_a_threshold_unlikely_to_be_decided_stops_holding_the_cell_earlier():
    """Predictive futility (docs/definitions.md §12.3): flip_rate <= 0.5 at cap 100 on items
    that flip every other time. Both tests together would reject by the cap with predictive
    probability 0.020 after 64 items and 0.0044 after 72: below 0.01, so the cell stops at 72,
    before 88 where neither test could reject any more."""
    halves = np.tile([0.0, 1.0], 50)
    measure, asked = scripted({"flip_rate": halves})
    stop = run_sequential(SequentialSettings(8, 16), 100, [flip(0.5)], "regex", measure, **KEY)
    (standing,) = stop.thresholds
    assert stop.reason == "undecidable" and stop.n_items == asked[-1] == 72
    assert standing.futile and standing.decision is None
    assert standing.note is not None
    assert standing.note.startswith("unlikely to be decided within the cap 100: predictive")


def test_a_metric_without_per_item_values_holds_the_cell_to_the_cap():
    measure, _ = scripted({"flip_rate": np.ones(40)})
    swing = Threshold("acc_swing", 0.2, "max", "lower", level=LEVEL)
    stop = run_sequential(SequentialSettings(8, 16), 40, [flip(), swing], "regex", measure, **KEY)
    assert stop.n_items == 40 and stop.reason == "cap"
    assert "not a mean of per-item values" in stop.thresholds[1].note


def test_nothing_to_decide_runs_to_the_cap():
    measure, _ = scripted({"flip_rate": np.ones(40)})
    stop = run_sequential(SequentialSettings(8, 16), 40, [], "regex", measure, **KEY)
    assert stop.reason == "nothing to decide" and stop.n_items == 40


def test_the_gate_decides_with_the_same_tests_and_shows_the_sequence_apart():
    values = {("regex", "flip_rate"): ItemValues.of(np.ones(16), kind="binary")}
    looks = Looks(100, 8, 16)
    standing = look([flip()], values, "regex", looks)
    (verdict,) = evaluate(
        [flip()], {}, "regex", sequences=values, looks=looks, facet="option_order"
    )
    assert standing[0].decision == verdict.verdict == "fail"
    assert verdict.test == standing[0].test
    assert verdict.test.startswith("group-sequential binomial e = ")
    assert verdict.interval == "confidence_sequence" and verdict.ci == interval(np.ones(16), LEVEL)
    assert "confidence sequence (shown)" in verdict.describe()
    assert verdict.describe().endswith(f"-> fail by {verdict.test}")
    # a point rule is read on the estimate, with the bootstrap CI where there is one
    (point,) = evaluate([flip(rule="point")], {}, "regex", sequences=values, looks=looks)
    assert point.interval is None and point.test is None


# -- operating characteristics: the simulation table (batches of 8, cap 200, level 0.95,
# rule lower, ≥ 1,000 replications per row) ------------------------------------------------------
SETTINGS = SequentialSettings(batch_items=8, min_items=16)
CAP, REPS = 200, 1000


@pytest.mark.parametrize(
    "name, draw, threshold, low",
    [
        ("flip_rate 0.25 at the bound", bernoulli_items(0.25), flip(), 0.0),
        ("delta_flip_rate 0.05 at the bound", paired_items(0.10, 0.05), flip(0.05), -1.0),
    ],
)
@pytest.mark.slow
def test_at_the_bound_a_lower_gate_fails_in_at_most_5_percent_peeking_included(
    name, draw, threshold, low
):
    oc = simulate(draw, threshold, SETTINGS, CAP, REPS, seed=11, low=low)
    assert oc.fail_rate <= 0.05, name


@pytest.mark.parametrize(
    "name, draw, threshold, low",
    [
        ("flip_rate 0.60", bernoulli_items(0.60), flip(), 0.0),
        ("delta_flip_rate 0.40", paired_items(0.40, 0.0), flip(0.05), -1.0),
    ],
)
@pytest.mark.slow
def test_a_clear_violation_fails_in_99_percent_within_a_quarter_of_the_cap(
    name, draw, threshold, low
):
    oc = simulate(draw, threshold, SETTINGS, CAP, REPS, seed=12, low=low)
    assert oc.fail_rate >= 0.99 and oc.mean_items <= 0.25 * CAP, (name, oc.fail_rate)


@pytest.mark.parametrize(
    "name, draw, threshold, low",
    [
        ("flip_rate 0.05", bernoulli_items(0.05), flip(), 0.0),
        ("delta_flip_rate -0.15", paired_items(0.0, 0.15), flip(0.05), -1.0),
    ],
)
@pytest.mark.slow
def test_a_clear_conformance_passes_within_40_percent_of_the_cap(name, draw, threshold, low):
    oc = simulate(draw, threshold, SETTINGS, CAP, REPS, seed=13, low=low)
    assert oc.failed == 0 and oc.passed_decided >= 0.99 * REPS, name
    assert oc.mean_items <= 0.4 * CAP, (name, oc.mean_items)


# -- an order cell of a scripted model -----------------------------------------------------------
THRESHOLDS = """\
version: 1
level: 0.95
thresholds:
  - {metric: flip_rate, max: 0.25, rule: lower}
  - {metric: flip_rate, facet: same_ordering, max: 0.05, rule: lower}
  - {metric: delta_order, facet: same_ordering, max: 0.25, rule: lower}
"""


def sequential_auditor(tmp_path, backend, cap=40):
    auditor = make_auditor(tmp_path, backend)
    auditor.config.items_per_dataset = cap
    (tmp_path / "thresholds").mkdir(exist_ok=True)
    (tmp_path / "thresholds" / "default.yaml").write_text(THRESHOLDS)
    auditor.thresholds_dir = str(tmp_path / "thresholds")
    auditor.sequential = SequentialSettings(8, 16)
    return auditor


def test_a_control_holds_its_facet_while_its_thresholds_can_be_decided(tmp_path, monkeypatch):
    """A position-biased model flips on every item (flip_rate <= 0.25 fails at 16) and never on
    the same ordering. Its control's flip_rate <= 0.05 cannot pass within the cap of 40 (0.95^40
    = 0.13) but can still fail while items remain, so it holds the facet to the cap
    (docs/definitions.md §12.4); delta_order <= 0.25 (every item 1 − 0) fails at once. The
    control then draws exactly the facet's items and decides as the facet saw it. (The
    predictive rule is off here: it would release the facet at 16, as the next test shows.)"""
    monkeypatch.setattr("flipgate.metrics.threshold_tests.FUTILITY_CHANCE", 0.0)
    backend = ScriptedBackend()  # always the first label: every item flips
    auditor = sequential_auditor(tmp_path, backend)
    trials, perm = order_cells(auditor).cell_trials(
        "scripted", "arc_challenge", "same_ordering:option_order"
    )
    facet_stop = order_cells(auditor).stop("scripted", "arc_challenge", "option_order")
    control_stop = order_cells(auditor).stop(
        "scripted", "arc_challenge", "same_ordering:option_order"
    )
    assert facet_stop.n_items == 40 and facet_stop.reason == "decided"
    assert {d.metric: d.decided_at for d in facet_stop.thresholds} == {"flip_rate": 16}
    assert facet_stop.held_by == []  # flip_rate_same was never decided: it held to the cap
    assert control_stop.cap == 40 and control_stop.cap_from == "option_order"
    assert control_stop.test_cap == 40 and control_stop.looks == Looks(40, 8, 16)
    assert set(trials["item_id"]) == set(perm["item_id"]) and perm["item_id"].nunique() == 40
    decisions = {d.metric: d.decision for d in control_stop.thresholds}
    assert decisions == {"flip_rate": None, "delta_order": "fail"}
    assert backend.calls == (40 + 40) * 6
    # read back, not measured again (the stored stop and trials)
    again, _ = order_cells(auditor).cell_trials(
        "scripted", "arc_challenge", "same_ordering:option_order"
    )
    assert backend.calls == 80 * 6 and len(again) == len(trials)
    assert auditor.store.records(SequentialStop, "scripted")[0].model_id == "scripted"


def test_a_control_unlikely_to_be_decided_releases_its_facet(tmp_path):
    """The same model with predictive futility: after 16 items and no flip on the same ordering,
    the control's flip_rate <= 0.05 could still fail by the cap of 40 with predictive
    probability 0.013, after 24 only with 0.0006 (below 0.01): it stops holding the facet at
    24."""
    backend = ScriptedBackend()
    auditor = sequential_auditor(tmp_path, backend)
    order_cells(auditor).cell_trials("scripted", "arc_challenge", "same_ordering:option_order")
    facet_stop = order_cells(auditor).stop("scripted", "arc_challenge", "option_order")
    control_stop = order_cells(auditor).stop(
        "scripted", "arc_challenge", "same_ordering:option_order"
    )
    assert facet_stop.n_items == 24 == control_stop.n_items
    (flips,) = [d for d in control_stop.thresholds if d.metric == "flip_rate"]
    assert flips.decision is None and flips.futile
    assert flips.note is not None and flips.note.startswith("unlikely to be decided")
    assert backend.calls == (24 + 24) * 6


def test_a_facet_stops_when_its_control_is_decided_too(tmp_path):
    """With the control's flip_rate <= 0.5 (decidable: 16 items without a flip pass it) the
    facet stops at 16 with its control."""
    backend = ScriptedBackend()
    auditor = sequential_auditor(tmp_path, backend)
    (tmp_path / "thresholds" / "default.yaml").write_text(
        THRESHOLDS.replace("facet: same_ordering, max: 0.05", "facet: same_ordering, max: 0.5")
    )
    order_cells(auditor).cell_trials("scripted", "arc_challenge", "same_ordering:option_order")
    facet_stop = order_cells(auditor).stop("scripted", "arc_challenge", "option_order")
    control_stop = order_cells(auditor).stop(
        "scripted", "arc_challenge", "same_ordering:option_order"
    )
    assert facet_stop.n_items == 16 == control_stop.n_items and facet_stop.reason == "decided"
    assert {d.metric: d.decision for d in control_stop.thresholds} == {
        "flip_rate": "pass",
        "delta_order": "fail",
    }
    assert backend.calls == (16 + 16) * 6


def test_fixed_n_spends_the_cap(tmp_path):
    backend = ScriptedBackend()
    auditor = sequential_auditor(tmp_path, backend, cap=24)
    auditor.sequential = None
    trials = order_cells(auditor).measured_trials("scripted", "arc_challenge", "option_order")
    assert trials["item_id"].nunique() == 24 and backend.calls == 24 * 6
    assert order_cells(auditor).stop("scripted", "arc_challenge", "option_order") is None


# -- a regression case of sequential cells: the shared prefix --------------------------------------
def test_a_regression_of_sequential_cells_compares_the_prefix_both_versions_drew():
    from dataclasses import replace

    from support.regression_compare import R, arm, compare

    from flipgate.regression.compare import IncomparableCell

    stable, flipping = [0, 0, 0, 0], [0, 1, 2, 3]
    base = arm("A", {f"i{n:02d}": stable for n in range(40)})  # drew 40 items, none flips
    cand = arm("B", {f"i{n:02d}": flipping for n in range(24)}, sha="b" * 64)  # stopped at 24
    with pytest.raises(IncomparableCell, match="items 40 vs 24"):
        compare(base, cand)  # fixed-N cells must answer the same manifest
    comparison = compare(replace(base, sequential=True), replace(cand, sequential=True))
    overlap = comparison.overlap
    assert overlap.prefix and (overlap.baseline_items, overlap.shared_items) == (40, 24)
    assert comparison.primary.deltas["delta_flip_rate"].estimate == 1.0
    values = comparison.sequences()[R, "delta_flip_rate"]
    assert (values.n, values.low, values.high) == (24, -1.0, 1.0)
    (verdict,) = evaluate(
        [Threshold("delta_flip_rate", 0.05, "max", "lower", vs="baseline")],
        comparison.estimates(),
        R,
        sequences=comparison.sequences(),
    )
    # compared after both stopped: the exact paired test on the 24 pairs, at the full α
    assert verdict.verdict == "fail" and verdict.interval == "bootstrap"
    assert verdict.test.startswith("exact paired (unconditional) p = ")
    assert comparison.to_dict()["overlap"]["prefix"] is True
