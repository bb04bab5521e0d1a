"""Anytime-valid confidence sequences for the mean of bounded values (docs/definitions.md §12).

The hedged-capital betting confidence sequence of Waudby-Smith & Ramdas, "Estimating means of
bounded random variables by betting" (JRSS-B 2024, §4): for each candidate mean m a gambler who
bets that the mean is above m and one who bets that it is below m each start with capital 1 and
stake a predictable fraction λ of it on every observation,

    K⁺_t(m) = Π (1 + λ⁺_i(m) (x_i − m)),   K⁻_t(m) = Π (1 − λ⁻_i(m) (x_i − m)),

and m leaves the sequence once max(K⁺_t(m), K⁻_t(m)) / 2 reaches 1/α (Ville's inequality: under
the true mean each is a nonnegative martingale, so the true mean is ever excluded with
probability at most α, however often one looks). The bets are the predictable plug-in
λ_t = sqrt(2 log(2/α) / (σ̂²_{t−1} t log(1 + t))), truncated at c/m and c/(1 − m) (c = 1/2), with
μ̂_t = (1/2 + Σ x_i)/(t + 1) and σ̂²_t = (1/4 + Σ (x_i − μ̂_i)²)/(t + 1). The set of m is found on
a grid of ``breaks`` + 1 points, widened by one grid step on each side (so the grid never makes
it narrower than the set it approximates), and intersected over time (the running
intersection, valid since the sequence covers the mean at every time at once).

No maintained implementation installs here without a compiler: ``confseq`` (the authors'
package) ships only a C++ source distribution (Boost, CMake), last released in 2023. This module
follows the paper; tests/unit/metrics/test_sequential.py checks its coverage under continuous
peeking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: grid steps over [0, 1]; the sequence is widened by one step on each side
BREAKS = 1000
#: the bets' truncation: λ⁺ ≤ c/m, λ⁻ ≤ c/(1 − m), so capital never falls below 1 − c per step
TRUNCATION = 0.5


def predictable_bets(x: FloatArray, alpha: float) -> FloatArray:
    """The predictable plug-in bets λ_t (before truncation) for observations ``x`` in [0, 1]
    along the last axis: each uses only the observations before it."""
    n = x.shape[-1]
    t = np.arange(1, n + 1, dtype=float)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1)
    before = np.concatenate([np.full(x.shape[:-1] + (1,), 0.25), sigma2[..., :-1]], axis=-1)
    bets: FloatArray = np.sqrt(2 * math.log(2 / alpha) / (before * t * np.log1p(t)))
    return bets


def confidence_sequence(
    x: npt.ArrayLike, alpha: float, breaks: int = BREAKS
) -> tuple[FloatArray, FloatArray]:
    """Lower and upper bounds of the (1 − ``alpha``) hedged-capital confidence sequence after
    each observation of ``x`` (values in [0, 1]; shape ``(n,)``, or ``(replications, n)`` for
    many sequences at once). Bounds are running intersections: they never widen."""
    values = np.asarray(x, dtype=float)
    single = values.ndim == 1
    values = np.atleast_2d(values)
    if values.size and (np.isnan(values).any() or values.min() < 0 or values.max() > 1):
        raise ValueError("confidence_sequence: values must lie in [0, 1] (no NaN)")
    reps, n = values.shape
    grid = np.linspace(0.0, 1.0, breaks + 1)
    with np.errstate(divide="ignore"):
        cap_up = np.where(grid > 0, TRUNCATION / grid, np.inf)
        cap_down = np.where(grid < 1, TRUNCATION / (1 - grid), np.inf)
    bets = predictable_bets(values, alpha)
    barrier = math.log(2 / alpha)  # max(K⁺, K⁻)/2 ≥ 1/α
    log_up = np.zeros((reps, grid.size))
    log_down = np.zeros((reps, grid.size))
    rejected = np.zeros((reps, grid.size), dtype=bool)
    lower = np.empty((reps, n))
    upper = np.empty((reps, n))
    step = 1.0 / breaks
    for i in range(n):
        diff = values[:, i : i + 1] - grid  # (reps, grid)
        bet = bets[:, i : i + 1]
        log_up += np.log1p(np.minimum(bet, cap_up) * diff)
        log_down += np.log1p(-np.minimum(bet, cap_down) * diff)
        rejected |= np.maximum(log_up, log_down) >= barrier
        kept = ~rejected
        has = kept.any(axis=1)
        first = np.argmax(kept, axis=1)
        last = grid.size - 1 - np.argmax(kept[:, ::-1], axis=1)
        lower[:, i] = np.where(has, np.maximum(0.0, grid[first] - step), 0.0)
        upper[:, i] = np.where(has, np.minimum(1.0, grid[last] + step), 1.0)
    if single:
        return lower[0], upper[0]
    return lower, upper


def to_unit(values: npt.ArrayLike, low: float, high: float) -> FloatArray:
    """``values`` in [low, high] rescaled to [0, 1] (a paired difference lies in [−1, 1])."""
    out: FloatArray = (np.asarray(values, dtype=float) - low) / (high - low)
    return out


def from_unit(value: float, low: float, high: float) -> float:
    """A bound on the [0, 1] scale back on [low, high]."""
    return float(low + value * (high - low))


def interval(
    values: npt.ArrayLike, level: float, low: float = 0.0, high: float = 1.0
) -> tuple[float, float]:
    """The ``level`` confidence sequence of the mean of ``values`` (in [low, high]; NaN = not
    scorable, dropped) after its last value, on the values' own scale; (low, high) without
    values."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    if not x.size:
        return low, high
    lo, hi = confidence_sequence(to_unit(x, low, high), 1 - level)
    return from_unit(float(lo[-1]), low, high), from_unit(float(hi[-1]), low, high)


#: what per-item values are, which decides the tests a threshold on their mean gets
#: (flipgate.metrics.threshold_tests): ``binary`` (0/1: an item flips, parses, is right),
#: ``paired`` (a difference of two binary values, in {−1, 0, 1}), ``share`` (a share of an
#: item's K trials that is mostly all or none, e.g. its parse rate: tested through the items at
#: either end) or ``bounded`` (anything else in [low, high])
ValueKind = Literal["binary", "paired", "share", "bounded"]


@dataclass(frozen=True)
class ItemValues:
    """The per-item values behind a mean metric, in the order the items were drawn (NaN: the
    item could not be scored), the range they lie in (a rate: [0, 1]; a paired difference:
    [−1, 1]) and their kind."""

    values: FloatArray
    low: float = 0.0
    high: float = 1.0
    kind: ValueKind = "bounded"

    @classmethod
    def of(
        cls,
        values: npt.ArrayLike,
        low: float = 0.0,
        high: float = 1.0,
        kind: ValueKind = "bounded",
    ) -> ItemValues:
        return cls(np.asarray(values, dtype=float), low, high, kind)

    @property
    def scored(self) -> FloatArray:
        """The values of the items that could be scored."""
        out: FloatArray = self.values[~np.isnan(self.values)]
        return out

    @property
    def drawn(self) -> int:
        """Items drawn, scored or not."""
        return int(self.values.size)

    @property
    def n(self) -> int:
        """Items scored."""
        return int(self.scored.size)

    @property
    def estimate(self) -> float:
        """The mean over the scored items (NaN without any)."""
        return float(self.scored.mean()) if self.n else float("nan")

    def sequence(self, level: float) -> tuple[float, float]:
        """The ``level`` confidence sequence after the last value (:func:`interval`), shown
        for reading (the tests decide)."""
        return interval(self.scored, level, self.low, self.high)


@dataclass(frozen=True)
class SequentialSettings:
    """``audit.sequential`` in models.yaml: items enter in batches of ``batch_items``, and no
    cell stops before ``min_items``; the cap is the cell's ``items_per_dataset``."""

    batch_items: int = 8
    min_items: int = 16

    @classmethod
    def parse(cls, spec: Any) -> SequentialSettings | None:
        """``true`` (the defaults), ``false`` (fixed N: None) or ``{batch_items, min_items}``
        (already checked against the schema: each at least 1)."""
        if spec is False:
            return None
        if spec is True or spec is None:
            return cls()
        return cls(**{k: spec[k] for k in ("batch_items", "min_items") if k in spec})
