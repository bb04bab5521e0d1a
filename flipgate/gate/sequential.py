"""Sequential gates (docs/definitions.md §12): a cell draws its items in the manifest's seeded
order, in batches, and stops as soon as every threshold that can be decided on a mean of
per-item values is decided by its two one-sided tests or can no longer be decided within the cap
(futile), or at its cap.

The stopping rule is suite-neutral: a suite hands :func:`run_sequential` its thresholds and a
function that measures the first n items and returns their per-item values
(:class:`~flipgate.metrics.sequential.ItemValues`, keyed ``(readout, metric)``); the gate
(:func:`flipgate.gate.rules.evaluate`) then decides every such threshold with the same tests on the
same look grid, so the verdict is the decision that stopped the cell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from flipgate import FlipgateError
from flipgate.cell import CellKey
from flipgate.config import Threshold
from flipgate.facets import get_facet
from flipgate.gate.rules import within
from flipgate.metrics.futility import FUTILITY_CHANCE
from flipgate.metrics.onesided import Looks
from flipgate.metrics.sequential import (
    FloatArray,
    ItemValues,
    SequentialSettings,
    confidence_sequence,
    from_unit,
    to_unit,
)
from flipgate.metrics.threshold_tests import MeanDecision, decide_mean, pending_fixed

#: the rules whose verdict a confidence sequence can decide; ``point`` and ``warn`` thresholds
#: never hold a cell (they have no error rate to keep) and are read on the items used
DECIDING_RULES = ("lower", "upper")

StopReason = Literal["decided", "cap", "nothing to decide", "undecidable"]


def draws_sequentially(settings: SequentialSettings | None, name: str) -> bool:
    """Whether a facet or control cell ``name`` draws its items sequentially under ``settings``
    (None: fixed N, ``audit.sequential: false`` or ``--fixed-n``): not when its facet needs a
    judge over its whole item set."""
    return settings is not None and not get_facet(CellKey.parse(name).facet).judged


class ThresholdDecision(BaseModel):
    """How one threshold stood when its cell stopped."""

    model_config = ConfigDict(frozen=True)

    threshold: str
    metric: str
    readout: str
    rule: str
    #: 'pass' or 'fail' once one of its one-sided tests rejected; None: undecided
    decision: Literal["pass", "fail"] | None = None
    #: items drawn when it was decided
    decided_at: int | None = None
    #: whether it could hold the cell: a lower/upper rule on a mean of per-item values
    holds: bool = True
    #: why it does not hold the cell, or why it held it to the cap
    note: str | None = None
    #: the deciding test with its e-value or p-value (both tests while undecided)
    test: str | None = None
    #: undecided and no longer decidable within the cap, however the remaining items go, or
    #: unlikely to be (predictive probability below FUTILITY_CHANCE): it stopped holding the cell
    futile: bool = False


class SequentialStop(BaseModel):
    """Where a sequential cell stopped and why (the card's and Allure's disclosure)."""

    model_config = ConfigDict(frozen=True)

    TABLE: ClassVar[str] = "sequential_stops"
    KEY: ClassVar[tuple[str, ...]] = ("model_id", "dataset", "cell")

    model_id: str
    dataset: str
    cell: str
    cap: int
    min_items: int
    batch_items: int
    #: items drawn (the first ``n_items`` of the seeded order)
    n_items: int
    #: batches drawn; the stopping batch is the last
    batches: int
    reason: StopReason
    #: the thresholds whose decision ended it (the last to be decided), when decided
    decided_by: list[str]
    thresholds: list[ThresholdDecision]
    #: model calls per item (K orderings, or K replicates for a control)
    calls_per_item: int
    #: a control's cap is the items its facet used (docs/definitions.md §12)
    cap_from: str | None = None
    #: the cap its tests were calibrated on when it is not ``cap`` (a control: its facet's)
    test_cap: int | None = None
    #: the dependents' thresholds (``cell: threshold``) that kept it drawing after its own were
    #: decided (docs/definitions.md §12.4), each decided later than its own last
    held_by: list[str] = []

    @property
    def looks(self) -> Looks:
        """The look grid its thresholds' tests were calibrated on."""
        return Looks(self.test_cap or self.cap, self.batch_items, self.min_items)

    @property
    def calls_used(self) -> int:
        return self.n_items * self.calls_per_item

    @property
    def calls_saved(self) -> int:
        """Model calls the cap would have taken beyond those drawn."""
        return (self.cap - self.n_items) * self.calls_per_item

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> SequentialStop:
        return cls.model_validate_json(text)


def look(
    thresholds: list[Threshold],
    values: Mapping[tuple[str, str], ItemValues],
    primary: str,
    looks: Looks,
    before: Mapping[str, ThresholdDecision] | None = None,
    planned: int | None = None,
) -> list[ThresholdDecision]:
    """Each threshold's standing after the items measured so far (a look point of ``looks``): a
    threshold decided at an earlier look (``before``) keeps its decision. ``planned``: the
    thresholds are decided by fixed-N tests once that many items are in (a regression case),
    and until then only their reachability is known."""
    out = []
    for t in thresholds:
        readout = t.readout or primary
        kept = (before or {}).get(t.label)
        if kept is not None and kept.decision is not None:
            out.append(kept)
            continue
        common: dict[str, Any] = dict(
            threshold=t.label, metric=t.metric, readout=readout, rule=t.rule
        )
        if t.rule not in DECIDING_RULES:
            out.append(ThresholdDecision(**common, holds=False, note=f"rule {t.rule}"))
            continue
        item_values = values.get((readout, t.metric))
        if item_values is None:
            note = f"{t.metric} is not a mean of per-item values: it holds the cell to the cap"
            out.append(ThresholdDecision(**common, note=note))
            continue
        decided = (
            decide_mean(item_values, t.bound, t.direction, 1 - t.level, looks)
            if planned is None
            else pending_fixed(item_values, t.bound, t.direction, 1 - t.level, planned)
        )
        out.append(
            ThresholdDecision(
                **common,
                decision=decided.decision,
                decided_at=decided.decided_at,
                test=decided.describe(),
                futile=decided.futile or decided.unlikely,
                note=_futility_note(decided, planned or looks.cap),
            )
        )
    return out


def _futility_note(decided: MeanDecision, cap: int) -> str | None:
    """Why an undecided threshold stopped holding its cell (docs/definitions.md §12.3)."""
    if decided.futile:
        return f"cannot be decided within the cap {cap}"
    if decided.unlikely:
        return (
            f"unlikely to be decided within the cap {cap}: predictive probability "
            f"{decided.chance:.3f} < {FUTILITY_CHANCE}"
        )
    return None


#: ``measure(n)``: the per-item values of the first ``n`` items, keyed ``(readout, metric)``
Measure = Callable[[int], Mapping[tuple[str, str], ItemValues]]


@dataclass(frozen=True)
class Dependent:
    """A cell whose thresholds read the items this cell draws — its same-ordering control, a
    regression case that compares it: this cell keeps drawing while one of them is undecided
    and can still be decided (docs/definitions.md §12.4). ``measure(n, trials)`` measures the
    dependent on the same first n items (``trials``: this cell's trials so far). ``planned``:
    the dependent is decided by fixed-N tests on that many items (a regression case: the items
    both versions will have drawn), so until then it only holds this cell while reachable."""

    cell: str
    thresholds: list[Threshold]
    #: None: it holds this cell to ``planned`` items whatever they show (an in-run baseline,
    #: whose candidate's case needs its items and is measured after it)
    measure: Callable[[int, pd.DataFrame], Mapping[tuple[str, str], ItemValues]] | None
    planned: int | None = None


def _held_to(dep: Dependent, n: int, primary: str) -> ThresholdDecision:
    """A dependent without a measure holds the cell until it has ``planned`` items."""
    assert dep.planned is not None
    return ThresholdDecision(
        threshold=dep.cell,
        metric="items",
        readout=primary,
        rule="lower",
        futile=n >= dep.planned,
        note=f"held to {dep.planned} items",
    )


def _open(standing: list[ThresholdDecision]) -> list[ThresholdDecision]:
    """The thresholds still holding a cell: undecided, and not futile."""
    return [d for d in standing if d.holds and d.decision is None and not d.futile]


def run_sequential(
    settings: SequentialSettings,
    cap: int,
    thresholds: list[Threshold],
    primary: str,
    measure: Measure,
    dependents: Sequence[Dependent] = (),
    test_cap: int | None = None,
    drawn: Callable[[], pd.DataFrame] | None = None,
    **key: Any,
) -> SequentialStop:
    """Draw items in batches (``measure(n)`` measures the first ``n`` and returns their per-item
    values) and look after each batch from ``min_items`` on, until every holding threshold —
    this cell's and its ``dependents``' — is decided or futile (it cannot be decided within the
    cap), or the ``cap``. ``test_cap``: the cap the tests are calibrated on, when it is not
    ``cap`` (a control: its facet's, so it decides exactly as its facet saw it while it held
    the facet). ``key``: the stop's ``model_id``, ``dataset``, ``cell``, ``calls_per_item`` (and
    ``cap_from``)."""
    if cap < 1:  # FacetPlans refuses a dataset its facet leaves empty; this is the last guard
        raise FlipgateError(
            f"cell {key.get('cell')!r} of model {key.get('model_id')!r} on dataset "
            f"{key.get('dataset')!r} has no items to draw (cap {cap}): nothing can be measured"
        )
    looks = Looks(test_cap or cap, settings.batch_items, settings.min_items)
    n, batches = 0, 0
    decisions: dict[str, ThresholdDecision] = {}
    held: dict[str, list[ThresholdDecision]] = {d.cell: [] for d in dependents}
    released: set[str] = set()
    holding = [t for t in thresholds if t.rule in DECIDING_RULES]
    while True:
        n = min(cap, n + settings.batch_items)
        batches += 1
        values = measure(n)
        if n not in looks.points and n < cap:
            continue  # the first look is at min_items
        standing = look(thresholds, values, primary, looks, decisions)
        decisions = {d.threshold: d for d in standing}
        for dep in dependents:
            if dep.cell in released or (held[dep.cell] and not _open(held[dep.cell])):
                continue  # decided, futile or not measurable: measured no further
            assert drawn is not None
            if dep.measure is None:
                held[dep.cell] = [_held_to(dep, n, primary)]
                continue
            dep_values = dep.measure(n, drawn())
            if not dep_values:  # nothing to compare (its own case says why): it holds nothing
                released.add(dep.cell)
                held[dep.cell] = []
                continue
            before = {d.threshold: d for d in held[dep.cell]}
            held[dep.cell] = look(dep.thresholds, dep_values, primary, looks, before, dep.planned)
        waiting = _open(standing) + [d for dep in held.values() for d in _open(dep)]
        if (holding and not waiting) or n >= cap:
            break
    open_ = [d for d in standing if d.holds and d.decision is None]
    if not holding:
        reason: StopReason = "nothing to decide"
    elif not open_:
        reason = "decided"
    else:
        reason = "cap" if n >= cap else "undecidable"
    last = max((d.decided_at or 0 for d in standing if d.holds), default=0)
    decided_by = [d.threshold for d in standing if d.holds and d.decided_at == last and last]
    return SequentialStop(
        cap=cap,
        min_items=settings.min_items,
        batch_items=settings.batch_items,
        n_items=n,
        batches=batches,
        reason=reason,
        decided_by=decided_by if reason == "decided" else [],
        thresholds=standing,
        held_by=[
            f"{cell}: {d.threshold}"
            for cell, standing_dep in held.items()
            for d in standing_dep
            if d.holds and d.decided_at is not None and d.decided_at > last
        ],
        test_cap=test_cap,
        **key,
    )


class OperatingCharacteristics(BaseModel):
    """How one sequential gate behaves on simulated items of known truth (:func:`simulate`):
    how often it fails and passes, and how many items it draws."""

    model_config = ConfigDict(frozen=True)

    replications: int
    failed: int
    passed_decided: int
    undecided: int
    #: items drawn per replication (the decision's batch, or the cap)
    items: list[int]

    @property
    def fail_rate(self) -> float:
        return self.failed / self.replications

    @property
    def mean_items(self) -> float:
        return sum(self.items) / len(self.items)


#: simulated per-item values: ``draw(rng, replications, n)`` -> an array (replications, n)
Draw = Callable[[np.random.Generator, int, int], FloatArray]


def bernoulli_items(p: float) -> Draw:
    """Cells whose per-item value is 1 with probability ``p`` (e.g. an item flips), else 0."""

    def draw(rng: np.random.Generator, replications: int, n: int) -> FloatArray:
        values: FloatArray = (rng.random((replications, n)) < p).astype(float)
        return values

    return draw


def paired_items(worse: float, better: float) -> Draw:
    """Cells of paired per-item differences candidate − baseline: +1 with probability ``worse``
    (an item newly flipping), −1 with ``better`` (fixed), else 0; the true delta is
    ``worse − better``."""

    def draw(rng: np.random.Generator, replications: int, n: int) -> FloatArray:
        u = rng.random((replications, n))
        values: FloatArray = np.where(u < worse, 1.0, np.where(u < worse + better, -1.0, 0.0))
        return values

    return draw


def simulate(
    draw: Draw,
    threshold: Threshold,
    settings: SequentialSettings,
    cap: int,
    replications: int,
    seed: int = 0,
    low: float = 0.0,
    high: float = 1.0,
) -> OperatingCharacteristics:
    """Run one threshold's sequential gate on ``replications`` simulated cells at once:
    ``draw(rng, replications, cap)`` gives every cell's per-item values (in [low, high]) in the
    order they would be drawn; each cell looks after every batch from ``min_items`` on, exactly as
    :func:`run_sequential` does, and stops at its first decision or the cap. A fail at the cap
    counts as failed only when the sequence is wholly beyond the bound there (the ``lower``
    rule's verdict; an ``upper`` threshold also fails when undecided, counted in ``undecided``).
    """
    rng = np.random.default_rng(seed)
    values = draw(rng, replications, cap)
    lower, upper = confidence_sequence(to_unit(values, low, high), 1 - threshold.level)
    looks = sorted({n for n in range(settings.batch_items, cap + 1, settings.batch_items)} | {cap})
    looks = [n for n in looks if n >= min(settings.min_items, cap)]
    decided = np.zeros(replications, dtype=bool)
    failed = np.zeros(replications, dtype=bool)
    items = np.full(replications, cap)
    for n in looks:
        lo = np.array([from_unit(v, low, high) for v in lower[:, n - 1]])
        hi = np.array([from_unit(v, low, high) for v in upper[:, n - 1]])
        inside = np.array([within(a, threshold) and within(b, threshold) for a, b in zip(lo, hi)])
        outside = np.array(
            [not within(a, threshold) and not within(b, threshold) for a, b in zip(lo, hi)]
        )
        new = ~decided & (inside | outside)
        failed |= new & outside
        items[new] = n
        decided |= new
    return OperatingCharacteristics(
        replications=replications,
        failed=int(failed.sum()),
        passed_decided=int((decided & ~failed).sum()),
        undecided=int((~decided).sum()),
        items=[int(n) for n in items],
    )
