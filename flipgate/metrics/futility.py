"""Futility by predictive probability (docs/definitions.md §12.3): how likely a one-sided test
that has not rejected yet is to reject by its cap, given the items so far.

A threshold whose two tests together have a predictive probability of rejecting by the cap below
:data:`FUTILITY_CHANCE` stops holding its cell ("unlikely to be decided within the cap"). Stopping
for futility only ever takes away chances to reject, so every test's error stays ≤ α (a
non-binding futility rule); what it costs is power, measured beside the rule on the
operating-characteristics benchmark (benchmarks/gate_operating_characteristics.py).

The probability is Bayesian: the unknown rate (or distribution of per-item values) gets the
posterior of the items so far, the remaining items are drawn from it, and the test is run on
the completed look grid.

- **Binary values** (an item flips, parses; a share's end indicators): exact. For each rate p on
  a grid, backward induction over the look points gives P_p(reject at a later look | S_n); the
  posterior is Beta(S + ½, n − S + ½) (Jeffreys). Tabulated once per design, so a look and the
  simulated cells of the benchmark read it in O(1).
- **A regression case's fixed-N tests** at its planned pairs, and **a share's betting part**:
  Monte Carlo over completions drawn by the Bayesian bootstrap (Dirichlet weights over the values
  so far, with half an item at each end of the range), seeded by the values, so a look is
  reproducible (:func:`flipgate.metrics.threshold_tests.decide_mean`).
- **Paired and bounded values inside a cell**: none (only the reachability rule): the
  operating-characteristics benchmark simulates these kinds and could not afford a Monte Carlo
  at every look of every simulated cell (shares are not among its kinds).
"""

from __future__ import annotations

import hashlib
from functools import cache

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp
from scipy.stats import beta as beta_distribution
from scipy.stats import binom

from flipgate.metrics.binary_tests import BinaryDesign

FloatArray = npt.NDArray[np.float64]

#: a threshold whose two tests would together reject by the cap with a predictive probability
#: below this stops holding its cell. Measured on the operating-characteristics benchmark (2,000
#: cells, binary p = 0.35 against <= 0.40 at cap 200): 0.05 cost about 2 points of decided
#: share for 25 fewer items a cell, 0.01 costs less than the simulation error for 10 fewer; the
#: cells it is for — hopeless ones, e.g. a flip rate over items that mostly do not parse — stop
#: at their first look under either
FUTILITY_CHANCE = 0.01
#: the rate grid the binary tables integrate over (midpoints of equal cells of [0, 1])
RATE_GRID = (np.arange(400) + 0.5) / 400
#: completions drawn per look where the chance is simulated
COMPLETIONS = 128


@cache
def binary_chance_table(design: BinaryDesign) -> dict[int, FloatArray]:
    """Per look point n before the cap, over S = 0..n: the predictive probability (Jeffreys
    posterior of the rate after S ones in n) that the design rejects at a later look point."""
    points = design.looks.points
    grid = RATE_GRID
    # h[s, g]: P_p(reject at this look point or later | S = s here), p = grid[g]
    h = np.repeat(design.region(points[-1]).astype(float)[:, None], grid.size, axis=1)
    tables: dict[int, FloatArray] = {}
    for j in range(len(points) - 2, -1, -1):
        n, later = points[j], points[j + 1]
        step = later - n
        pmf = binom.pmf(np.arange(step + 1)[:, None], step, grid[None, :])  # (step+1, G)
        ahead = np.zeros((n + 1, grid.size))
        for k in range(step + 1):
            ahead += pmf[k][None, :] * h[k : k + n + 1]
        s = np.arange(n + 1)[:, None]
        log_w = beta_distribution.logpdf(grid[None, :], s + 0.5, n - s + 0.5)
        weights = np.exp(log_w - logsumexp(log_w, axis=1, keepdims=True))
        tables[n] = np.clip((weights * ahead).sum(axis=1), 0.0, 1.0)
        h = np.where(design.region(n)[:, None], 1.0, ahead)
    return tables


def binary_chance(design: BinaryDesign, n: int, s: int) -> float | None:
    """The predictive probability that ``design`` rejects after look point ``n`` (S = ``s``
    ones so far); None where it has no later look or the bound is at an edge of [0, 1]."""
    if not 0.0 < design.m < 1.0:
        return None
    table = binary_chance_table(design).get(n)
    return None if table is None else float(table[s])


def completions(
    values: FloatArray, low: float, high: float, total: int, draws: int = COMPLETIONS
) -> FloatArray:
    """``draws`` completions of ``values`` (drawn order, NaN: unscored) to ``total`` items, the
    remaining ones drawn by the Bayesian bootstrap: Dirichlet weights over the values so far
    (unscored ones included) plus half an item at each end of the range. Seeded by the values, so
    the same items give the same completions. Shape (draws, total)."""
    x = np.asarray(values, dtype=float)
    pool = np.r_[x, low, high]
    concentration = np.r_[np.ones(x.size), 0.5, 0.5]
    digest = hashlib.blake2b(np.r_[x, total, low, high].tobytes(), digest_size=8).digest()
    rng = np.random.default_rng(int.from_bytes(digest, "little"))
    weights = rng.dirichlet(concentration, size=draws)
    rest = total - x.size
    cumulative = np.cumsum(weights, axis=1)
    picks = (rng.random((draws, rest, 1)) > cumulative[:, None, :]).sum(axis=2)
    picks = np.minimum(picks, pool.size - 1)
    out: FloatArray = np.concatenate([np.broadcast_to(x, (draws, x.size)), pool[picks]], axis=1)
    return out
