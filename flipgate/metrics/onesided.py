"""One-sided tests of a mean against a bound: the vocabulary every test of docs/definitions.md §12
shares (the look grid, the side tested, the evidence a test reports).

A gate threshold on a mean of bounded per-item values is decided by two one-sided tests, each at
α = 1 − the threshold's level: the *violation* test (its null: the bound holds; rejected → fail)
and the *conformance* test (its null: the bound is violated; rejected → pass). Which of the two
sides below each one tests follows from the threshold's direction (:func:`sides`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: ``above``: the null is mean ≤ bound and rejecting it shows the mean is above the bound;
#: ``below``: the null is mean ≥ bound and rejecting it shows the mean is below
Side = Literal["above", "below"]
#: the statistic a test reports: an e-value (reject when ≥ its critical value) or a p-value
#: (reject when ≤ its critical value)
Statistic = Literal["e", "p"]


#: in a group-sequential design (a cell that looks before its cap), the level of the exact test
#: at the cap as a share of α: the rest of α — with the fixed-N test's discreteness slack and the
#: paths both regions reject — pays for the early looks. Measured on the operating-characteristics
#: benchmark (docs/definitions.md §12.2): at 0.9 a clear truth at cap 200 stops in fewer items than
#: the turn-3 rule while no decided share falls more than 3 points below the fixed-N test's; at 1.0
#: clear truths waited for an e-value near 80.
FINAL_SHARE = 0.9


def sides(direction: Literal["max", "min"]) -> tuple[Side, Side]:
    """(violation side, conformance side) of a threshold whose bound is a ``max`` (the metric
    must stay at or below it) or a ``min``."""
    return ("above", "below") if direction == "max" else ("below", "above")


@dataclass(frozen=True)
class Looks:
    """Where a sequential cell may look at its data: after every ``batch`` items from
    ``min_items`` on, and at its ``cap`` (docs/definitions.md §12). A test calibrated on this grid
    keeps its error rate under looks at any subset of it."""

    cap: int
    batch: int = 8
    min_items: int = 16

    def __post_init__(self) -> None:
        if self.cap < 1 or self.batch < 1 or self.min_items < 1:
            raise ValueError(f"Looks: cap, batch and min_items must be at least 1 ({self})")

    @property
    def points(self) -> tuple[int, ...]:
        """The sample sizes at which a look may happen, the cap last."""
        first = min(self.min_items, self.cap)
        grid = [n for n in range(self.batch, self.cap, self.batch) if n >= first]
        return (*grid, self.cap)

    def last_point(self, n: int) -> int | None:
        """The largest look point at or below ``n`` values (None below the first)."""
        below = [p for p in self.points if p <= n]
        return below[-1] if below else None


@dataclass(frozen=True)
class Evidence:
    """What one one-sided test says after ``n`` values."""

    #: the test's name as the card prints it, e.g. "exact binomial" or "betting e-process"
    test: str
    side: Side
    #: whether the test rejects its null at this look
    rejected: bool
    statistic: Statistic
    #: the e-value or p-value
    value: float
    #: reject when value ≥ critical (an e-value) or value ≤ critical (a p-value)
    critical: float
    #: values the test used
    n: int
    #: whether it can still reject by the cap if every remaining value goes its way (False: it
    #: cannot be decided within the cap: futile)
    reachable: bool = True
    #: the predictive probability that it rejects by the cap (flipgate.metrics.futility); None:
    #: not computed (a fixed-N test, a rejected one, or one at its cap)
    chance: float | None = None
    #: a second test of the same side that has not rejected either, in one line (a share's
    #: betting e-process beside its exact test), printed before the count
    also: str | None = None

    def describe(self) -> str:
        """One line, e.g. ``exact binomial p = 0.012 <= 0.050 (n = 25)``."""
        if self.value != self.value:  # NaN: a fixed-N test still waiting for its items
            return f"{self.test}: pending (n = {self.n})"
        op = (
            (">=" if self.rejected else "<")
            if self.statistic == "e"
            else ("<=" if self.rejected else ">")
        )
        value = f"{self.value:.3g}" if self.statistic == "e" else f"{self.value:.4f}"
        critical = f"{self.critical:.3g}" if self.statistic == "e" else f"{self.critical:.4f}"
        also = f"; {self.also}" if self.also else ""
        return f"{self.test} {self.statistic} = {value} {op} {critical}{also} (n = {self.n})"
