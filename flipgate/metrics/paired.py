"""Paired tests between two model versions on the same items (docs/definitions.md §11)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from scipy.stats import binom


@dataclass(frozen=True)
class McNemar:
    """Exact McNemar test on the discordant items: ``b`` changed for the worse only in the candidate
    (e.g. flips only in B), ``c`` only in the baseline. ``p_two_sided`` =
    min(1, 2·P[Bin(b+c, ½) ≤ min(b, c)]), ``p_regression`` = P[Bin(b+c, ½) ≥ b] (one-sided: the
    candidate is worse)."""

    b: int
    c: int
    p_two_sided: float
    p_regression: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mcnemar(b: int, c: int) -> McNemar:
    """docs/definitions.md §11: exact McNemar p-values from the discordant counts (both 1.0 when
    there are none)."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative (b={b}, c={c})")
    n = b + c
    if n == 0:
        return McNemar(0, 0, 1.0, 1.0)
    two_sided = min(1.0, 2.0 * float(binom.cdf(min(b, c), n, 0.5)))
    regression = float(binom.sf(b - 1, n, 0.5))  # P[X >= b]
    return McNemar(int(b), int(c), two_sided, regression)
