"""docs/definitions.md §11 paired regression comparison: McNemar, compare_cell on planted trial
tables, the paired bootstrap, comparability checks and the regression gate."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binomtest
from support.regression_compare import (
    CONTROL,
    DATASET,
    FACET,
    PERMS,
    R,
    arm,
    compare,
    make_trials,
)

from flipgate.config import Threshold
from flipgate.gate.rules import evaluate
from flipgate.metrics import mcnemar
from flipgate.regression.compare import IncomparableCell, Overlap, compare_cell

# --------------------------------------------------------------------------------------------------
# trial-table builders


def flip_answers(flips, k: int = 4) -> dict[str, list[int]]:
    """Items i0000.. answering 0 everywhere, except one ordering answering 1 where ``flips`` is
    true."""
    return {f"i{j:04d}": [0] * (k - 1) + [1 if f else 0] for j, f in enumerate(flips)}


# --------------------------------------------------------------------------------------------------
# McNemar


@pytest.mark.parametrize(
    "b,c",
    [
        (10, 2),
        (2, 10),
        (5, 5),
        (0, 7),
        (7, 0),
        (1, 0),
        (0, 1),
        (3, 4),
        (13, 6),
        (25, 11),
        (40, 40),
        (0, 30),
    ],
)
def test_mcnemar_matches_scipy_binomtest(b, c):
    m = mcnemar(b, c)
    assert (m.b, m.c) == (b, c)
    assert m.p_two_sided == pytest.approx(
        binomtest(min(b, c), b + c, 0.5).pvalue, rel=1e-9, abs=1e-12
    )
    assert m.p_two_sided == pytest.approx(binomtest(b, b + c, 0.5).pvalue, rel=1e-9, abs=1e-12)
    assert m.p_regression == pytest.approx(
        binomtest(b, b + c, 0.5, alternative="greater").pvalue, rel=1e-9, abs=1e-12
    )
    assert 0 <= m.p_regression <= 1 and 0 <= m.p_two_sided <= 1


def test_mcnemar_hand_values():
    m = mcnemar(10, 2)  # P[Bin(12, ½) <= 2] = (1 + 12 + 66) / 4096
    assert m.p_two_sided == pytest.approx(2 * 79 / 4096) and round(m.p_two_sided, 4) == 0.0386
    assert m.p_regression == pytest.approx(79 / 4096) and round(m.p_regression, 4) == 0.0193
    assert mcnemar(2, 10).p_regression == pytest.approx(1 - 13 / 4096)  # P[X >= 2]
    assert mcnemar(5, 5).p_two_sided == 1.0  # b = c
    assert mcnemar(0, 6).p_two_sided == pytest.approx(2 / 64) and mcnemar(0, 6).p_regression == 1.0
    assert mcnemar(6, 0).p_regression == pytest.approx(1 / 64)


def test_mcnemar_no_discordant_items_and_bad_counts():
    m = mcnemar(0, 0)
    assert (m.b, m.c, m.p_two_sided, m.p_regression) == (0, 0, 1.0, 1.0)
    assert m.to_dict() == {"b": 0, "c": 0, "p_two_sided": 1.0, "p_regression": 1.0}
    with pytest.raises(ValueError):
        mcnemar(-1, 3)


# --------------------------------------------------------------------------------------------------
# compare_cell on planted tables (gold 0 everywhere, K = 4)

BASELINE = {
    "i1": [0, 0, 0, 0],  # stable, right
    "i2": [0, 1, 0, 0],  # flips, canonical right
    "i3": [1, 1, 1, 1],  # stable, wrong
    "i4": [0, 0, 0, 0],  # stable, right
    "i5": [2, 0, 0, 0],  # flips, canonical wrong
    "i6": [None, None, None, 0],  # 1 parsed: no flip verdict; canonical unparsed = wrong
    "i7": [0, 0, 0, 0],  # stable, right
}
CANDIDATE = {
    "i1": [0, 0, 1, 0],  # newly flipping
    "i2": [0, 0, 0, 0],  # fixed
    "i3": [1, 1, 1, 1],
    "i4": [None, 0, 0, 0],  # still stable (3 parsed); canonical unparsed: newly wrong
    "i5": [0, 0, 2, 0],  # still flips; canonical now right: newly right
    "i6": [0, 0, 0, 0],  # newly right; excluded from the flip delta (baseline parsed once)
    "i7": [0, 3, 0, 0],  # newly flipping
}


@pytest.mark.parametrize("unparsed_correct", [False, None])
def test_planted_facet_cell(unparsed_correct):
    cmp = compare(
        arm("base", BASELINE, unparsed_correct=unparsed_correct),
        arm("cand", CANDIDATE, unparsed_correct=unparsed_correct),
    )
    assert (cmp.candidate, cmp.baseline, cmp.cell, cmp.dataset, cmp.primary_readout) == (
        "cand",
        "base",
        FACET,
        DATASET,
        R,
    )
    d = cmp.primary
    s = d.deltas
    # flip: items parsed >= 2 in both = all but i6; baseline flips i2, i5; candidate i1, i5, i7
    assert s["delta_flip_rate"].n_items == 6
    assert s["delta_flip_rate"].estimate == pytest.approx(3 / 6 - 2 / 6)
    assert d.arms["delta_flip_rate"] == pytest.approx({"baseline": 2 / 6, "candidate": 3 / 6})
    assert (d.mcnemar["delta_flip_rate"].b, d.mcnemar["delta_flip_rate"].c) == (2, 1)
    assert d.items["newly_flipping"] == ["i1", "i7"] and d.items["fixed"] == ["i2"]
    # accuracy at condition 0 only, over all 7 items; unparsed = wrong
    assert s["delta_accuracy"].n_items == 7
    assert d.arms["delta_accuracy"] == pytest.approx({"baseline": 4 / 7, "candidate": 5 / 7})
    assert s["delta_accuracy"].estimate == pytest.approx(1 / 7)
    # "worse" for accuracy = right only in the baseline (i4); better: i5, i6
    assert (d.mcnemar["delta_accuracy"].b, d.mcnemar["delta_accuracy"].c) == (1, 2)
    assert d.items["newly_wrong"] == ["i4"] and d.items["newly_right"] == ["i5", "i6"]
    # parse rate: baseline i6 parsed 1/4, candidate i4 3/4
    assert d.arms["delta_parse_rate"] == pytest.approx(
        {"baseline": 6.25 / 7, "candidate": 6.75 / 7}
    )
    assert s["delta_parse_rate"].estimate == pytest.approx(0.5 / 7)
    assert "delta_parse_rate" not in d.mcnemar and "delta_delta_order" not in s
    for metric in ("delta_flip_rate", "delta_accuracy", "delta_parse_rate"):
        lo, hi = s[metric].ci
        assert lo <= s[metric].estimate <= hi
        assert s[metric].draws.shape == (500,)
    assert cmp.overlap == Overlap(7, 7, 7, 28, 28, 28, False) and cmp.overlap.complete
    json.dumps(cmp.to_dict())  # the report section is plain JSON


def test_accuracy_reads_the_canonical_ordering_only():
    # right at every non-canonical ordering but wrong at condition 0 -> wrong; and vice versa
    base = {"a": [1, 0, 0, 0], "b": [0, 1, 1, 1]}
    cand = {"a": [0, 1, 1, 1], "b": [1, 0, 0, 0]}
    d = compare(arm("base", base), arm("cand", cand)).primary
    assert d.arms["delta_accuracy"] == {"baseline": 0.5, "candidate": 0.5}
    assert d.items["newly_wrong"] == ["b"] and d.items["newly_right"] == ["a"]
    assert (d.mcnemar["delta_accuracy"].b, d.mcnemar["delta_accuracy"].c) == (1, 1)


def test_per_readout_deltas():
    two = (R, "letter_logprob")
    base = arm("base", {"a": [0, 0, 0], "b": [0, 0, 0]}, readouts=two)
    cand = arm("cand", {"a": [0, 1, 0], "b": [0, 0, 0]}, readouts=two)
    cmp = compare(base, cand)
    assert set(cmp.readouts) == set(two) and set(cmp.estimates()) == set(two)
    assert all(cmp.readouts[r].deltas["delta_flip_rate"].estimate == 0.5 for r in two)
    # only the readouts both versions have are compared
    cmp = compare(
        arm("base", {"a": [0, 0, 0]}, readouts=two), arm("cand", {"a": [0, 0, 0]}, readouts=(R,))
    )
    assert set(cmp.readouts) == {R}


def test_control_cell_delta_delta_order():
    # per item Δ_order = flip_perm − flip_same; baseline [0, 1, 1, 0] (0.5),
    # candidate [1, 1, 1, 1] (1.0)
    base_perm = {"q1": [0, 1, 0, 0], "q2": [0, 1, 0, 0], "q3": [0, 1, 0, 0], "q4": [0, 0, 0, 0]}
    base_same = {"q1": [0, 2, 0, 0], "q2": [0, 0, 0, 0], "q3": [0, 0, 0, 0], "q4": [0, 0, 0, 0]}
    cand_perm = {"q1": [0, 1, 0, 0], "q2": [0, 1, 0, 0], "q3": [0, 1, 0, 0], "q4": [0, 0, 3, 0]}
    cand_same = {"q1": [0, 0, 0, 0], "q2": [0, 0, 0, 0], "q3": [0, 0, 0, 0], "q4": [0, 0, 0, 0]}
    base = arm("base", base_same, same_ordering=True, perm=make_trials(base_perm))
    cand = arm("cand", cand_same, same_ordering=True, perm=make_trials(cand_perm))
    cmp = compare(base, cand, cell=CONTROL)
    d = cmp.primary
    s = d.deltas
    assert s["delta_delta_order"].estimate == pytest.approx(0.5)
    assert s["delta_delta_order"].n_items == 4
    assert d.arms["delta_delta_order"] == pytest.approx({"baseline": 0.5, "candidate": 1.0})
    lo, hi = s["delta_delta_order"].ci
    assert lo <= 0.5 <= hi and hi <= 1.0
    # the flip delta of a control cell is on its own (same-ordering) trials
    assert s["delta_flip_rate"].estimate == pytest.approx(-0.25)
    assert d.items["fixed"] == ["q1"] and d.items["newly_flipping"] == []
    assert "delta_accuracy" not in s and "newly_wrong" not in d.items
    # Δ_order needs both versions' permuted trials
    with pytest.raises(IncomparableCell, match="permuted facet"):
        compare(arm("base", base_same, same_ordering=True), cand, cell=CONTROL)
    # and the permuted trials must be comparable too
    moved = make_trials(cand_perm, perms={("q2", 2): PERMS[7]})
    with pytest.raises(IncomparableCell, match="orderings"):
        compare(base, arm("cand", cand_same, same_ordering=True, perm=moved), cell=CONTROL)


# --------------------------------------------------------------------------------------------------
# paired bootstrap


def test_paired_bootstrap_recovers_planted_difference():
    n = 400
    base_flips = np.zeros(n, bool)
    base_flips[:100] = True  # baseline flips on 100 items (0.25)
    cand_flips = base_flips.copy()
    cand_flips[:20] = False  # fixed: 20
    cand_flips[100:160] = True  # newly flipping: 60
    true_delta = (60 - 20) / n  # 0.10
    d = compare(
        arm("base", flip_answers(base_flips)), arm("cand", flip_answers(cand_flips)), n_boot=2000
    ).primary
    est, (lo, hi) = d.deltas["delta_flip_rate"].estimate, d.deltas["delta_flip_rate"].ci
    assert est == pytest.approx(true_delta)
    assert lo < true_delta < hi and lo > 0
    # paired: half-width ≈ 1.96·sd(d_i)/√n = 0.043 (an unpaired bootstrap would give ≈ 0.064)
    sd = np.sqrt((80 / n) - true_delta**2)
    assert (hi - lo) / 2 == pytest.approx(1.96 * sd / np.sqrt(n), rel=0.15)
    assert (d.mcnemar["delta_flip_rate"].b, d.mcnemar["delta_flip_rate"].c) == (60, 20)
    assert d.mcnemar["delta_flip_rate"].p_regression < 1e-5
    assert len(d.items["newly_flipping"]) == 60 and len(d.items["fixed"]) == 20


def test_paired_bootstrap_no_difference_contains_zero():
    n = 400
    base_flips = np.zeros(n, bool)
    base_flips[:100] = True
    cand_flips = base_flips.copy()
    cand_flips[:30] = False  # 30 fixed and 30 newly flipping: no net change
    cand_flips[100:130] = True
    d = compare(
        arm("base", flip_answers(base_flips)), arm("cand", flip_answers(cand_flips)), n_boot=2000
    ).primary
    lo, hi = d.deltas["delta_flip_rate"].ci
    assert d.deltas["delta_flip_rate"].estimate == 0 and lo < 0 < hi
    assert d.mcnemar["delta_flip_rate"].p_two_sided == 1.0
    # identical answers: every draw is 0
    same = compare(
        arm("base", flip_answers(base_flips)), arm("cand", flip_answers(base_flips))
    ).primary
    assert same.deltas["delta_flip_rate"].ci == (0.0, 0.0)


def test_bootstrap_is_seeded():
    base, cand = arm("base", BASELINE), arm("cand", CANDIDATE)
    one, two = (
        compare(base, cand, seed=7).primary.deltas,
        compare(base, cand, seed=7).primary.deltas,
    )
    assert np.array_equal(one["delta_flip_rate"].draws, two["delta_flip_rate"].draws)


# --------------------------------------------------------------------------------------------------
# comparability

FIVE = {f"i{j}": [0, 0, 0, j % 2] for j in range(1, 6)}


def test_different_items_are_incomparable():
    other = {**{k: v for k, v in FIVE.items() if k != "i5"}, "i9": [0, 0, 0, 0]}
    with pytest.raises(IncomparableCell, match=r"items 5 vs 5 \(4 shared\)") as err:
        compare(arm("base", FIVE), arm("cand", other))
    assert "--baseline-partial" in str(err.value) and "cand vs base" in str(err.value)
    with pytest.raises(IncomparableCell, match=r"items 5 vs 3"):
        compare(arm("base", FIVE), arm("cand", dict(list(FIVE.items())[:3])))


def test_different_orderings_are_incomparable():
    moved = arm("cand", FIVE, perms={("i2", 3): PERMS[9]})
    with pytest.raises(IncomparableCell, match=r"orderings differ on 2 \(item, ordering\) pairs"):
        compare(arm("base", FIVE), moved)


def test_different_k_is_incomparable():
    six = {k: v + [0, 0] for k, v in FIVE.items()}
    with pytest.raises(IncomparableCell, match=r"K 4 vs 6"):
        compare(arm("base", FIVE), arm("cand", six))


def test_different_manifest_is_incomparable():
    with pytest.raises(IncomparableCell, match=r"manifest sha256 aaaaaaaaaaaa vs bbbbbbbbbbbb"):
        compare(arm("base", FIVE), arm("cand", FIVE, sha="b" * 64))
    # an unknown manifest on either side is not held against the comparison
    assert compare(arm("base", FIVE, sha=None), arm("cand", FIVE, sha="b" * 64)).overlap.complete


def test_partial_compares_shared_items_only():
    other = {**{k: v for k, v in FIVE.items() if k != "i5"}, "i9": [0, 1, 0, 0]}
    cmp = compare(arm("base", FIVE), arm("cand", other), partial=True)
    assert cmp.overlap == Overlap(5, 5, 4, 20, 20, 16, True) and not cmp.overlap.complete
    s = cmp.primary.deltas
    assert s["delta_flip_rate"].n_items == 4 and s["delta_accuracy"].n_items == 4
    assert s["delta_flip_rate"].estimate == 0  # i1..i4 answer alike in both


def test_partial_compares_shared_orderings_only():
    base = {"a": [0, 0, 0, 1], "b": [0, 0, 0, 0], "c": [0, 1, 0, 0]}
    cand = {"a": [0, 0, 0, 0], "b": [0, 0, 0, 0], "c": [0, 0, 0, 0]}
    # ordering 3 of item a differs: its only flip is dropped, so a is not "fixed"
    cmp = compare(arm("base", base), arm("cand", cand, perms={("a", 3): PERMS[9]}), partial=True)
    assert cmp.overlap == Overlap(3, 3, 3, 12, 12, 11, True)
    d = cmp.primary
    assert d.items["fixed"] == ["c"]
    assert d.arms["delta_flip_rate"] == pytest.approx({"baseline": 1 / 3, "candidate": 0.0})
    # different K: the shared orderings are the first 4
    six = {k: v + [2, 2] for k, v in cand.items()}
    cmp = compare(arm("base", base), arm("cand", six), partial=True)
    assert cmp.overlap == Overlap(3, 3, 3, 12, 18, 12, True)
    assert (
        cmp.primary.arms["delta_flip_rate"]["candidate"] == 0.0
    )  # the 2s at orderings 4, 5 are unused


def test_partial_with_nothing_shared():
    with pytest.raises(IncomparableCell, match="share no"):
        compare(arm("base", {"a": [0, 0]}), arm("cand", {"b": [0, 0]}), partial=True)


def test_primary_readout_missing_from_baseline():
    base = arm("base", FIVE, readouts=(R,))
    cand = arm("cand", FIVE, readouts=("letter_logprob", R))
    with pytest.raises(
        IncomparableCell, match=r"readout 'letter_logprob'.*baseline's readouts \(regex\)"
    ):
        compare_cell(base, cand, FACET, DATASET, "letter_logprob")


# --------------------------------------------------------------------------------------------------
# gate


FLIP = Threshold("delta_flip_rate", 0.05, "max", "lower", vs="baseline")
ACC = Threshold("delta_accuracy", -0.05, "min", "lower", vs="baseline")


def _gate(base_flips, cand_flips, thresholds=(FLIP,)):
    cmp = compare(
        arm("base", flip_answers(base_flips)), arm("cand", flip_answers(cand_flips)), n_boot=1000
    )
    return {v.metric: v for v in evaluate(list(thresholds), cmp.estimates(), cmp.primary_readout)}


def test_gate_fails_a_big_regression_and_passes_no_change():
    base = np.arange(200) < 20  # baseline flip rate 0.10
    worse = np.arange(200) < 120  # candidate 0.60: Δ = +0.50
    v = _gate(base, worse)["delta_flip_rate"]
    assert v.verdict == "fail" and v.outcome == "fail"
    assert v.estimate == pytest.approx(0.5) and v.ci[0] > 0.05
    assert v.p_value is not None and v.p_value < 0.01
    v = _gate(base, base, (FLIP, ACC))
    assert v["delta_flip_rate"].verdict == "pass" and v["delta_flip_rate"].outcome == "pass"
    assert v["delta_accuracy"].outcome == "pass"


def test_gate_straddling_ci_passes_with_a_warning():
    base = np.zeros(100, bool)
    base[:20] = True
    cand = base.copy()
    cand[:4] = False
    cand[20:30] = True  # Δ = (10 − 4)/100 = 0.06, CI straddles 0.05
    v = _gate(base, cand)["delta_flip_rate"]
    assert v.estimate == pytest.approx(0.06) and v.ci[0] < 0.05 < v.ci[1]
    assert v.verdict == "inconclusive" and v.outcome == "warn"


def test_gate_on_accuracy_regression():
    n = 200
    base = {f"i{j:03d}": [0, 0, 0, 0] for j in range(n)}
    cand = {
        k: ([1, 0, 0, 0] if j < 100 else v) for j, (k, v) in enumerate(base.items())
    }  # 50 % newly wrong
    cmp = compare(arm("base", base), arm("cand", cand), n_boot=1000)
    assert cmp.primary.deltas["delta_accuracy"].estimate == pytest.approx(-0.5)
    assert len(cmp.primary.items["newly_wrong"]) == 100
    (v,) = evaluate([ACC], cmp.estimates(), R)
    assert v.verdict == "fail" and v.outcome == "fail"
