"""K-policies, K=2 screen, K-ablation and BH on hand-computed cases."""

import math

import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from flipgate import metrics as M


def table():
    rows = []
    spec = {
        "a": ([0, 0, 0, 0, 0, 0], 0),
        "b": ([1, 0, 1, 1, 0, 1], 0),
        "c": ([2, None, 2, 3, 3, 2], 3),
    }
    for item, (answers, gold) in spec.items():
        for o, a in enumerate(answers):
            rows.append(
                {
                    "item_id": item,
                    "condition": o,
                    "answer": a,
                    "correct": a is not None and a == gold,
                }
            )
    return pd.DataFrame(rows)


def test_k_policies_hand_computed():
    rows = {r["policy"].split()[0]: r for r in M.k_policies(table())}
    assert rows["P1"]["accuracy"] == pytest.approx(1 / 3) and rows["P1"]["cost"] == 1
    assert rows["P2"]["accuracy"] == pytest.approx(1 / 3)
    assert rows["P2"]["selective_accuracy"] == 1.0 and rows["P2"]["coverage"] == pytest.approx(
        1 / 3
    )
    assert rows["P3"]["accuracy"] == pytest.approx(1 / 3) and rows["P3"]["coverage"] == 1.0
    assert rows["P4"]["k"] == 6 and rows["P4"]["accuracy"] == pytest.approx(1 / 3)
    assert rows["P5"]["accuracy"] == pytest.approx(1 / 3) and rows["P6"]["accuracy"] == 1.0
    assert [r["cost"] for r in M.k_policies(table())] == [1, 2, 3, 6, 6, 6]


def test_majority_tie_abstains():
    df = pd.DataFrame(
        {
            "item_id": ["x"] * 4,
            "condition": range(4),
            "answer": [0, 1, 0, 1],
            "correct": [True, False, True, False],
        }
    )
    p4 = [r for r in M.k_policies(df) if r["policy"].startswith("P4")][0]
    assert p4["coverage"] == 0.0 and math.isnan(p4["selective_accuracy"])


def test_k2_screen_recall_and_ablation():
    assert M.k2_screen_recall(table()) == pytest.approx(1 / 2)
    ablation = M.k_ablation(table())
    assert ablation[2] == pytest.approx(1 / 2) and ablation[3] == pytest.approx(1 / 3)
    assert ablation[6] == pytest.approx(2 / 3)


def test_benjamini_hochberg_matches_statsmodels():
    p = [0.01, 0.04, 0.03, 0.2, float("nan")]
    adjusted = M.benjamini_hochberg(p)
    assert adjusted[:4] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert adjusted[:4] == pytest.approx(list(multipletests(p[:4], method="fdr_bh")[1]))
    assert math.isnan(adjusted[4])


def test_bootstrap_p_value():
    assert M.bootstrap_p_value([0.1, 0.2, 0.3, 0.4], 0.25, "max") == pytest.approx(3 / 5)
    assert M.bootstrap_p_value([0.1, 0.2, 0.3, 0.4], 0.25, "min") == pytest.approx(3 / 5)
    assert M.bootstrap_p_value([0.5] * 99, 0.25, "max") == pytest.approx(0.01)
