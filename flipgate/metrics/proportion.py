"""Intervals for proportions that stay honest at small N (docs/definitions.md §5).

A percentile bootstrap over one item has one possible resample, so its interval is a single point:
"proven" from one item. A gate on a mean of per-item values in [0, 1] (flip rate, parse rate,
accuracy, ...) therefore decides on the hull of its bootstrap interval and the Wilson score
interval at the number of items. Wilson's interval is the inversion of the score test for a
binomial proportion; a [0, 1]-valued mean with mean p has variance at most p(1 - p), so the
interval is conservative for it too. At 25 items with no flip the 95% upper end is 0.133; at one
item it is 0.793, so no bound below that is "proven" from one item.
"""

from __future__ import annotations

import math

from scipy.stats import norm


def wilson_interval(p: float, n: int, level: float) -> tuple[float, float]:
    """The two-sided ``level`` Wilson score interval of a proportion ``p`` observed on ``n``
    units (``n`` ≥ 1)."""
    if n < 1:
        raise ValueError(f"wilson_interval: n must be at least 1 (value: {n!r})")
    z = float(norm.ppf(1 - (1 - level) / 2))
    z2n = z * z / n
    centre = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(max(p * (1 - p), 0.0) / n + z2n / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def small_n_hull(ci: tuple[float, float], p: float, n: int, level: float) -> tuple[float, float]:
    """``ci`` widened to contain the Wilson interval of ``p`` over ``n`` units."""
    lo, hi = wilson_interval(p, n, level)
    return min(ci[0], lo), max(ci[1], hi)
