"""The K candidate orderings of the consensus judge: predetermined and reused across items
(PCFJudge §4.2), ordering 0 the canonical (source) order — the direct judge's. Two designs:

- ``balanced`` (default): whole Latin squares — the n cyclic rotations of the canonical order,
  then of further orderings drawn with the docs/definitions.md §2 grammar — so that every
  candidate is shown in every position equally often. K is rounded down to a multiple of n (at
  least n) and capped at n!. A purely position-biased judge then gives every candidate the same
  consensus: a tie, no winner, instead of a winner chosen by where candidates happened to be shown.
- ``drawn``: the grammar's K orderings under one fixed draw id, capped at n!. Shared orderings
  are not position-balanced: a position-biased judge's consensus goes to whichever candidate the
  draw shows first most often (docs/definitions.md §9 has the measured case).

A pair has two orders under both designs: the pairwise variant runs both.
"""

from __future__ import annotations

import math

from flipgate.grammar import orderings

#: the grammar's item id for the shared draw (one draw per n, not per item)
DRAW_ID = "judge-consensus"
DESIGNS = ("balanced", "drawn")


def _rotations(perm: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [perm[j:] + perm[:j] for j in range(len(perm))]


def judge_orderings(n: int, k: int, seed: int, design: str = "balanced") -> list[tuple[int, ...]]:
    """The shared orderings of ``n`` candidates under ``design``, canonical first."""
    if design == "drawn":
        return orderings(DRAW_ID, n, min(k, math.factorial(n)), seed)
    if design != "balanced":
        raise ValueError(f"unknown ordering design {design!r}; known: {', '.join(DESIGNS)}")
    k = min(math.factorial(n), max(n, k // n * n))
    chosen: list[tuple[int, ...]] = []
    for base in orderings(DRAW_ID, n, min(math.factorial(n), 4 * k), seed):
        if len(chosen) == k:
            break
        if base not in chosen:
            chosen += _rotations(base)
    if len(chosen) < k:  # pragma: no cover - a pool of 4K holds K/n rotation classes
        raise ValueError(f"could not draw {k // n} Latin squares of {n} candidates")
    return chosen
