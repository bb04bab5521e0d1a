import pytest

from flipgate.config import Threshold
from flipgate.gate.rules import decide, evaluate, outcome
from flipgate.results import MetricEstimate, Verdict


def t(rule, bound=0.2, direction="max"):
    return Threshold("flip_rate", bound, direction, rule)


@pytest.mark.parametrize(
    "rule,est,lo,hi,expected",
    [
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
    ],
)
def test_decision_rules(rule, est, lo, hi, expected):
    assert decide(t(rule), est, lo, hi) == expected


def test_min_direction():
    assert decide(t("upper", 0.9, "min"), 0.97, 0.95, 0.99) == "pass"
    assert decide(t("lower", 0.9, "min"), 0.5, 0.4, 0.6) == "fail"


def test_missing_estimate_and_point_fallback_without_ci():
    assert decide(t("lower"), float("nan")) == "missing"
    assert decide(t("lower"), 0.3, None, None) == "fail"


def test_evaluate_picks_readout_block():
    summary = {
        "regex": {"flip_rate": MetricEstimate(estimate=0.1, ci=(0.05, 0.15))},
        "letter_logprob": {"flip_rate": MetricEstimate(estimate=0.5, ci=(0.4, 0.6))},
    }
    th = [
        Threshold("flip_rate", 0.2, "max", "lower"),
        Threshold("flip_rate", 0.2, "max", "lower", readout="letter_logprob"),
    ]
    verdicts = [v.verdict for v in evaluate(th, summary, "regex")]
    assert verdicts == ["pass", "fail"]


def _verdict(verdict, rule="lower", on_inconclusive="by_rule"):
    return Verdict(
        threshold=f"flip_rate <= 0.2 ({rule})",
        metric="flip_rate",
        bound=0.2,
        direction="max",
        level=0.95,
        readout="regex",
        source="default.yaml#0",
        estimate=0.2,
        ci=(0.1, 0.3),
        verdict=verdict,
        rule=rule,
        outcome=outcome(verdict, rule, on_inconclusive),
    )


# docs/definitions.md §5 grid: bound 0.2 (max), CIs inside / straddling / outside, estimates inside
# and outside
GRID = [
    (est, lo, hi)
    for est, lo, hi in [
        (0.1, 0.05, 0.15),
        (0.1, 0.05, 0.3),
        (0.25, 0.1, 0.3),
        (0.3, 0.25, 0.35),
        (0.2, 0.2, 0.2),
        (0.15, 0.2, 0.25),
    ]
]


@pytest.mark.parametrize("est,lo,hi", GRID)
def test_upper_and_lower_differ_exactly_on_straddling_cis(est, lo, hi):
    up, low = decide(t("upper"), est, lo, hi), decide(t("lower"), est, lo, hi)
    assert up == low  # the label says what the CI shows ...
    go_up, go_low = outcome(up, "upper"), outcome(low, "lower")  # ... the rule what the gate does
    straddles = lo <= 0.2 < hi
    if straddles:
        assert (up, go_up, go_low) == ("inconclusive", "fail", "warn")
    else:
        assert go_up == go_low == ("pass" if hi <= 0.2 else "fail")


@pytest.mark.parametrize(
    "setting,expected",
    [
        ("by_rule", ("fail", "warn")),
        ("warn", ("warn", "warn")),
        ("xfail", ("xfail", "xfail")),
        ("fail", ("fail", "fail")),
    ],
)
def test_on_inconclusive_overrides_both_rules(setting, expected):
    assert (
        outcome("inconclusive", "upper", setting),
        outcome("inconclusive", "lower", setting),
    ) == expected
    assert (
        outcome("pass", "upper", setting) == "pass" and outcome("fail", "lower", setting) == "fail"
    )


def test_parse_rate_upper_with_straddling_ci_fails_the_release():
    """The issue's case: parse_rate >= 0.9 (upper), CI [0.85, 0.95] must not pass."""
    (v,) = evaluate(
        [Threshold("parse_rate", 0.9, "min", "upper")],
        {"regex": {"parse_rate": MetricEstimate(estimate=0.9, ci=(0.85, 0.95))}},
        "regex",
    )
    assert (v.verdict, v.outcome) == ("inconclusive", "fail")


def test_ci_is_recomputed_at_the_thresholds_level():
    import numpy as np

    draws = np.linspace(0.0, 1.0, 1001)  # quantiles are the levels themselves
    block = {"flip_rate": MetricEstimate.from_draws(0.5, draws, 0.95)}
    th = [
        Threshold("flip_rate", 0.2, "max", "lower", level=0.5),
        Threshold("flip_rate", 0.2, "max", "lower", level=0.9),
    ]
    ci50, ci90 = (v.ci for v in evaluate(th, {"regex": block}, "regex"))
    assert ci50 == pytest.approx([0.25, 0.75]) and ci90 == pytest.approx([0.05, 0.95])
    assert block["flip_rate"].ci == pytest.approx([0.025, 0.975])  # the reported CI is untouched


@pytest.mark.parametrize(
    "setting,expected",
    [("xfail", "xfail"), ("fail", "fail"), ("warn", "warning"), ("by_rule", "warning")],
)
def test_inconclusive_is_reported_not_hidden(setting, expected):
    from _pytest.outcomes import Failed, XFailed

    from flipgate.suite.cell_loop import InconclusiveThreshold, assert_verdicts

    verdicts = [_verdict("inconclusive", "lower", setting)]
    if expected == "xfail":
        with pytest.raises(XFailed, match="inconclusive"):
            assert_verdicts(verdicts, allow_ungated=False)
    elif expected == "fail":
        with pytest.raises(Failed, match="flip_rate <= 0.2"):
            assert_verdicts(verdicts, allow_ungated=False)
    else:
        with pytest.warns(InconclusiveThreshold, match="CI \\[0.100, 0.300\\]"):
            assert_verdicts(verdicts, allow_ungated=False)


def test_upper_inconclusive_fails_as_not_proven():
    from _pytest.outcomes import Failed

    from flipgate.suite.cell_loop import assert_verdicts

    with pytest.raises(Failed, match="not proven"):
        assert_verdicts([_verdict("inconclusive", "upper")], allow_ungated=False)


def test_failed_and_missing_thresholds_fail_warn_rule_warns():
    from _pytest.outcomes import Failed

    from flipgate.suite.cell_loop import ThresholdWarning, assert_verdicts

    with pytest.raises(Failed, match="-> fail"):
        assert_verdicts([_verdict("pass"), _verdict("fail")], allow_ungated=False)
    with pytest.raises(Failed, match="-> missing"):
        assert_verdicts([_verdict("missing")], allow_ungated=False)
    with pytest.warns(ThresholdWarning):
        assert_verdicts([_verdict("warn", "warn"), _verdict("pass")], allow_ungated=False)


def test_a_cell_no_threshold_can_fail_is_not_a_pass():
    """No verdict, or only ``rule: warn`` ones: nothing could fail the cell, so it fails with the
    usage-error prefix, or is skipped with the reason under --allow-ungated."""
    from _pytest.outcomes import Failed, Skipped

    from flipgate.suite.cell_loop import NOTHING_GATED, UNGATED, assert_verdicts

    for verdicts in ([], [_verdict("pass", "warn")], [_verdict("warn", "warn")]):
        with pytest.raises(Failed, match=NOTHING_GATED) as failed:
            assert_verdicts(verdicts, allow_ungated=False)
        assert "--allow-ungated" in str(failed.value)
        with pytest.raises(Skipped, match=UNGATED.replace("(", "\\(").replace(")", "\\)")):
            assert_verdicts(verdicts, allow_ungated=True)


def test_evaluate_attaches_bootstrap_p_value():
    import numpy as np

    block = {"flip_rate": MetricEstimate.from_draws(0.5, np.array([0.4, 0.5, 0.6, 0.7]), 0.95)}
    (v,) = evaluate([Threshold("flip_rate", 0.45, "max", "lower")], {"regex": block}, "regex")
    assert v.p_value == pytest.approx((1 + 1) / 5)


def test_odi_threshold_reads_the_hdi_at_its_own_level():
    import numpy as np

    from flipgate.odi.fit import _interval
    from flipgate.odi.gate import targets

    draws = np.random.default_rng(0).normal(0.5, 0.1, 4000)
    interval = _interval(draws, 0.89, ci_level=0.95, gate_levels=(0.5, 0.95))
    analysis = {"facets": {"option_order": {"sigma_pi": interval, "sigma_delta": interval}}}
    at50 = targets(analysis, Threshold("sigma_pi", 0.5, "max", facet="odi", level=0.5))[
        "option_order"
    ]["ci"]
    at95 = targets(analysis, Threshold("sigma_pi", 0.5, "max", facet="odi", level=0.95))[
        "option_order"
    ]["ci"]
    assert at50[1] - at50[0] < at95[1] - at95[0]
    assert at95 == interval["ci"] and at50 == interval["cis"]["0.5"]


def test_envelope_gate_analysis_at_another_level_narrows_the_interval():
    import pandas as pd

    from flipgate.envelope.analysis import gate_analysis, gate_metrics

    rng = __import__("numpy").random.default_rng(1)
    rows = [
        {"model": m, "config": f"c{c}", "score": float(rng.uniform(0.3, 0.7)), "parse_rate": 1.0}
        for m in ("a", "b")
        for c in range(12)
    ]
    scores = pd.DataFrame(rows)
    wide, narrow = (
        gate_metrics(gate_analysis(scores, "c0", [0.5], 400, 42, lv), "a")["sdi"]["ci"]
        for lv in (0.95, 0.5)
    )
    assert (
        narrow[0] >= wide[0]
        and narrow[1] <= wide[1]
        and (narrow[1] - narrow[0]) < (wide[1] - wide[0])
    )
