"""Operating characteristics of the sequential gates (docs/definitions.md §12) on simulated cells
of known truth, side by side in one run: for each row, how often the gate fails and passes
(with 95% Wilson intervals), and how many items it drew (mean, quartiles, 90th percentile).

    python benchmarks/sequential_validity.py [--replications 1000] [--cap 200] [--seed 0]

Rows (batches of 8, from 16 items, level 0.95, rule lower): ``flip_rate <= 0.25`` with true flip
rates 0.25 (at the bound: a fail is an error, at most 5% peeking included), 0.60 and 0.05, and a
paired ``delta_flip_rate <= 0.05`` regression gate with true deltas 0.05 (10% newly flipping, 5%
fixed), 0.40 and −0.15 (the same distances from the bound).
tests/unit/metrics/test_sequential.py asserts the issue's targets on these rows.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from flipgate.config import Threshold
from flipgate.gate.sequential import bernoulli_items, paired_items, simulate
from flipgate.metrics.proportion import wilson_interval
from flipgate.metrics.sequential import SequentialSettings


def rate(k: int, n: int) -> str:
    lo, hi = wilson_interval(k / n, n, 0.95)
    return f"{k / n:6.1%} [{lo:5.1%}, {hi:5.1%}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replications", type=int, default=1000)
    ap.add_argument("--cap", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    settings = SequentialSettings(batch_items=8, min_items=16)
    flip = Threshold("flip_rate", 0.25, "max", "lower", level=0.95)
    delta = Threshold("delta_flip_rate", 0.05, "max", "lower", level=0.95)
    rows = [
        ("flip_rate <= 0.25, true 0.25", bernoulli_items(0.25), flip, 0.0),
        ("flip_rate <= 0.25, true 0.60", bernoulli_items(0.60), flip, 0.0),
        ("flip_rate <= 0.25, true 0.05", bernoulli_items(0.05), flip, 0.0),
        ("delta_flip_rate <= 0.05, true 0.05", paired_items(0.10, 0.05), delta, -1.0),
        ("delta_flip_rate <= 0.05, true 0.40", paired_items(0.40, 0.0), delta, -1.0),
        ("delta_flip_rate <= 0.05, true -0.15", paired_items(0.0, 0.15), delta, -1.0),
    ]
    n = args.replications
    print(
        f"sequential gates: {n} simulated cells per row, batches of {settings.batch_items} from "
        f"{settings.min_items}, cap {args.cap}, level 0.95, rule lower"
    )
    print(
        f"{'truth':38s} {'fails (95% CI)':>22s} {'passes decided':>22s} {'undecided':>10s} "
        f"{'items: mean':>11s} {'q25':>4s} {'q50':>4s} {'q75':>4s} {'q90':>4s} {'mean/cap':>8s}"
    )
    t0 = time.perf_counter()
    for i, (name, draw, threshold, low) in enumerate(rows):
        oc = simulate(draw, threshold, settings, args.cap, n, seed=args.seed + i, low=low)
        q = np.quantile(oc.items, [0.25, 0.5, 0.75, 0.9])
        print(
            f"{name:38s} {rate(oc.failed, n):>22s} {rate(oc.passed_decided, n):>22s} "
            f"{oc.undecided:>10d} {oc.mean_items:11.1f} {q[0]:4.0f} {q[1]:4.0f} {q[2]:4.0f} "
            f"{q[3]:4.0f} {oc.mean_items / args.cap:8.1%}"
        )
    print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
