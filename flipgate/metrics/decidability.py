"""How many items a threshold's one-sided tests need before they can reject at all
(docs/definitions.md §12.3, futility before any model call).

A ``lower``/``upper`` threshold on a mean of bounded per-item values is decided by two one-sided
tests (:func:`~flipgate.metrics.threshold_tests.decide_mean`): the *violation* test (rejects →
fail) and the *conformance* test (rejects → pass). Each needs a least number of items even when
every item has the value most favourable to it — binary: all 1 or all 0; paired differences:
all +1 or all −1; bounded values: all at the range's high or low end. A cell whose cap is below
that number cannot reject that test whatever the model answers: an ``upper`` rule that can never
pass, or a ``lower`` rule that can never fail (it checks nothing). :func:`items_needed` finds
the number with ``decide_mean`` itself as the oracle, so it follows the shipped tests exactly:

- **fixed N** (``sequential`` False): the fixed-N tests at the full α on N items;
- **sequential**: the cell's look grid ``Looks(cap=N, batch_items, min_items)`` — the final look
  at N applies the exact test at the cap, the earlier looks the early boundaries.

The search starts from a lower bound no valid test can beat: a test of size ≤ α that rejects on
the all-favourable path after n items needs that path's null probability ≤ α — (1 − m)^n or m^n
for a rate m, ((1 ± δ0)/2)^n for paired differences (the nuisance at full discordance); for
bounded values it starts from where the betting e-process (flipgate.metrics.betting) first
reaches 1/α. A bound at the edge of the range is decided by one item on its refutable side
(a single value beyond it) and never on the other (nothing can prove a rate below 0). Where that
bound exceeds :data:`ORACLE_LIMIT` items it is the answer without asking ``decide_mean``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Literal

import numpy as np

from flipgate.metrics.betting import log_e_process
from flipgate.metrics.onesided import Looks, Side, sides
from flipgate.metrics.sequential import ItemValues, ValueKind
from flipgate.metrics.threshold_tests import decide_mean

Direction = Literal["max", "min"]

#: items beyond which no test is looked for (None: even this many are too few)
SEARCH_LIMIT = 10_000
#: ``decide_mean`` is asked about caps up to this many items (an exact design's calibration grows
#: with the cap squared or faster); beyond it the answer is the bound no valid test beats (exact
#: for binary and bounded values at fixed N, a lower bound otherwise), and a cap beyond it that
#: the bound allows counts as decidable
ORACLE_LIMIT = 1_000
#: candidates tried one by one above the starting bound before the search doubles its step (the
#: group-sequential designs need a few items more than the bound; one by one finds the least)
_LINEAR_STEPS = 32

#: the per-item values behind each mean metric a gate decides with two one-sided tests: (kind,
#: low, high). The order suite's (flipgate.summary.item_values) and the regression deltas
#: (flipgate.regression.compare.CellComparison.sequences: differences of two binary values are
#: ``paired``, of parse rates in [−1, 1] and of Δ_order in [−2, 2] ``bounded``).
ITEM_MEAN_METRICS: dict[str, tuple[ValueKind, float, float]] = {
    "flip_rate": ("binary", 0.0, 1.0),
    "flip_rate_same": ("binary", 0.0, 1.0),
    "osi": ("bounded", 0.0, 1.0),
    "pairwise_disagreement": ("bounded", 0.0, 1.0),
    "parse_rate": ("share", 0.0, 1.0),
    "accuracy": ("bounded", 0.0, 1.0),
    "delta_order": ("paired", -1.0, 1.0),
    "delta_flip_rate": ("paired", -1.0, 1.0),
    "delta_accuracy": ("paired", -1.0, 1.0),
    "delta_parse_rate": ("bounded", -1.0, 1.0),
    "delta_delta_order": ("bounded", -2.0, 2.0),
}


def favourable_value(side: Side, low: float, high: float) -> float:
    """The per-item value most favourable to a test of ``side``: the range's high end for a test
    that the mean is above its bound, its low end for one that it is below."""
    return high if side == "above" else low


def _edge(side: Side, bound: float, low: float, high: float) -> int | None | Literal[False]:
    """A bound at (or beyond) the range's edge: 1 where one item beyond it refutes the null,
    None where nothing can (e.g. "mean below 0"); False for a bound inside the range."""
    if low < bound < high:
        return False
    refutable = (side == "above" and bound <= low) or (side == "below" and bound >= high)
    return 1 if refutable else None


def _start(
    kind: ValueKind, side: Side, bound: float, low: float, high: float, alpha: float
) -> int | None:
    """The least N any valid test could reject at (see the module docstring); None when even
    :data:`SEARCH_LIMIT` items are too few."""
    m = (bound - low) / (high - low)  # the bound on the [0, 1] scale
    if kind == "bounded":
        log_e = log_e_process(np.full(SEARCH_LIMIT, 1.0 if side == "above" else 0.0), m, side)
        crossed = np.flatnonzero(log_e >= math.log(1.0 / alpha))
        return int(crossed[0]) + 1 if crossed.size else None
    # the all-favourable path's probability per item on the null boundary: a rate m (binary);
    # P(+1) = (1 + δ0)/2 at full discordance (paired)
    per_item = m if side == "above" else 1.0 - m
    n = math.log(alpha) / math.log(per_item)
    start = max(1, math.ceil(n - 1e-9))
    return start if start <= SEARCH_LIMIT else None


def _oracle(
    kind: ValueKind,
    side: Side,
    bound: float,
    direction: Direction,
    low: float,
    high: float,
    alpha: float,
    sequential: bool,
    batch_items: int,
    min_items: int,
) -> Callable[[int], bool]:
    """n ↦ whether ``decide_mean``'s test of ``side`` rejects on n all-favourable items in a cell
    capped at n (fixed N, or the look grid ``Looks(n, batch_items, min_items)``)."""
    value = favourable_value(side, low, high)
    violation_side = sides(direction)[0]

    def rejects(n: int) -> bool:
        looks = Looks(n, batch_items, min_items) if sequential else None
        values = ItemValues.of(np.full(n, value), low, high, kind)
        decided = decide_mean(values, bound, direction, alpha, looks)
        evidence = decided.violation if side == violation_side else decided.conformance
        return evidence.rejected

    return rejects


def _least(rejects: Callable[[int], bool], first: int, last: int) -> int | None:
    """The least n in [first, last] with ``rejects(n)``: one by one for :data:`_LINEAR_STEPS`
    candidates, then in doubling steps, then by bisection between the last miss and the first
    hit (the region of a test on all-favourable items grows with n beyond its first few)."""
    if first > last:
        return None
    n = first
    for _ in range(_LINEAR_STEPS):
        if rejects(n):
            return n
        if n == last:
            return None
        n += 1
    miss, step = n - 1, 1
    while True:
        n = min(miss + step, last)
        if rejects(n):
            break
        if n == last:
            return None
        miss, step = n, step * 2
    hit = n
    while hit - miss > 1:
        mid = (miss + hit) // 2
        if rejects(mid):
            hit = mid
        else:
            miss = mid
    return hit


@lru_cache(maxsize=4096)
def _needed(
    kind: ValueKind,
    side: Side,
    low: float,
    high: float,
    bound: float,
    direction: Direction,
    alpha: float,
    sequential: bool,
    cap: int,
    batch_items: int,
    min_items: int,
) -> int | None:
    edge = _edge(side, bound, low, high)
    if edge is not False:
        return edge
    start = _start(kind, side, bound, low, high, alpha)
    if start is None or start > ORACLE_LIMIT:
        return start
    rejects = _oracle(
        kind, side, bound, direction, low, high, alpha, sequential, batch_items, min_items
    )
    if start <= cap and (cap > ORACLE_LIMIT or rejects(cap)):
        # decidable within the cap: the least N, searched from the bound up to the cap
        found = _least(rejects, start, min(cap, ORACLE_LIMIT))
        return start if found is None else found
    found = _least(rejects, max(start, cap + 1), ORACLE_LIMIT)
    return ORACLE_LIMIT + 1 if found is None else found


def items_needed(
    kind: ValueKind,
    low: float,
    high: float,
    bound: float,
    direction: Direction,
    alpha: float,
    sequential: bool,
    cap: int,
    batch_items: int = 8,
    min_items: int = 16,
) -> tuple[int | None, int | None]:
    """(violation, conformance): for each of a threshold's two one-sided tests, the least number
    of items N at which it rejects when every item has the value most favourable to it
    (:func:`favourable_value`), deciding as
    :func:`~flipgate.metrics.threshold_tests.decide_mean` does in a cell capped at N — fixed N,
    or with ``sequential`` the look grid ``Looks(N, batch_items, min_items)``. None: no N up to
    :data:`SEARCH_LIMIT` (e.g. ``flip_rate <= 0`` can never be proven).

    ``cap`` is the cell's cap: an answer ≤ ``cap`` means the test can reject in that cell
    (checked at ``cap`` itself, so it holds even where the designs of different caps disagree);
    an answer above it, that it cannot. ``threshold <= bound`` is ``direction`` "max", ``>=``
    "min"; ``alpha`` = 1 − the threshold's level; values of ``kind`` lie in [``low``,
    ``high``]. Beyond :data:`ORACLE_LIMIT` items an answer is a lower bound (module docstring).
    Cached: each distinct call is computed once per process."""
    if not low < high:
        raise ValueError(f"items_needed: low must be below high (values: {low!r}, {high!r})")
    if cap < 1:
        raise ValueError(f"items_needed: cap must be at least 1 (value: {cap!r})")
    violation_side, conformance_side = sides(direction)
    args = (low, high, float(bound), direction, float(alpha), sequential, int(cap))
    settings = (batch_items, min_items)
    return (
        _needed(kind, violation_side, *args, *settings),
        _needed(kind, conformance_side, *args, *settings),
    )


#: how a line names the case where every item has a metric's extreme value (metric, value)
_ALL_ITEMS = {
    ("flip_rate", 1.0): "every item flips",
    ("flip_rate", 0.0): "no item flips",
    ("flip_rate_same", 1.0): "every item flips",
    ("flip_rate_same", 0.0): "no item flips",
    ("parse_rate", 1.0): "every item parses",
    ("parse_rate", 0.0): "no item parses",
    ("accuracy", 1.0): "every item is answered right",
    ("accuracy", 0.0): "every item is answered wrong",
    ("delta_order", 1.0): "every item flips under reordering and never in its control",
    ("delta_order", -1.0): "every item flips in its control and never under reordering",
    ("delta_flip_rate", 1.0): "the candidate newly flips on every item",
    ("delta_flip_rate", -1.0): "the candidate stops flipping on every item",
    ("delta_accuracy", 1.0): "the candidate newly answers every item right",
    ("delta_accuracy", -1.0): "the candidate newly answers every item wrong",
}


def every_item(metric: str, side: Side) -> str:
    """Words for "every item has the value most favourable to the test of ``side``", e.g.
    ``every item parses``, for :data:`ITEM_MEAN_METRICS`."""
    _, low, high = ITEM_MEAN_METRICS[metric]
    value = favourable_value(side, low, high)
    return _ALL_ITEMS.get((metric, value), f"every item's {metric} is {value:g}")


def undecidable_line(
    metric: str,
    direction: Direction,
    rule: str,
    cap: int,
    needed: int | None,
    undecided: str,
) -> str:
    """Why a threshold's deciding test cannot reject within ``cap`` items (``needed``: what
    :func:`items_needed` says it needs, None: no number), and what the gate then does
    (``undecided``: its outcome while undecided, flipgate.gate.rules.outcome). An ``upper`` rule is
    decided by its conformance test (it can only pass once that rejects), a ``lower`` rule by its
    violation test (it can only fail once that rejects)."""
    violation_side, conformance_side = sides(direction)
    if rule == "upper":
        test = "conformance"
        head = f"cannot pass within the cap of {cap} items even if "
        head += every_item(metric, conformance_side)
        fate = (
            "it will fail as not proven"
            if undecided == "fail"
            else f"undecided, it ends as {undecided}"
        )
        loosen = "lower" if direction == "min" else "raise"
        fix = f"raise items_per_dataset or {loosen} the bound"
    else:
        test = "violation"
        head = f"can never fail within the cap of {cap} items, even if "
        head += every_item(metric, violation_side)
        fate = "the gate checks nothing there: undecided, it " + (
            "passes with a warning" if undecided == "warn" else f"ends as {undecided}"
        )
        fix = "raise items_per_dataset"
    if needed is None:
        need = f"its {test} test cannot reject at any number of items (the bound is at the edge "
        need += "of the metric's range)"
        fix = "move the bound inside the range"
    else:
        need = f"its {test} test needs at least {needed} items"
    return f"{head}: {need} ({fate}; {fix})"
