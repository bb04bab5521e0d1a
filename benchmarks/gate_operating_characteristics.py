"""Operating characteristics of flipgate's gates (docs/definitions.md §12.7), side by side in one
run on the same simulated cells (common random numbers):

- **shipped**: the two one-sided tests a sequential cell decides with
  (flipgate.metrics.threshold_tests.decide_mean, simulated by flipgate.metrics.operating), looking
  after every batch; its items counted where the cell stops (the deciding look, the look at which
  both tests became futile, or the cap);
- **landed**: the turn-3 rule, a two-sided confidence sequence (flipgate.gate.sequential.simulate);
- **fixed-N**: the shipped fixed-N test at the cap at the full α (``sequential: false``): exact
  binomial; exact unconditional paired test; for continuous values, which have no exact test,
  the betting e-process on the cap's items;
- **SPRT**: Wald's SPRT of the truth's distribution against the nearest null at the bound
  (α = β = 0.05, on the same look grid, truncated at the cap): an oracle that knows the truth.

    python benchmarks/gate_operating_characteristics.py [--replications 2000]
        [--landed-replications 2000] [--seed 0]

Metric kinds: a binary rate against ``<= 0.40``; a paired difference in {−1, 0, 1} against
``delta <= 0.05`` (truth δ = P(+1) − P(−1) with baseline churn P(−1) = 0.10 where that is
possible, else P(−1) = −δ and P(+1) = 0); a continuous per-item value in [0, 1] (Beta with
concentration 4) against ``<= 0.5``. Caps 25/100/200, batches of 8 from 16, level 0.95. Truths at
the bound and at ±0.05/±0.15/±0.35 from it. At the bound a fail is an error of the violation test
and a pass an error of the conformance test: both are printed with 95% Wilson intervals (each
must be ≤ α = 0.05; tests/unit/metrics/test_gate_operating_characteristics.py asserts it).
Then the issue's named rows (#43 "Targets").
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from flipgate.config import Threshold
from flipgate.gate.sequential import bernoulli_items, paired_items, simulate
from flipgate.metrics.onesided import Looks
from flipgate.metrics.operating import (
    FAIL,
    PASS,
    Draw,
    OperatingResult,
    bernoulli_llr,
    beta_items,
    beta_llr,
    nearest_paired_null,
    simulate_gate,
    sprt_oracle,
    trinomial_llr,
)
from flipgate.metrics.proportion import wilson_interval
from flipgate.metrics.sequential import SequentialSettings, ValueKind

ALPHA = 0.05
LEVEL = 1 - ALPHA
SETTINGS = SequentialSettings(batch_items=8, min_items=16)
CAPS = (25, 100, 200)
OFFSETS = (0.0, -0.05, 0.05, -0.15, 0.15, -0.35, 0.35)
CHURN = 0.10
CONCENTRATION = 4.0


@dataclass(frozen=True)
class Kind:
    name: str
    kind: ValueKind
    metric: str
    bound: float
    low: float
    high: float


KINDS = (
    Kind("binary", "binary", "flip_rate", 0.40, 0.0, 1.0),
    Kind("paired", "paired", "delta_flip_rate", 0.05, -1.0, 1.0),
    Kind("continuous", "bounded", "disagreement", 0.50, 0.0, 1.0),
)


@dataclass(frozen=True)
class Truth:
    """A simulated truth: its draw and the SPRT oracle's per-item log likelihood ratios."""

    label: str
    mean: float
    draw: Draw
    llr: Callable[[np.ndarray], np.ndarray] | None


def paired_probabilities(delta: float) -> tuple[float, float] | None:
    """(P(+1), P(−1)) of a paired truth δ: baseline churn P(−1) = 0.10 where possible."""
    better = max(CHURN, -delta)
    worse = delta + better
    if worse < 0 or worse + better > 1:
        return None
    return worse, better


def truth_of(kind: Kind, mean: float) -> Truth | None:
    """The truth ``mean`` of a metric kind (None: impossible)."""
    at_bound = abs(mean - kind.bound) < 1e-12
    if kind.kind == "binary":
        if not 0.0 <= mean <= 1.0:
            return None
        llr = None if at_bound else (lambda x: bernoulli_llr(x, mean, kind.bound))
        return Truth(f"p = {mean:.2f}", mean, bernoulli_items(mean), llr)
    if kind.kind == "paired":
        probs = paired_probabilities(mean)
        if probs is None:
            return None
        worse, better = probs
        null = nearest_paired_null(worse, better, kind.bound)
        llr = None if at_bound else (lambda x: trinomial_llr(x, (worse, better), null))
        label = f"d = {mean:+.2f} ({worse:.2f}/{better:.2f})"
        return Truth(label, mean, paired_items(worse, better), llr)
    if not 0.0 < mean < 1.0:
        return None
    llr = None if at_bound else (lambda x: beta_llr(x, mean, kind.bound, CONCENTRATION))
    return Truth(f"mean = {mean:.2f}", mean, beta_items(mean, CONCENTRATION), llr)


@dataclass(frozen=True)
class Row:
    kind: Kind
    cap: int
    truth: Truth
    bound: float
    shipped: OperatingResult
    fixed: OperatingResult
    landed: tuple[float, float, float, int]  # fail share, pass share, mean items, replications
    sprt: OperatingResult | None


def run_row(
    kind: Kind, cap: int, truth: Truth, bound: float, reps: int, landed_reps: int, seed: int
) -> Row:
    rng = np.random.default_rng(seed)
    values = truth.draw(rng, reps, cap)
    looks = Looks(cap, SETTINGS.batch_items, SETTINGS.min_items)
    shipped = simulate_gate(values, kind.kind, kind.low, kind.high, bound, "max", ALPHA, looks)
    fixed = simulate_gate(values, kind.kind, kind.low, kind.high, bound, "max", ALPHA, None)
    sprt = None
    if truth.llr is not None:
        sprt = sprt_oracle(truth.llr(values), looks, truth.mean > bound, ALPHA, ALPHA)
    threshold = Threshold(kind.metric, bound, "max", "lower", level=LEVEL)
    subset = values[:landed_reps]
    oc = simulate(
        lambda *_: subset, threshold, SETTINGS, cap, len(subset), low=kind.low, high=kind.high
    )
    landed = (
        oc.failed / oc.replications,
        oc.passed_decided / oc.replications,
        oc.mean_items,
        oc.replications,
    )
    return Row(kind, cap, truth, bound, shipped, fixed, landed, sprt)


def share_ci(share: float, n: int) -> str:
    lo, hi = wilson_interval(share, n, 0.95)
    return f"{share:6.2%} [{lo:5.2%}, {hi:5.2%}]"


def wrong_share(r: OperatingResult, violates: bool) -> float:
    return float(np.mean(r.decision == (PASS if violates else FAIL)))


def print_bound_rows(rows: list[Row]) -> None:
    print("\n1. Error at the bound (truth = bound; each error must be <= 5%; 95% Wilson CIs)")
    head = (
        f"{'kind':10s} {'cap':>4s} {'rule':16s} {'fails: violation error':>26s} "
        f"{'passes: conformance error':>26s} {'decided':>8s} {'items':>6s}"
    )
    print(head)
    for row in rows:
        n = row.shipped.replications
        lines = [
            (
                "shipped seq.",
                row.shipped.fail_share,
                row.shipped.pass_share,
                n,
                float(row.shipped.stopped.mean()),
            ),
            ("fixed-N at cap", row.fixed.fail_share, row.fixed.pass_share, n, float(row.cap)),
            ("landed (turn 3)", row.landed[0], row.landed[1], row.landed[3], row.landed[2]),
        ]
        for rule, fails, passes, reps, items in lines:
            print(
                f"{row.kind.name:10s} {row.cap:4d} {rule:16s} {share_ci(fails, reps):>26s} "
                f"{share_ci(passes, reps):>26s} {fails + passes:8.1%} {items:6.1f}"
            )


def print_power_rows(rows: list[Row], title: str, targets: dict[int, str] | None = None) -> None:
    print(f"\n{title}")
    print(
        f"{'kind':10s} {'cap':>4s} {'bound':>6s} {'truth':26s} | "
        f"{'shipped: wrong decided items (to dec.)':>38s} | {'landed: decided items':>21s} | "
        f"{'fixed-N: decided':>16s} | {'SPRT: decided items':>19s}"
    )
    for i, row in enumerate(rows):
        s, f, o = row.shipped, row.fixed, row.sprt
        violates = row.truth.mean > row.bound
        landed_dec = row.landed[0] + row.landed[1]
        sprt = f"{o.decided_share:10.1%} {o.items.mean():8.1f}" if o is not None else f"{'—':>19s}"
        note = f"   {targets[i]}" if targets and i in targets else ""
        print(
            f"{row.kind.name:10s} {row.cap:4d} {row.bound:6.2f} {row.truth.label:26s} | "
            f"{wrong_share(s, violates):9.2%} {s.decided_share:8.1%} {s.stopped.mean():6.1f} "
            f"({s.items.mean():5.1f})    | {landed_dec:12.1%} {row.landed[2]:8.1f} | "
            f"{f.decided_share:16.1%} | {sprt}{note}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=2000)
    ap.add_argument(
        "--landed-replications",
        type=int,
        default=None,
        help="replications of the landed rule (default: --replications)",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    reps = args.replications
    landed_reps = min(reps, args.landed_replications or reps)
    t0 = time.perf_counter()
    print(
        f"gate operating characteristics: {reps} simulated cells per row "
        f"(landed rule: {landed_reps}), batches of {SETTINGS.batch_items} from "
        f"{SETTINGS.min_items}, level {LEVEL}, thresholds `<= bound` (rule lower)"
    )
    print(
        "shipped: decide_mean's two one-sided tests at every look; items where the cell stops "
        "(decision, futility or cap), in brackets to the decision or cap"
    )
    seed = args.seed
    at_bound: list[Row] = []
    off_bound: list[Row] = []
    for kind in KINDS:
        for cap in CAPS:
            for offset in OFFSETS:
                truth = truth_of(kind, round(kind.bound + offset, 10))
                if truth is None:
                    continue
                seed += 1
                row = run_row(kind, cap, truth, kind.bound, reps, landed_reps, seed)
                (at_bound if offset == 0.0 else off_bound).append(row)
    print_bound_rows(at_bound)
    print_power_rows(off_bound, "2. Truths off the bound (wrong = the share of wrong verdicts)")
    binary, paired = KINDS[0], KINDS[1]
    named = [
        (binary, 200, 0.00, 0.05, "target: shipped items <= 72 (landed 152)"),
        (binary, 200, 0.01, 0.05, "landed decided 0.49"),
        (binary, 200, 0.10, 0.25, "landed decided 0.995"),
        (binary, 200, 0.40, 0.25, "landed decided 0.79"),
    ]
    named_rows, targets = [], {}
    for i, (kind, cap, mean, bound, target) in enumerate(named):
        seed += 1
        truth = truth_of(Kind(kind.name, kind.kind, kind.metric, bound, 0.0, 1.0), mean)
        assert truth is not None
        named_rows.append(run_row(kind, cap, truth, bound, reps, landed_reps, seed))
        targets[i] = target
    seed += 1
    planted = Truth(
        "d = +0.40 (0.40/0.00)",
        0.40,
        paired_items(0.40, 0.0),
        lambda x: trinomial_llr(x, (0.40, 0.0), nearest_paired_null(0.40, 0.0, 0.05)),
    )
    named_rows.append(run_row(paired, 25, planted, 0.05, reps, landed_reps, seed))
    targets[len(named)] = "target: shipped fails >= 95% (landed 41%)"
    print_power_rows(named_rows, "3. The issue's named rows (#43 Targets)", targets)
    print(f"\nwall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
