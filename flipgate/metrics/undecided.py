"""Why a ``lower``/``upper`` verdict is undecided at its cap (docs/definitions.md §12.8).

n* is the smallest number of items at which the fixed-N test at the threshold's α would reject
*if the estimate stayed where it is*: the violation test when the estimate lies beyond the
bound, the conformance test when it lies inside. The verdict is **under-powered** when
n* ≤ :data:`AFFORDABLE` · N (N: the cell's cap) — "n* items would decide it" — and **at its
bound** otherwise: the estimate is too close to the bound for any affordable cap (n* = ∞ when it
equals the bound).

Two ways to find n*, by what decided the verdict:

- **test** (a mean of per-item values, :func:`n_star_by_test`): the observed values at n items —
  each distinct value repeated in proportion to how often it was seen (largest remainders), the
  copies spread evenly through the sequence so an order-dependent test (the betting e-process)
  sees the same mix all along — and the cell's own fixed-N tests
  (:func:`~flipgate.metrics.threshold_tests.decide_mean` without looks) as the oracle (paired
  differences beyond :data:`EXACT_PAIRED` items: the exact test's large-sample form). Rejection
  grows with n at a fixed estimate up to rounding, so n* is found by bisection up to
  AFFORDABLE · N; beyond that it is reported as "more than AFFORDABLE · N".
- **interval** (an estimate decided by its CI: envelope, ODI, continuity, judges,
  :func:`n_star_by_interval`): the CI's end on the bound's side of the estimate, at distance w from
  it, narrows as 1/√n, so it clears the bound (distance d) once n > N·(w/d)².
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import numpy.typing as npt

from flipgate.metrics.onesided import sides
from flipgate.metrics.paired_exact import score_test_rejects
from flipgate.metrics.sequential import ItemValues
from flipgate.metrics.threshold_tests import decide_mean
from flipgate.results import Undecided

Direction = Literal["max", "min"]

#: a verdict is under-powered when n* ≤ AFFORDABLE · N, at its bound otherwise (SPEC §12.8)
AFFORDABLE = 10
#: paired differences at more items than this are tested by Tango's score test in its normal
#: form, the large-sample version of the exact unconditional test, whose table grows as n² cells
#: per nuisance value (0.6 s at 256 items, 2.8 s at 640; one n* up to 640 took 37 s exact)
EXACT_PAIRED = 256


def beyond(estimate: float, bound: float, direction: Direction) -> bool:
    """Whether ``estimate`` lies beyond the bound (on the violating side)."""
    return estimate > bound if direction == "max" else estimate < bound


def at_size(values: npt.ArrayLike, n: int) -> npt.NDArray[np.float64]:
    """``n`` values with the distribution of ``values``: each distinct value — an unscored item
    (NaN) counting as one — repeated in proportion to its count, rounded by largest remainders,
    the copies of each spread evenly through the sequence. n* is so in items drawn, unscored
    ones kept at their share."""
    x = np.asarray(values, dtype=float)
    if not x.size:
        raise ValueError("at_size: no values")
    missing = np.isnan(x)
    distinct, count = np.unique(x[~missing], return_counts=True)
    if missing.any():
        distinct, count = np.r_[distinct, np.nan], np.r_[count, int(missing.sum())]
    share = count * n / x.size
    copies = np.floor(share).astype(int)
    left = n - int(copies.sum())
    copies[np.argsort(-(share - copies), kind="stable")[:left]] += 1
    value = np.repeat(distinct, copies)
    place = np.concatenate([(np.arange(c) + 0.5) / c for c in copies if c])
    out: npt.NDArray[np.float64] = value[np.argsort(place, kind="stable")]
    return out


def n_star_by_test(
    values: ItemValues, bound: float, direction: Direction, alpha: float, limit: int
) -> int | None:
    """The smallest n ≤ ``limit`` at which the fixed-N tests of a threshold ``metric <= bound``
    (``max``) or ``>= bound`` (``min``) at ``alpha`` reject on ``values`` resized to n items
    drawn (:func:`at_size`; the tests read the scored ones), or None when they do not reject at
    ``limit`` (or nothing was scored)."""
    if not values.n or values.estimate == bound:
        return None
    violation, conformance = sides(direction)
    side = violation if beyond(values.estimate, bound, direction) else conformance
    paired = values.kind == "paired" and values.low < bound < values.high

    def rejects(n: int) -> bool:
        x = at_size(values.values, n)
        if paired and n > EXACT_PAIRED:
            return score_test_rejects(x[~np.isnan(x)], bound, side, alpha)
        resized = ItemValues.of(x, values.low, values.high, values.kind)
        return decide_mean(resized, bound, direction, alpha).decision is not None

    if not rejects(limit):
        return None
    lo, hi = 0, limit  # rejects(hi); lo does not (0 items reject nothing)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if rejects(mid) else (mid, hi)
    return hi


def n_star_by_interval(
    estimate: float, ci: tuple[float, float], bound: float, n: int
) -> int | None:
    """The items at which the CI ``ci`` of ``estimate`` over ``n`` units, narrowing as 1/√n,
    would leave ``bound`` on one side (None when the estimate equals the bound)."""
    distance = abs(estimate - bound)
    if distance == 0:
        return None
    toward_bound = ci[1] if (bound > estimate) else ci[0]
    width = abs(toward_bound - estimate)
    scaled = round(n * (width / distance) ** 2, 9)  # no float dust across an integer
    return max(1, math.floor(scaled) + 1)


def undecided(
    n_star: int | None,
    n: int,
    estimate: float,
    bound: float,
    by: Literal["test", "interval"],
) -> Undecided:
    """The reason a verdict undecided at cap ``n`` gives, from its ``n_star``."""
    limit = AFFORDABLE * n
    under = n_star is not None and n_star <= limit
    return Undecided(
        reason="under-powered" if under else "at its bound",
        n=n,
        n_star=n_star,
        distance=abs(estimate - bound),
        limit=limit,
        by=by,
    )
