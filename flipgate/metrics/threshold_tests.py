"""A threshold on a mean of bounded per-item values, decided by two one-sided tests
(docs/definitions.md §12.1–12.3).

Each test runs at α = 1 − the threshold's level: the *violation* test (null: the bound holds)
rejects → **fail**; the *conformance* test (null: the bound is violated) rejects → **pass**.
Which test applies depends on the values' kind (:class:`~flipgate.metrics.sequential.ItemValues`):

========  ==========================================  =======================================
kind      fixed N (no look before the end)            sequential (looks on a grid to a cap)
========  ==========================================  =======================================
binary    exact binomial                              group-sequential binomial (exact size)
paired    exact unconditional paired test             group-sequential paired (exact size)
share     binary tests on the items at one end, or    the same, the binary part
          betting on the shares (0.8 α / 0.2 α)       group-sequential
bounded   betting e-process at the full α             the same (valid at every look)
========  ==========================================  =======================================

A ``share`` (an item's share of K trials, e.g. its parse rate) is tested by two tests whose
levels add up to α (:func:`_share_side`): through binary indicators — "mean above m" is proven
when the share of items at the top of the range (every trial counted) is proven above m, since
that share is at most the mean; "mean below m" when the share of items above the bottom (any
trial counted) is proven below m: as strong as the binary tests where items are all or none
(31 items that all parse prove ``parse_rate >= 0.9``) — or by the betting e-process on the
shares themselves, which decides where items parse partly.

An item that could not be scored (NaN): a fixed-N test is on the items that could be scored,
and so is a binary test on a look grid (:func:`_scored_scan`: at each look the largest look point
the scored count has reached; at the cap, short of it, a last look on every scored value).
Other kinds on a look grid take a NaN as the value least favourable to each test — the range's
low end for a test of "above the bound", its high end for "below" — so every look stays on the
grid and a missing item can only make a test more cautious. A test that can no longer reject
by the cap however the remaining items go is *futile*; a threshold whose two tests are both
futile cannot be decided within the cap, and one whose tests are unlikely to reject by it
(:mod:`flipgate.metrics.futility`) stops holding its cell too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from flipgate.metrics.betting import betting_test, log_e_process
from flipgate.metrics.binary_tests import (
    BinaryDesign,
    binary_design,
    binary_fixed_test,
    fixed_region,
    last_look_test,
)
from flipgate.metrics.futility import FUTILITY_CHANCE, binary_chance, completions
from flipgate.metrics.onesided import Evidence, Looks, Side, sides
from flipgate.metrics.paired_exact import paired_design, paired_fixed_test
from flipgate.metrics.sequential import ItemValues

FloatArray = npt.NDArray[np.float64]
Decision = Literal["pass", "fail"]

#: a share's test: the share of α its exact test on the items at one end of the range keeps; the
#: rest goes to the betting e-process on the shares (:func:`_share_side`). 0.8: all-or-none
#: items lose little (31 items that all parse prove parse_rate >= 0.9, 29 with all of α) while
#: partly parsed items far from the bound are decided at all (SmolLM2's MMLU parse rate, 0.925
#: against >= 0.8, stayed undecided at its cap of 80 through the ends alone; now decided at 64)
SHARE_ENDS = 0.8


class _Design(Protocol):
    def evidence(self, x: FloatArray, final: bool) -> Evidence: ...


@dataclass(frozen=True)
class MeanDecision:
    """How a threshold stands after the items so far: ``decision`` None while undecided."""

    decision: Decision | None
    #: the items drawn when it was decided (the look that decided it)
    decided_at: int | None
    violation: Evidence
    conformance: Evidence

    @property
    def deciding(self) -> Evidence | None:
        """The test that decided it (None while undecided)."""
        if self.decision is None:
            return None
        return self.violation if self.decision == "fail" else self.conformance

    @property
    def futile(self) -> bool:
        """Undecided, and neither test can reject by the cap however the remaining items go."""
        return self.decision is None and not (
            self.violation.reachable or self.conformance.reachable
        )

    @property
    def chance(self) -> float | None:
        """The predictive probability that one of the two tests rejects by the cap (their sum:
        an upper bound), or None where a test that can still reject has none."""
        total = 0.0
        for evidence in (self.violation, self.conformance):
            if not evidence.reachable:
                continue
            if evidence.chance is None:
                return None
            total += evidence.chance
        return min(total, 1.0)

    @property
    def unlikely(self) -> bool:
        """Undecided, not futile, and unlikely to be decided by the cap: the predictive
        probability of a decision is below :data:`~flipgate.metrics.futility.FUTILITY_CHANCE`
        (docs/definitions.md §12.3)."""
        chance = self.chance
        return (
            self.decision is None
            and not self.futile
            and chance is not None
            and chance < FUTILITY_CHANCE
        )

    def describe(self) -> str:
        """The deciding test in one line, or both tests while undecided."""
        deciding = self.deciding
        if deciding is not None:
            return deciding.describe()
        return f"violation: {self.violation.describe()}; conformance: {self.conformance.describe()}"


def _scored_scan(
    design: BinaryDesign, raw: FloatArray, looks: Looks, side: Side
) -> tuple[Evidence, int | None]:
    """A group-sequential binary test on the scored values only: at each look (drawn items) the
    largest look point p at or below the number scored so far, tested once, on the first p scored
    values. Items are exchangeable, so the scored ones are a sample of the scored population
    whatever the unscored ones are, and a test that looks at a subset of its look points keeps
    its error rate; without unscored items this is every look, as :func:`_scan`. The final
    region is the design's when the scored values reach the cap; when the cell reaches its cap
    with fewer, a last look tests every scored value at the level the looks made leave
    (:func:`~flipgate.metrics.binary_tests.last_look_region`; with none made, the full α)."""
    scored = raw[~np.isnan(raw)]
    counts = np.cumsum(~np.isnan(raw))
    last: Evidence | None = None
    tested: set[int] = set()
    for point in looks.points:
        if point > raw.size:
            break
        p = looks.last_point(int(counts[point - 1]))
        if p is None or p in tested:
            continue
        tested.add(p)
        last = design.evidence(scored[:p], final=p == looks.cap)
        if last.rejected:
            return last, point
    at_cap = raw[: looks.cap]
    at_cap = at_cap[~np.isnan(at_cap)]
    if raw.size >= looks.cap and 0 < at_cap.size < looks.cap:  # the cap, short of scored values
        last = last_look_test(design, tested, at_cap)
        return last, (looks.cap if last.rejected else None)
    if last is None:  # no look point reached by the scored values yet
        last = Evidence("no look yet", side, False, "e", 1.0, float("inf"), 0)
    # reachable only through look points the scored values can still reach by the cap (every
    # remaining item scored and going this test's way), or through the cap's last look on fewer
    # scored values than the cap (its region lies inside the fixed-N region at the full α)
    most = scored.size + max(looks.cap - raw.size, 0)
    ones = int(scored[: last.n].sum())
    later = [p for p in looks.points if last.n < p <= most]
    reachable = any(
        design.region(p)[ones + (p - last.n) if side == "above" else ones] for p in later
    )
    if most < looks.cap and most > last.n:
        best = ones + (most - last.n) if side == "above" else ones
        reachable |= bool(fixed_region(most, design.m, side, design.alpha)[best])
    return replace(last, reachable=reachable), None


def _impute(values: FloatArray, side: Side, low: float, high: float) -> FloatArray:
    """Unscored items (NaN) as the value least favourable to a test of ``side``."""
    out: FloatArray = np.where(np.isnan(values), low if side == "above" else high, values)
    return out


def _scan(design: _Design, x: FloatArray, looks: Looks, side: Side) -> tuple[Evidence, int | None]:
    """A group-sequential test at every look point so far: the first rejection, or the last
    look's evidence (the values so far when no look point has been reached)."""
    last: Evidence | None = None
    for point in looks.points:
        if point > x.size:
            break
        last = design.evidence(x[:point], final=point == looks.cap)
        if last.rejected:
            return last, point
    if last is None:  # before the first look: nothing tested yet
        last = Evidence("no look yet", side, False, "e", 1.0, float("inf"), int(x.size))
    return last, None


def _betting(
    u: FloatArray, m: float, side: Side, alpha: float, looks: Looks | None
) -> tuple[Evidence, int | None]:
    """The betting e-process, and the look at which it first reached 1/α."""
    cap = looks.cap if looks is not None else int(u.size)
    evidence = betting_test(u, m, side, alpha, cap)
    if not evidence.rejected or not 0.0 < m < 1.0:
        return evidence, (int(u.size) if evidence.rejected else None)
    crossed = int(np.argmax(log_e_process(u, m, side) >= np.log(1.0 / alpha))) + 1
    if looks is None:
        return evidence, int(u.size)
    points = [p for p in looks.points if p >= crossed]
    return evidence, (points[0] if points else int(u.size))


def _with_chance(evidence: Evidence, chance: float | None) -> Evidence:
    """``evidence`` with its predictive chance of rejecting by the cap: 0 when it cannot, none
    once it rejected."""
    if evidence.rejected:
        return evidence
    return replace(evidence, chance=chance if evidence.reachable else 0.0)


def _share_side(
    values: ItemValues,
    x: FloatArray,
    bound: float,
    side: Side,
    alpha: float,
    looks: Looks | None,
    chance: bool,
) -> tuple[Evidence, int | None]:
    """A share (an item's share of K trials) by two tests, rejecting when either does (a union of
    two valid tests whose levels add up to α is valid at α): at :data:`SHARE_ENDS` · α the exact
    binary test on the items at the end of the range that bounds the mean from the other side —
    1[x = high] ≤ x proves "above", 1[x > low] ≥ x proves "below", sharp when items are all or
    none — and at the rest of α the betting e-process on the shares themselves, sharp when
    items are partly one and partly the other."""
    span = values.high - values.low
    m = (bound - values.low) / span
    ends = (x >= values.high) if side == "above" else (x > values.low)
    tops = ItemValues.of(ends.astype(float), kind="binary")
    ends_alpha, bet_alpha = SHARE_ENDS * alpha, (1.0 - SHARE_ENDS) * alpha
    ends_ev, ends_at = _one_side(tops, m, side, ends_alpha, looks, chance)
    where = "at the top" if side == "above" else "above the bottom"
    ends_ev = replace(ends_ev, test=f"{ends_ev.test} on the items {where} of the range")
    bet_ev, bet_at = _betting((x - values.low) / span, m, side, bet_alpha, looks)
    bet_ev = replace(bet_ev, test=f"{bet_ev.test} on the shares")
    if ends_at is not None and (bet_at is None or ends_at <= bet_at):
        return ends_ev, ends_at
    if bet_at is not None:
        return bet_ev, bet_at
    bet_chance = None
    # simulated only where it counts: with no chance for the ends' test the sum has none either
    wanted = chance and ends_ev.chance is not None and bet_ev.reachable
    if wanted and looks is not None and 0 < values.drawn < looks.cap:
        paths = completions(values.values, values.low, values.high, looks.cap)
        u = (_impute(paths, side, values.low, values.high) - values.low) / span
        bet_chance = float(
            np.mean([_betting(row, m, side, bet_alpha, looks)[0].rejected for row in u])
        )
    if ends_ev.chance is None or (bet_ev.reachable and bet_chance is None):
        total = None
    else:
        total = min(1.0, ends_ev.chance + (bet_chance or 0.0))
    undecided = replace(
        ends_ev,
        also=f"{bet_ev.test} e = {bet_ev.value:.3g} < {bet_ev.critical:.3g}",
        reachable=ends_ev.reachable or bet_ev.reachable,
    )
    return _with_chance(undecided, total), None


def _one_side(
    values: ItemValues,
    bound: float,
    side: Side,
    alpha: float,
    looks: Looks | None,
    chance: bool = True,
) -> tuple[Evidence, int | None]:
    """One one-sided test on ``values``; on a look grid with ``chance``, its evidence carries
    the predictive probability that it rejects by the cap (futility, §12.3)."""
    # a fixed-N test is on the items that could be scored; on a look grid an unscored item keeps
    # its place as the value least favourable to the test (binary values: left out instead)
    x = values.scored if looks is None else _impute(values.values, side, values.low, values.high)
    if values.kind == "binary":
        if looks is None:
            ev = binary_fixed_test(x, bound, side, alpha)
            return ev, (ev.n if ev.rejected else None)
        design = binary_design(bound, side, looks, alpha)
        scored = values.scored
        ev, at = _scored_scan(design, values.values, looks, side)
        if chance:
            ev = _with_chance(ev, binary_chance(design, ev.n, int(scored[: ev.n].sum())))
        return ev, at
    if values.kind == "share":
        return _share_side(values, x, bound, side, alpha, looks, chance)
    if values.kind == "paired" and values.low < bound < values.high:
        if looks is None:
            ev = paired_fixed_test(x, bound, side, alpha)
            return ev, (ev.n if ev.rejected else None)
        ev, at = _scan(paired_design(bound, side, looks, alpha), x, looks, side)
    else:  # bounded values, and a paired bound at the edge of its range (betting handles edges)
        span = values.high - values.low
        u = (x - values.low) / span
        ev, at = _betting(u, (bound - values.low) / span, side, alpha, looks)
    return ev, at


def decide_mean(
    values: ItemValues,
    bound: float,
    direction: Literal["max", "min"],
    alpha: float,
    looks: Looks | None = None,
) -> MeanDecision:
    """Both one-sided tests of a threshold ``metric <= bound`` (``max``) or ``>= bound``
    (``min``) on ``values`` (drawn order), each at ``alpha``. ``looks``: the cell's look grid
    (sequential); None: a fixed-N run. The first test to reject decides (at one look a violation
    wins)."""
    violation_side, conformance_side = sides(direction)
    violation, fail_at = _one_side(values, bound, violation_side, alpha, looks)
    conformance, pass_at = _one_side(values, bound, conformance_side, alpha, looks)
    if fail_at is not None and (pass_at is None or fail_at <= pass_at):
        return MeanDecision("fail", fail_at, violation, conformance)
    if pass_at is not None:
        return MeanDecision("pass", pass_at, violation, conformance)
    return MeanDecision(None, None, violation, conformance)


def _fixed_chance(
    values: ItemValues, bound: float, side: Side, alpha: float, planned: int
) -> float:
    """The predictive probability that the fixed-N test of ``side`` rejects once ``planned``
    values are in, over Bayesian-bootstrap completions (flipgate.metrics.futility)."""
    paths = completions(values.values, values.low, values.high, planned)
    if values.kind == "paired" and values.low < bound < values.high:
        # the exact paired region per number of scored pairs (unscored ones are left out)
        scored = (~np.isnan(paths)).sum(axis=1)
        hits = np.zeros(paths.shape[0], dtype=bool)
        for n in np.unique(scored):
            if n == 0:
                continue
            rows = paths[scored == n]
            design = paired_design(bound, side, Looks(int(n), int(n), int(n)), alpha)
            hits[scored == n] = design.rejects_after(rows[~np.isnan(rows)].reshape(-1, n), 0)
        return float(hits.mean())
    hits_list = [
        _one_side(
            ItemValues.of(row, values.low, values.high, values.kind), bound, side, alpha, None
        )[0].rejected
        for row in paths
    ]
    return float(np.mean(hits_list))


def pending_fixed(
    values: ItemValues,
    bound: float,
    direction: Literal["max", "min"],
    alpha: float,
    planned: int,
) -> MeanDecision:
    """A threshold decided by the fixed-N tests once ``planned`` values are in (a regression
    case: the items both versions will have drawn), before that: undecided, each test reachable
    while the most favourable continuation to ``planned`` values would make it reject (monotone
    tests: every remaining value at the end of the range that favours it)."""
    if values.drawn >= planned:
        return decide_mean(values, bound, direction, alpha)
    found: dict[Side, Evidence] = {}
    for side in sides(direction):
        best = values.high if side == "above" else values.low
        rest = np.full(planned - values.drawn, best)
        completed = ItemValues.of(np.r_[values.values, rest], values.low, values.high, values.kind)
        ev, _ = _one_side(completed, bound, side, alpha, None)
        found[side] = Evidence(
            f"{ev.test} once {planned} items are in",
            side,
            False,
            ev.statistic,
            float("nan"),
            ev.critical,
            values.drawn,
            ev.rejected,
            _fixed_chance(values, bound, side, alpha, planned) if ev.rejected else 0.0,
        )
    violation_side, conformance_side = sides(direction)
    return MeanDecision(None, None, found[violation_side], found[conformance_side])
