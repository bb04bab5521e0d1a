"""The K candidate orderings of the consensus judge: predetermined and reused across items
(PCFJudge §4.2), drawn once per candidate count n with the docs/definitions.md §2 grammar under a
fixed draw id, ordering 0 the canonical (source) order — the direct judge's. K is capped at n!
(a pair has two orders: the pairwise variant runs both)."""

from __future__ import annotations

import math

from flipgate.grammar import orderings

#: the grammar's item id for the shared draw (one draw per n, not per item)
DRAW_ID = "judge-consensus"


def judge_orderings(n: int, k: int, seed: int) -> list[tuple[int, ...]]:
    """``min(k, n!)`` distinct orderings of ``n`` candidates, canonical first."""
    return orderings(DRAW_ID, n, min(k, math.factorial(n)), seed)
