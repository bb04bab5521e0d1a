"""The decomposition and judge-consensus suites decide their lower/upper thresholds on item means
by the two one-sided tests of docs/definitions.md §12.1 (flipgate.metrics.threshold_tests), at
fixed N; thresholds that are not item means keep the §5 bootstrap-CI rule. Each case is
hand-computed."""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy.stats import binom
from support.decomposition_tables import table
from support.paths import write

from flipgate.config import ThresholdSet, parse_thresholds
from flipgate.decomposition.gate import gate as decomposition_gate
from flipgate.judges.cell import gated as judge_gated
from flipgate.judges.record import JudgeRecord
from flipgate.metrics.consensus import RunJudgement
from flipgate.metrics.decomposition import (
    AxisDecomposition,
    decompose,
    decomposition_item_values,
    item_parse_shares,
)
from flipgate.metrics.judging import JudgedItem, judge_consensus, judge_item_values
from flipgate.metrics.paired_exact import paired_fixed_test
from flipgate.suite.cell_loop import decide

P_VALUE = re.compile(r"p = ([0-9.]+)")


def thresholds(tmp_path, text: str) -> ThresholdSet:
    return ThresholdSet(parse_thresholds(write(tmp_path / "th.yaml", text))[0])


def artifact_only(n_items: int = 25, n_artifact: int = 10) -> AxisDecomposition:
    """``n_artifact`` of ``n_items`` items flip under letter_logprob only; regex never flips."""
    answers = {
        f"q{i:02d}": {"regex": [0, 0], "letter_logprob": [0, 1] if i < n_artifact else [0, 0]}
        for i in range(n_items)
    }
    return decompose(table(answers), "label_set", ["regex", "letter_logprob"], n=200, seed=1)


def by_metric(verdicts) -> dict[str, object]:
    return {v.metric: v for v in verdicts}


def test_an_artifact_on_10_of_25_items_fails_by_the_exact_paired_test(tmp_path):
    d = artifact_only()
    ts = thresholds(
        tmp_path,
        """
thresholds:
  - {metric: artifact, facet: decomposition, max: 0.05, rule: lower}
  - {metric: artifact@label_set, facet: decomposition, max: 0.05, rule: lower}
  - {metric: artifact@paraphrase, facet: decomposition, max: 0.05, rule: lower}
  - {metric: genuine_flip_rate, facet: decomposition, max: 0.25, rule: lower}
  - {metric: flip_rate, facet: decomposition, max: 0.5, rule: upper}
  - {metric: artifact_share, facet: decomposition, max: 0.5, rule: lower}
""",
    )
    verdicts = decomposition_gate(d, ts, "any")
    got = by_metric(verdicts)
    assert "artifact@paraphrase" not in got  # another axis
    for name in ("artifact", "artifact@label_set"):  # the selector reaches the same test
        v = got[name]
        assert (v.readout, v.estimate, v.verdict, v.outcome) == (
            "letter_logprob",
            0.4,
            "fail",
            "fail",
        )
        assert v.test.startswith("exact paired (unconditional) p = 0.0013 <= 0.0500 (n = 25)")
        assert v.interval == "bootstrap"  # the CI is shown, the test decided
        p = float(P_VALUE.search(v.test).group(1))
        # the outcomes with no −1 and ≥ 10 (+1)s are at least as extreme as (b, c) = (10, 0):
        # on the null boundary p₊ − p₋ = 0.05, P(c = 0, b ≥ 10) peaks near s = 0.40 at 0.00095
        s = np.linspace(0.05, 1.0, 20001)
        p_plus, p_zero = (s + 0.05) / 2, 1 - s
        at_least = (p_plus + p_zero) ** 25 * binom.sf(9, 25, p_plus / (p_plus + p_zero))
        assert at_least.max() == pytest.approx(0.000948, abs=1e-6)
        assert at_least.max() <= p + 5e-5 and p <= 0.05
    # regex never flips on 25 items: P[Bin(25, 0.25) = 0] = 0.75^25 = 0.00075 → pass
    genuine = got["genuine_flip_rate"]
    assert (genuine.readout, genuine.verdict) == ("regex", "pass")
    assert genuine.test == f"exact binomial p = {0.75**25:.4f} <= 0.0500 (n = 25)"
    # 10 of 25 flips against an upper 0.5: P[Bin(25, 0.5) ≤ 10] = 0.212 > 0.05 → not proven
    flips = got["flip_rate"]
    assert (flips.verdict, flips.outcome) == ("inconclusive", "fail")
    assert f"conformance: exact binomial p = {binom.cdf(10, 25, 0.5):.4f} > 0.0500" in flips.test
    # artifact_share is a ratio of counts: the bootstrap CI decides, no test is named
    share = got["artifact_share"]
    assert share.test is None and share.interval is None and share.estimate == 1.0


def test_decomposition_item_values_are_the_record_estimates_in_drawn_order():
    answers = {
        "z": {"regex": [0, 0, 0], "letter_logprob": [0, 1, 0]},  # artifact flip
        "a": {"regex": [1, 2, 1], "letter_logprob": [1, 2, 1]},  # both flip
        "m": {"regex": [3, None, None], "letter_logprob": [3, 0, 3]},  # regex parsed once
        "b": {"regex": [2, 2, 2], "letter_logprob": [1, 2, 2]},  # letters flip
    }
    t = table(answers)
    assert item_parse_shares(t, "regex").to_dict() == pytest.approx(
        {"z": 1.0, "a": 1.0, "m": 1 / 3, "b": 1.0}
    )
    d = decompose(t, "format", ["regex", "letter_logprob"], n=50)
    letter = decomposition_item_values(d, "letter_logprob")
    np.testing.assert_array_equal(letter["flip_rate"].values, [1, 1, 1, 1])
    np.testing.assert_array_equal(letter["artifact"].values, [1, 0, np.nan, 1])
    assert (letter["artifact"].kind, letter["artifact"].low) == ("paired", -1.0)
    assert letter["artifact"].estimate == pytest.approx(
        d.readouts["letter_logprob"].artifact.estimate
    )
    assert "genuine_flip_rate" not in letter
    regex = decomposition_item_values(d, "regex")
    np.testing.assert_array_equal(regex["genuine_flip_rate"].values, [0, 1, np.nan, 0])
    assert regex["genuine_flip_rate"].estimate == pytest.approx(d.genuine.estimate)
    assert regex["parse_rate"].kind == "bounded" and "artifact" not in regex
    np.testing.assert_allclose(regex["parse_rate"].values, [1, 1, 1 / 3, 1])
    # equal conditions per item: the mean of per-item shares is the trial share
    assert regex["parse_rate"].estimate == pytest.approx(d.readouts["regex"].parse_rate)
    assert decomposition_item_values(d, "cloze") == {}


def test_a_record_without_per_item_parse_shares_still_gates(tmp_path):
    """Records written before ``parsed`` was kept load; their flips are still tested (from the
    surface) and parse_rate falls back to the old rule (a point estimate)."""
    d = artifact_only()
    old = AxisDecomposition.model_validate_json(
        d.model_copy(update={"parsed": {}}).model_dump_json()
    )
    ts = thresholds(
        tmp_path,
        """
thresholds:
  - {metric: artifact, facet: decomposition, max: 0.05, rule: lower}
  - {metric: parse_rate, facet: decomposition, readout: letter_logprob, min: 0.5, rule: upper}
""",
    )
    new, before = (
        by_metric(decomposition_gate(d, ts, "x")),
        by_metric(decomposition_gate(old, ts, "x")),
    )
    assert before["artifact"].test == new["artifact"].test and before["artifact"].verdict == "fail"
    assert before["parse_rate"].test is None and before["parse_rate"].verdict == "pass"
    # every item parsed both conditions: 25 ones against a lower bound of 0.5, by betting
    assert new["parse_rate"].verdict == "pass" and "betting" in new["parse_rate"].test


def steady_judge(n_sets: int, regressed: int = 0) -> JudgeRecord:
    """``n_sets`` candidate sets whose three orderings all pick gold (0), except ``regressed``
    sets where only the canonical ordering picks gold (direct right, consensus wrong)."""
    good, bad = RunJudgement.of([0.9, 0.1]), RunJudgement.of([0.1, 0.9])
    judged = [
        JudgedItem(f"s{i:02d}", 0, [good, bad, bad] if i < regressed else [good, good, good])
        for i in range(n_sets)
    ]
    return JudgeRecord(
        model_id="j", dataset="d", readout="listwise", result=judge_consensus(judged, n_boot=200)
    )


JUDGE_THRESHOLDS = """
thresholds:
  - {metric: judge_flip_rate, facet: judges, max: 0.25, rule: lower}
  - {metric: consensus_accuracy, facet: judges, min: 0.5, rule: upper}
  - {metric: consensus_gain, facet: judges, min: -0.05, rule: lower}
  - {metric: parse_rate, facet: judges, min: 0.5, rule: upper}
"""


@pytest.mark.parametrize("n_sets, label", [(10, "inconclusive"), (11, "pass")])
def test_a_judge_that_never_flips_passes_once_0_75_to_the_n_is_below_alpha(tmp_path, n_sets, label):
    """0 flips over N sets against judge_flip_rate ≤ 0.25: the conformance p-value is
    P[Bin(N, 0.25) = 0] = 0.75^N — 0.0563 at N = 10 (not proven; a lower rule passes with a
    warning), 0.0422 at N = 11 (proven)."""
    verdicts = by_metric(
        decide(judge_gated(steady_judge(n_sets)), thresholds(tmp_path, JUDGE_THRESHOLDS))
    )
    flips = verdicts["judge_flip_rate"]
    assert (flips.estimate, flips.verdict) == (0.0, label)
    assert flips.outcome == ("warn" if label == "inconclusive" else "pass")
    op = ">" if label == "inconclusive" else "<="
    assert f"exact binomial p = {0.75**n_sets:.4f} {op} 0.0500 (n = {n_sets})" in flips.test
    # every set right by consensus against ≥ 0.5: P[Bin(N, 0.5) = N] = 0.5^N
    accuracy = verdicts["consensus_accuracy"]
    assert accuracy.verdict == "pass"
    assert accuracy.test == f"exact binomial p = {0.5**n_sets:.4f} <= 0.0500 (n = {n_sets})"
    assert verdicts["consensus_gain"].test.startswith(
        "violation: exact paired"
    )  # gain 0: undecided
    assert "betting" in verdicts["parse_rate"].test


def test_a_consensus_that_loses_8_of_20_sets_fails_its_gain_by_the_paired_test(tmp_path):
    record = steady_judge(20, regressed=8)
    values = judge_item_values(record.result)
    gain = values["consensus_gain"]
    np.testing.assert_array_equal(gain.values, [-1] * 8 + [0] * 12)
    assert gain.estimate == pytest.approx(record.result.consensus_gain.estimate) == -0.4
    assert values["judge_flip_rate"].estimate == pytest.approx(0.4)
    v = by_metric(decide(judge_gated(record), thresholds(tmp_path, JUDGE_THRESHOLDS)))[
        "consensus_gain"
    ]
    assert (v.verdict, v.outcome) == ("fail", "fail")
    assert v.test == paired_fixed_test(gain.values, -0.05, "below", 0.05).describe()
    p = float(P_VALUE.search(v.test).group(1))
    # mirror of the decomposition case: at least P(b = 0, c ≥ 8) on p₋ − p₊ = 0.05
    s = np.linspace(0.05, 1.0, 20001)
    p_minus, p_zero = (s + 0.05) / 2, 1 - s
    at_least = (p_minus + p_zero) ** 20 * binom.sf(7, 20, p_minus / (p_minus + p_zero))
    assert at_least.max() <= p + 5e-5 and p <= 0.05


def test_macro_accuracy_and_records_without_items_keep_the_bootstrap_rule(tmp_path):
    good = RunJudgement.of([0.9, 0.1])
    judged = [JudgedItem(f"s{i}", 0, [good, good], "ab"[i % 2]) for i in range(12)]
    record = JudgeRecord(
        model_id="j", dataset="d", readout="listwise", result=judge_consensus(judged, n_boot=200)
    )
    ts = thresholds(
        tmp_path,
        """
thresholds:
  - {metric: consensus_macro_accuracy, facet: judges, min: 0.5, rule: upper}
  - {metric: judge_flip_rate, facet: judges, max: 0.25, rule: lower}
""",
    )
    verdicts = by_metric(decide(judge_gated(record), ts))
    assert verdicts["consensus_macro_accuracy"].test is None  # a mean of per-source means
    assert verdicts["judge_flip_rate"].test.startswith("exact binomial")
    bare = record.model_copy(update={"result": record.result.model_copy(update={"items": {}})})
    assert judge_item_values(bare.result) == {}
    assert by_metric(decide(judge_gated(bare), ts))["judge_flip_rate"].test is None
