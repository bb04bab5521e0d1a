"""docs/definitions.md §10: L_local, L_global, abstention AUC and the cell result, on hand-computed
sequences and planted sweeps."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from flipgate.metrics.continuity import (
    MINUS,
    PLUS,
    SweepPoint,
    abstention_auc,
    auc_undefined,
    continuity,
    l_global,
    l_local,
)

D = [4, 3, 2, 1, 0, 0, 1, 2, 3, 4]


def sweep(source: str, u: list[float], correct: list[bool] | None = None) -> list[SweepPoint]:
    correct = correct or [True] * 10
    return [
        SweepPoint(source, PLUS if i < 5 else MINUS, i % 5 + 1, D[i], u[i], correct[i])
        for i in range(10)
    ]


def test_constant_uncertainty_is_unrelated_to_distance():
    u = [0.3] * 10
    assert l_local(u[:5], u[5:]) == 0.0
    assert l_global(u, D) == 0.5  # rho undefined -> 0


def test_perfect_peak_is_zero_and_inverted_is_one():
    peak = [0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2]
    assert l_local(peak[:5], peak[5:]) == 0.0
    assert l_global(peak, D) == pytest.approx(0.0)
    inverted = [1 - x for x in peak]
    assert l_global(inverted, D) == pytest.approx(1.0)
    # every one of the 8 within-branch steps violates by 0.2
    assert l_local(inverted[:5], inverted[5:]) == pytest.approx(0.2)


def test_l_local_hand_computed():
    plus = [0.1, 0.5, 0.3, 0.6, 0.6]  # one violation on I+: 0.5 -> 0.3 (0.2)
    minus = [0.9, 0.4, 0.7, 0.2, 0.0]  # one on I-: 0.4 -> 0.7 (0.3)
    assert l_local(plus, minus) == pytest.approx((0.2 + 0.3) / 8)
    # the step between the branches (0.6 -> 0.9 here) has no expected sign: never counted
    assert l_local(plus, [0.0, 0.0, 0.0, 0.0, 0.0]) == pytest.approx(0.2 / 8)


def test_l_global_hand_computed_with_ties():
    u = [0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    # Spearman(u, -d) with average ranks, computed by hand via Pearson on the ranks
    ru = np.array([3.5, 3.5, 8.5, 3.5, 8.5, 8.5, 3.5, 3.5, 3.5, 3.5])
    rd = np.array([1.5, 3.5, 5.5, 7.5, 9.5, 9.5, 7.5, 5.5, 3.5, 1.5])
    rho = np.corrcoef(ru, rd)[0, 1]
    assert l_global(u, D) == pytest.approx((1 - rho) / 2)
    assert 0 < l_global(u, D) < 0.5


def test_auc_matches_scikit_learn_and_counts_ties_half():
    rng = np.random.default_rng(3)
    u = rng.integers(0, 5, size=200) / 4  # many ties
    wrong = rng.random(200) < 0.3 + 0.4 * u
    assert abstention_auc(u, wrong) == pytest.approx(roc_auc_score(wrong, u))
    # by hand: wrong {0.9, 0.5}, right {0.5, 0.1}: pairs 1 + 1 + 0.5 + 1 = 3.5 of 4
    assert abstention_auc([0.9, 0.5, 0.5, 0.1], [True, True, False, False]) == 0.875


def test_auc_undefined_when_accuracy_saturates():
    assert abstention_auc([0.1, 0.9], [False, False]) is None
    assert auc_undefined([True, True]) == "accuracy saturated: all 2 greedy answers right"
    assert auc_undefined([False] * 3) == "accuracy saturated: all 3 greedy answers wrong"
    assert auc_undefined([True, False]) is None


def test_cell_result_on_planted_sweeps():
    peak = [0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2]
    wrong_at_peak = [True] * 4 + [False, False] + [True] * 4  # errors where u is highest
    points = sweep("a", peak, wrong_at_peak) + sweep("b", [0.5] * 10, wrong_at_peak)
    result = continuity(points, n_boot=200)
    assert result.n_sources == 2 and result.n_inputs == 20
    assert result.l_global.estimate == pytest.approx(0.25)  # (0 + 0.5) / 2
    assert result.l_local.estimate == 0.0
    assert result.accuracy.estimate == pytest.approx(0.8)
    assert result.by_source["a"].l_global == pytest.approx(0.0)
    assert result.abstention_auc.estimate == pytest.approx(
        roc_auc_score([not c for c in wrong_at_peak] * 2, peak + [0.5] * 10)
    )
    lo, hi = result.l_global.ci
    assert lo <= 0.25 <= hi
    traj = result.trajectory
    assert [t.d for t in traj] == D and [t.branch for t in traj] == [PLUS] * 5 + [MINUS] * 5
    assert traj[4].u.estimate == pytest.approx(0.75)
    assert set(result.metrics()) == {
        "l_local",
        "l_global",
        "accuracy",
        "parse_rate",
        "abstention_auc",
    }


def test_saturated_cell_reports_auc_as_undefined_not_half():
    result = continuity(sweep("a", [0.1] * 10) + sweep("b", [0.2] * 10), n_boot=50)
    assert result.auc_undefined == "accuracy saturated: all 20 greedy answers right"
    assert result.abstention_auc.estimate is None
    assert "abstention_auc" not in result.metrics()


def test_sources_must_share_their_positions():
    short = [p for p in sweep("b", [0.1] * 10) if p.step < 5]
    with pytest.raises(ValueError, match="other positions"):
        continuity(sweep("a", [0.1] * 10) + short)
