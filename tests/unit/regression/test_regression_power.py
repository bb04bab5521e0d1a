"""Statistical validity of the regression gate (docs/definitions.md §11 with the ``lower`` rule of
docs/definitions.md §5), by simulation.

Each replication draws, per item, one of four discordance categories (flips in both versions, only
in the candidate, only in the baseline, in neither) from a fixed multinomial, turns the flip states
into K = 6 answers per item and version (an item flips when its K answers are not all the same),
runs ``compare_cell`` (paired bootstrap, n = 1000, level 0.95) and gates
``delta_flip_rate <= 0.05 (lower)`` with :func:`flipgate.gate.rules.evaluate`. The gate must fail a
planted +0.15 regression in >= 80 % of replications, a difference exactly at the margin in <= 5 %
and no difference in ~0 %. Run with ``-s`` to see the rates and their Wilson 95 % intervals.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from flipgate.config import Threshold
from flipgate.gate.rules import evaluate
from flipgate.regression.compare import Arm, compare_cell

R = "regex"
N_ITEMS, K, N_CLASSES = 200, 6, 4
MARGIN, LEVEL, N_BOOT = 0.05, 0.95, 1000
THRESHOLD = Threshold("delta_flip_rate", MARGIN, "max", "lower", level=LEVEL, vs="baseline")
PERMS = [list(p) for p in itertools.permutations(range(N_CLASSES))][:K]  # canonical first
ITEM_IDS = np.array([f"q{j:03d}" for j in range(N_ITEMS)], dtype=object)
#: discordance categories: flips in both, only in the candidate (B), only in the baseline (A),
#: neither
BOTH, ONLY_B, ONLY_A, NEITHER = range(4)


def _trials(flips: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    """K answers per item: one stable (random) answer, except that on a flipping item one of its K
    orderings (drawn at random) answers another option."""
    stable = rng.integers(0, N_CLASSES, size=N_ITEMS)
    answers = np.repeat(stable[:, None], K, axis=1)
    where = rng.integers(0, K, size=N_ITEMS)
    other = (stable + rng.integers(1, N_CLASSES, size=N_ITEMS)) % N_CLASSES
    answers[flips, where[flips]] = other[flips]
    flat = answers.ravel().tolist()
    return pd.DataFrame(
        {
            "item_id": np.repeat(ITEM_IDS, K),
            "condition": np.tile(np.arange(K), N_ITEMS),
            "permutation": PERMS * N_ITEMS,
            "sample": 0,
            "mapped": [{R: a} for a in flat],
            "correct": [{R: a == 0} for a in flat],
            "n_classes": N_CLASSES,
        }
    )


def simulate(
    p_both: float, p_only_b: float, p_only_a: float, reps: int, seed: int
) -> tuple[int, float]:
    """Gate failures out of ``reps`` replications, and the mean estimated Δflip."""
    rng = np.random.default_rng(seed)
    probs = [p_both, p_only_b, p_only_a, 1 - p_both - p_only_b - p_only_a]
    fails, estimates = 0, []
    for _ in range(reps):
        cat = rng.choice(4, size=N_ITEMS, p=probs)
        flips_a = (cat == BOTH) | (cat == ONLY_A)
        flips_b = (cat == BOTH) | (cat == ONLY_B)
        base = Arm("baseline", _trials(flips_a, rng), (R,), "sha")
        cand = Arm("candidate", _trials(flips_b, rng), (R,), "sha")
        cmp = compare_cell(base, cand, "option_order", "mmlu", R, n_boot=N_BOOT, level=LEVEL)
        est = cmp.primary.deltas["delta_flip_rate"]
        assert est.n_items == N_ITEMS
        assert est.estimate == pytest.approx(flips_b.mean() - flips_a.mean())  # generator sanity
        (v,) = evaluate([THRESHOLD], cmp.estimates(), R)
        fails += v.outcome == "fail"
        estimates.append(est.estimate)
    return fails, float(np.mean(estimates))


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# name, (p_both, p_only_b, p_only_a), true Δ, replications, seed, check on the failure rate
SCENARIOS = [
    # baseline flip rate 0.30 throughout; candidate 0.45 / 0.35 / 0.30
    ("planted +0.15 regression", (0.25, 0.20, 0.05), 0.15, 300, 20251, lambda r: r >= 0.80),
    ("difference at the margin (+0.05)", (0.25, 0.10, 0.05), 0.05, 200, 20252, lambda r: r <= 0.05),
    ("no difference", (0.25, 0.05, 0.05), 0.0, 200, 20253, lambda r: r <= 0.01),
]


@pytest.mark.parametrize(
    "name,probs,delta,reps,seed,check", SCENARIOS, ids=["regression", "margin", "null"]
)
@pytest.mark.slow
def test_gate_failure_rate(name, probs, delta, reps, seed, check):
    fails, mean_est = simulate(*probs, reps=reps, seed=seed)
    rate = fails / reps
    lo, hi = wilson(fails, reps)
    print(
        f"\n[regression power] {name}: true Δflip {delta:+.2f}, mean estimate {mean_est:+.4f}; "
        f"gate delta_flip_rate <= {MARGIN} (lower, level {LEVEL}) failed {fails}/{reps} = "
        f"{rate:.3f} (Wilson 95% CI {lo:.3f}–{hi:.3f}); N={N_ITEMS} items, K={K}, "
        f"bootstrap n={N_BOOT}"
    )
    assert abs(mean_est - delta) < 0.01  # the generator plants what it says
    assert check(rate), f"{name}: gate failed in {rate:.3f} of {reps} replications"
