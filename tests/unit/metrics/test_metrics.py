import math

import numpy as np
import pandas as pd
import pytest

from flipgate import metrics as M


def test_any_flip_ignores_parse_failures():
    assert M.any_flip([1, 1, 1]) == 0
    assert M.any_flip([1, 2, 1]) == 1
    assert M.any_flip([1, None, 1, None]) == 0


def test_flip_rate_excludes_items_with_under_two_parsed():
    assert M.flip_rate([[0, 0], [0, 1], [1, None], [2, 2, 3]]) == pytest.approx(2 / 3)


def test_osi_and_entropy_hand_computed():
    # answers 0,0,0,1 over C=4 classes: H = -(.75 ln .75 + .25 ln .25)
    h = -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))
    assert M.answer_entropy([0, 0, 0, 1]) == pytest.approx(h)
    assert M.osi([0, 0, 0, 1], 4) == pytest.approx(1 - h / math.log(4))
    assert M.osi([0, 0, 0], 4) == 1.0
    assert M.osi([0, 1, 2, 3], 4) == pytest.approx(0.0)


def test_pairwise_disagreement_hand_computed():
    # answers A A B: ordered pairs 6, differing: (A,B)x2 + (B,A)x2 = 4
    assert M.pairwise_disagreement(["A", "A", "B"]) == pytest.approx(4 / 6)
    assert M.pairwise_disagreement(["A", "B", "C"]) == 1.0
    assert math.isnan(M.pairwise_disagreement(["A", None]))


def test_parse_rate_and_accuracy():
    assert M.parse_rate([1, None, 2, None]) == 0.5
    assert M.accuracy([True, False, None, True]) == 0.5


def test_acc_swing_hand_computed():
    df = pd.DataFrame(
        {"condition": [0, 0, 1, 1, 2, 2], "correct": [True, True, True, False, False, None]}
    )
    assert M.acc_swing(df) == pytest.approx(1.0 - 0.0)


def test_delta_order_and_excess_share():
    assert M.delta_order(0.3, 0.1) == pytest.approx(0.2)
    assert M.delta_order(0.1, 0.3) == pytest.approx(-0.2)  # may be negative
    assert M.ordering_excess_share(0.4, 0.1) == pytest.approx(0.75)
    assert math.isnan(M.ordering_excess_share(0.0, 0.0))


def test_item_table_columns():
    df = pd.DataFrame(
        {
            "item_id": ["a"] * 3 + ["b"] * 3,
            "answer": [0, 0, 1, 2, None, None],
            "correct": [True, True, False, None, None, None],
            "n_classes": [4] * 6,
        }
    )
    t = M.item_table(df).set_index("item_id")
    assert t.loc["a", "any_flip"] == 1 and pd.isna(t.loc["b", "any_flip"])
    assert t.loc["b", "parse_rate"] == pytest.approx(1 / 3)


def test_bootstrap_recovers_planted_rate():
    rng = np.random.default_rng(7)
    flips = rng.random(400) < 0.3
    est, lo, hi = M.bootstrap_ci(flips.astype(float), n=2000, seed=1)
    assert lo < 0.3 < hi
    se = math.sqrt(0.3 * 0.7 / 400)
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.2)


def test_bootstrap_is_seeded_and_clustered():
    values = [1, 1, 1, 0, 0, 0, 1, 0]
    cluster = ["a", "a", "a", "b", "b", "b", "c", "c"]
    assert M.bootstrap_ci(values, cluster, seed=3) == M.bootstrap_ci(values, cluster, seed=3)
    # whole-cluster resampling: the clustered CI is wider than the trial-level one
    _, lo_c, hi_c = M.bootstrap_ci(values, cluster, n=2000, seed=3)
    _, lo_t, hi_t = M.bootstrap_ci(values, None, n=2000, seed=3)
    assert hi_c - lo_c > hi_t - lo_t


def test_paired_bootstrap_covers_planted_difference():
    rng = np.random.default_rng(3)
    a = (rng.random(500) < 0.5).astype(float)
    b = np.where(rng.random(500) < 0.6, a, 0.0)  # b is a thinned copy of a: E[a-b] = 0.5*0.4 = 0.2
    est, lo, hi = M.paired_bootstrap_ci(a, b, n=2000, seed=2)
    assert lo < 0.2 < hi
    assert est == pytest.approx(a.mean() - b.mean())
