import pytest

from flipgate.config import Threshold
from flipgate.gate import decide, evaluate


def t(rule, bound=0.2, direction="max"):
    return Threshold("flip_rate", bound, direction, rule)


@pytest.mark.parametrize("rule,est,lo,hi,expected", [
    ("point", 0.19, 0.0, 0.5, "pass"),
    ("point", 0.21, 0.0, 0.5, "fail"),
    ("upper", 0.1, 0.05, 0.15, "pass"),
    ("upper", 0.1, 0.05, 0.3, "inconclusive"),
    ("upper", 0.4, 0.3, 0.5, "fail"),
    ("lower", 0.1, 0.05, 0.3, "inconclusive"),
    ("lower", 0.1, 0.05, 0.15, "pass"),
    ("lower", 0.3, 0.25, 0.35, "fail"),
    ("lower", 0.25, 0.15, 0.35, "inconclusive"),
    ("warn", 0.5, 0.4, 0.6, "warn"),
    ("warn", 0.1, 0.0, 0.6, "pass"),
])
def test_decision_rules(rule, est, lo, hi, expected):
    assert decide(t(rule), est, lo, hi) == expected


def test_min_direction():
    assert decide(t("upper", 0.9, "min"), 0.97, 0.95, 0.99) == "pass"
    assert decide(t("lower", 0.9, "min"), 0.5, 0.4, 0.6) == "fail"


def test_missing_estimate_and_point_fallback_without_ci():
    assert decide(t("lower"), float("nan")) == "missing"
    assert decide(t("lower"), 0.3, None, None) == "fail"


def test_evaluate_picks_readout_block():
    summary = {"regex": {"flip_rate": {"estimate": 0.1, "ci": [0.05, 0.15]}},
               "letter_logprob": {"flip_rate": {"estimate": 0.5, "ci": [0.4, 0.6]}}}
    th = [Threshold("flip_rate", 0.2, "max", "lower"),
          Threshold("flip_rate", 0.2, "max", "lower", readout="letter_logprob")]
    verdicts = [v["verdict"] for v in evaluate(th, summary, "regex")]
    assert verdicts == ["pass", "fail"]


def _verdict(verdict):
    return {"threshold": "flip_rate <= 0.2 (lower)", "source": "default.yaml#0", "estimate": 0.2,
            "ci": [0.1, 0.3], "verdict": verdict}


@pytest.mark.parametrize("on_inconclusive,outcome", [("xfail", "xfail"), ("fail", "fail"), ("warn", "warning")])
def test_inconclusive_is_reported_not_hidden(on_inconclusive, outcome):
    from _pytest.outcomes import Failed, XFailed

    from flipgate.suite import InconclusiveThreshold, assert_verdicts

    if outcome == "xfail":
        with pytest.raises(XFailed, match="inconclusive"):
            assert_verdicts([_verdict("inconclusive")], on_inconclusive)
    elif outcome == "fail":
        with pytest.raises(Failed, match="flip_rate <= 0.2"):
            assert_verdicts([_verdict("inconclusive")], on_inconclusive)
    else:
        with pytest.warns(InconclusiveThreshold, match="CI \\[0.100, 0.300\\]"):
            assert_verdicts([_verdict("inconclusive")], on_inconclusive)


def test_failed_and_missing_thresholds_fail_warn_rule_warns():
    from _pytest.outcomes import Failed

    from flipgate.suite import ThresholdWarning, assert_verdicts

    with pytest.raises(Failed, match="-> fail"):
        assert_verdicts([_verdict("pass"), _verdict("fail")], "warn")
    with pytest.raises(Failed, match="-> missing"):
        assert_verdicts([_verdict("missing")], "warn")
    with pytest.warns(ThresholdWarning):
        assert_verdicts([_verdict("warn")], "warn")


def test_evaluate_attaches_bootstrap_p_value():
    import numpy as np

    from flipgate.summary import Summary

    block = Summary()
    block.add("flip_rate", 0.5, np.array([0.4, 0.5, 0.6, 0.7]), 0.95)
    (v,) = evaluate([Threshold("flip_rate", 0.45, "max", "lower")], {"regex": block}, "regex")
    assert v["p_value"] == pytest.approx((1 + 1) / 5)
