"""The shipped thresholds carry a margin past "no effect" (docs/definitions.md §12.8): a bound at
the value that means no relation would leave a model with no relation undecided at any cap."""

import pytest
from support.paths import REPO

from flipgate.config import load_thresholds
from flipgate.gate.rules import evaluate
from flipgate.results import MetricEstimate

#: metric -> the value that means "no effect" (no relation, no change against a baseline)
NO_EFFECT = {
    "l_global": 0.5,
    "abstention_auc": 0.5,
    "consensus_gain": 0.0,
    "delta_flip_rate": 0.0,
    "delta_accuracy": 0.0,
    "delta_parse_rate": 0.0,
    "delta_delta_order": 0.0,
}


def shipped():
    return load_thresholds(REPO / "thresholds", "any-model").thresholds


def test_no_shipped_bound_sits_at_no_effect():
    checked = [t for t in shipped() if t.metric in NO_EFFECT and t.rule in ("lower", "upper")]
    assert {t.metric for t in checked} == set(NO_EFFECT)  # every one is shipped, and checked
    for t in checked:
        assert abs(t.bound - NO_EFFECT[t.metric]) >= 0.05, (t.metric, t.bound)
        assert t.why, f"{t.metric}: a margin without its why"


@pytest.mark.parametrize(
    "metric,estimate,ci,label",
    [
        # no relation, measured on enough sweeps: inside the margin, proven
        ("l_global", 0.5, (0.45, 0.55), "pass"),
        ("abstention_auc", 0.5, (0.45, 0.55), "pass"),
        # pointing the wrong way by more than the margin: proven
        ("l_global", 0.7, (0.62, 0.78), "fail"),
        ("abstention_auc", 0.3, (0.22, 0.38), "fail"),
        # the default audit's continuity cells (2 sweeps): too few to tell
        ("abstention_auc", 0.36, (0.19, 0.64), "inconclusive"),
    ],
)
def test_continuity_defaults_decide_a_model_with_no_relation(metric, estimate, ci, label):
    (t,) = [t for t in shipped() if t.metric == metric and t.facet == "continuity"]
    est = MetricEstimate(estimate=estimate, ci=ci, n_items=2)
    (v,) = evaluate([t], {"festa": {metric: est}}, "festa")
    assert v.verdict == label
    assert (v.undecided is not None) == (label == "inconclusive")
