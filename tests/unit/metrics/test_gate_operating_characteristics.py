"""Operating characteristics of the shipped gate decision (docs/definitions.md §12.7): the
vectorised simulation (flipgate.metrics.operating) decides exactly as decide_mean does, the error
at the bound stays within α under peeking at every look, and issue #43's target rows hold.
benchmarks/gate_operating_characteristics.py prints the full table."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pytest

from flipgate.gate.sequential import bernoulli_items, paired_items
from flipgate.metrics.onesided import Looks
from flipgate.metrics.operating import (
    FAIL,
    PASS,
    UNDECIDED,
    Draw,
    bernoulli_llr,
    beta_items,
    nearest_paired_null,
    simulate_gate,
    sprt_oracle,
    trinomial_llr,
)
from flipgate.metrics.sequential import ItemValues, ValueKind
from flipgate.metrics.threshold_tests import decide_mean

ALPHA = 0.05
REPS = 2000
#: α + 3 standard errors of a share estimated on REPS replications
ERROR_LIMIT = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / REPS)
RANGES: dict[ValueKind, tuple[float, float]] = {
    "binary": (0.0, 1.0),
    "paired": (-1.0, 1.0),
    "bounded": (0.0, 1.0),
}
CODE = {"fail": FAIL, "pass": PASS, None: UNDECIDED}


def run_cell(
    row: np.ndarray,
    kind: ValueKind,
    bound: float,
    direction: Literal["max", "min"],
    looks: Looks | None,
) -> tuple[int, int, int]:
    """(decision, items to the decision or cap, items where the cell stops) of one cell, the way
    flipgate.gate.sequential.run_sequential runs it: decide_mean on the items so far at every look;
    the cell stops at the first decision or the first look at which the threshold is futile or
    unlikely to be decided (predictive futility)."""
    low, high = RANGES[kind]
    cap = row.size
    if looks is None:
        decided = decide_mean(ItemValues.of(row, low, high, kind), bound, direction, ALPHA)
        return CODE[decided.decision], cap, cap
    for n in looks.points:
        decided = decide_mean(
            ItemValues.of(row[:n], low, high, kind), bound, direction, ALPHA, looks
        )
        if decided.decision is not None:
            assert decided.decided_at == n
            return CODE[decided.decision], n, n
        if decided.futile or decided.unlikely:  # run_sequential stops here, undecided
            return UNDECIDED, cap, n
    return UNDECIDED, cap, cap


def random_cells(
    kind: ValueKind, reps: int, cap: int, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """Cells of varied truths near the bound, 3% of the items unscored (NaN)."""
    if kind == "binary":
        bound = 0.3
        values = (rng.random((reps, cap)) < rng.uniform(0.1, 0.5, (reps, 1))).astype(float)
    elif kind == "paired":
        bound = 0.05
        worse, better = rng.uniform(0.0, 0.4, (reps, 1)), rng.uniform(0.0, 0.3, (reps, 1))
        u = rng.random((reps, cap))
        values = np.where(u < worse, 1.0, np.where(u < worse + better, -1.0, 0.0))
    else:
        bound = 0.5
        mean = rng.uniform(0.3, 0.7, (reps, 1))
        values = rng.beta(4 * mean, 4 * (1 - mean), (reps, cap))
    values[rng.random((reps, cap)) < 0.03] = np.nan
    return values, bound


@pytest.mark.parametrize("kind", ["binary", "paired", "bounded"])
@pytest.mark.parametrize("sequential", [True, False])
def test_simulate_gate_decides_as_decide_mean(kind: ValueKind, sequential: bool) -> None:
    rng = np.random.default_rng(11)
    grid: tuple[tuple[int, Literal["max", "min"]], ...] = ((25, "max"), (48, "min"))
    for cap, direction in grid:
        values, bound = random_cells(kind, 50, cap, rng)
        if direction == "min":
            bound = -bound if kind == "paired" else bound
        looks = Looks(cap) if sequential else None
        low, high = RANGES[kind]
        got = simulate_gate(values, kind, low, high, bound, direction, ALPHA, looks)
        want = np.array([run_cell(row, kind, bound, direction, looks) for row in values])
        np.testing.assert_array_equal(got.decision, want[:, 0])
        np.testing.assert_array_equal(got.items, want[:, 1])
        np.testing.assert_array_equal(got.stopped, want[:, 2])
        # decide_mean on all the cap's items comes to the same decision
        full = [
            CODE[
                decide_mean(
                    ItemValues.of(r, low, high, kind), bound, direction, ALPHA, looks
                ).decision
            ]
            for r in values
        ]
        # where the cell did not stop for futility
        ran = (got.decision != UNDECIDED) | (got.stopped == cap)
        np.testing.assert_array_equal(got.decision[ran], np.asarray(full)[ran])
        # the rows exercise both verdicts and the undecided; a cell stopped for futility is
        # undecided (the predictive rule may stop one a later look would have decided)
        assert {FAIL, PASS, UNDECIDED} <= set(got.decision.tolist()) or not sequential
        assert (got.decision[got.stopped < got.items] == UNDECIDED).all()


AT_BOUND: list[tuple[ValueKind, float, Draw, tuple[int, ...]]] = [
    ("binary", 0.40, bernoulli_items(0.40), (25, 100, 200)),
    ("binary", 0.05, bernoulli_items(0.05), (25, 100, 200)),
    ("paired", 0.05, paired_items(0.15, 0.10), (25, 100)),  # baseline churn 0.10
    ("paired", 0.05, paired_items(0.05, 0.0), (25, 100)),  # the least discordance
    ("bounded", 0.50, beta_items(0.50), (25, 100)),
    ("bounded", 0.20, beta_items(0.20), (25, 100)),
]


@pytest.mark.parametrize(("kind", "bound", "draw", "caps"), AT_BOUND)
def test_error_at_the_bound_within_alpha(
    kind: ValueKind, bound: float, draw: Draw, caps: tuple[int, ...]
) -> None:
    """Truth at the bound, looking at every batch: a fail is the violation test's error and a
    pass the conformance test's; each at most α (within 3 standard errors)."""
    low, high = RANGES[kind]
    for cap in caps:
        values = draw(np.random.default_rng(cap), REPS, cap)
        result = simulate_gate(values, kind, low, high, bound, "max", ALPHA, Looks(cap))
        assert result.fail_share <= ERROR_LIMIT, (kind, bound, cap, result.fail_share)
        assert result.pass_share <= ERROR_LIMIT, (kind, bound, cap, result.pass_share)


def test_all_zero_control_proves_its_bound_within_72_items() -> None:
    """A control that never flips against ``flip_rate <= 0.05`` at cap 200 (issue #43: ≤ 72;
    the landed rule 152; Wald's SPRT 58 items, 64 on the batch grid)."""
    values = np.zeros((REPS, 200))
    result = simulate_gate(values, "binary", 0.0, 1.0, 0.05, "max", ALPHA, Looks(200))
    assert (result.decision == PASS).all()
    assert result.stopped.mean() <= 72
    llr = bernoulli_llr(values, 0.0, 0.05)
    oracle = sprt_oracle(llr, Looks(200), truth_violates=False, alpha=ALPHA, beta=ALPHA)
    # by hand: n·log(1/0.95) ≥ log 19 first at n = 58, seen at look 64
    assert math.ceil(math.log(19) / -math.log(0.95)) == 58
    assert (oracle.items == 64).all() and (oracle.decision == PASS).all()


def test_planted_paired_regression_is_caught_at_cap_25() -> None:
    """40% of items newly flip and none is fixed, against ``delta_flip_rate <= 0.05`` at cap 25
    (issue #43: caught ≥ 95%; the landed rule 41%)."""
    values = paired_items(0.40, 0.0)(np.random.default_rng(5), REPS, 25)
    result = simulate_gate(values, "paired", -1.0, 1.0, 0.05, "max", ALPHA, Looks(25))
    assert result.fail_share >= 0.95


@pytest.mark.parametrize(
    ("kind", "bound", "draw", "cap"),
    [
        ("binary", 0.40, bernoulli_items(0.25), 100),
        ("binary", 0.05, bernoulli_items(0.01), 200),
        ("paired", 0.05, paired_items(0.30, 0.10), 100),
        ("paired", 0.05, paired_items(0.0, 0.10), 25),
        ("bounded", 0.50, beta_items(0.40), 100),
    ],
)
def test_sequential_decides_as_often_as_the_fixed_test(
    kind: ValueKind, bound: float, draw: Draw, cap: int
) -> None:
    """Looking early costs at most 3 points of decided share against the exact test at the cap."""
    low, high = RANGES[kind]
    values = draw(np.random.default_rng(7), REPS, cap)
    sequential = simulate_gate(values, kind, low, high, bound, "max", ALPHA, Looks(cap))
    fixed = simulate_gate(values, kind, low, high, bound, "max", ALPHA, None)
    assert sequential.decided_share >= fixed.decided_share - 0.03
    assert sequential.stopped.mean() < cap


def test_sprt_oracle_log_likelihood_ratios() -> None:
    """The oracle's per-item ratios, by hand."""
    x = np.array([[1.0, 0.0, -1.0]])
    assert nearest_paired_null(0.40, 0.0, 0.05) == pytest.approx((0.225, 0.175))
    llr = trinomial_llr(x, (0.30, 0.10), (0.225, 0.175))
    expected = [math.log(0.30 / 0.225), math.log(0.60 / 0.60), math.log(0.10 / 0.175)]
    np.testing.assert_allclose(llr[0], expected, atol=1e-12)
    np.testing.assert_allclose(
        bernoulli_llr(x[:, :2], 0.5, 0.4)[0], [math.log(0.5 / 0.4), math.log(0.5 / 0.6)]
    )


@pytest.mark.parametrize("missing", [0.1, 0.5, 0.8])
def test_error_at_the_bound_within_alpha_with_unscored_items(missing: float) -> None:
    """Binary values at the bound with a share of the items unscored (NaN, at random): the tests
    run on the scored items (at each look the largest look point the scored count has reached,
    and at the cap a last look on every scored value), and each error stays at most α (within 3
    standard errors)."""
    for cap in (25, 48, 100, 200):
        rng = np.random.default_rng(cap + int(100 * missing))
        values = bernoulli_items(0.40)(rng, REPS, cap)
        values[rng.random((REPS, cap)) < missing] = np.nan
        result = simulate_gate(values, "binary", 0.0, 1.0, 0.40, "max", ALPHA, Looks(cap))
        assert result.fail_share <= ERROR_LIMIT, (missing, cap, result.fail_share)
        assert result.pass_share <= ERROR_LIMIT, (missing, cap, result.pass_share)


def test_a_flip_rate_over_few_scored_items_is_decided_at_the_cap() -> None:
    """The NF4 build's ARC cell: cap 48, 88% of the items unscored, the scored ones flipping at
    0.9 against ``<= 0.25``. The scored count rarely reaches the first look point (16), so
    without the cap's last look almost no cell was decided (0.0% of 2,000 before it); with it,
    about 82% fail, at 48 items, and none passes."""
    rng = np.random.default_rng(7)
    values = bernoulli_items(0.9)(rng, REPS, 48)
    values[rng.random((REPS, 48)) < 0.88] = np.nan
    result = simulate_gate(values, "binary", 0.0, 1.0, 0.25, "max", ALPHA, Looks(48))
    assert result.fail_share >= 0.75 and result.pass_share == 0.0
