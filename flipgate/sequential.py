"""Sequential gates (docs/definitions.md §12): a cell draws its items in the manifest's seeded
order, in batches, and stops as soon as every threshold that can be decided on a mean of
per-item values is decided by its anytime-valid confidence sequence, or at its item budget.

The stopping rule is suite-neutral: a suite hands :func:`run_sequential` its thresholds and a
function that measures the first n items and returns their per-item values
(:class:`~flipgate.metrics.sequential.ItemValues`, keyed ``(readout, metric)``); the gate
(:func:`flipgate.gate.evaluate`) then decides every such threshold on the same sequence, so the
verdict is the decision that stopped the cell.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from flipgate.cell import Cell
from flipgate.config import Threshold
from flipgate.facets import get_facet
from flipgate.gate import within
from flipgate.metrics.sequential import (
    FloatArray,
    ItemValues,
    SequentialSettings,
    confidence_sequence,
    from_unit,
    to_unit,
)

#: the rules whose verdict a confidence sequence can decide; ``point`` and ``warn`` thresholds
#: never hold a cell (they have no error rate to keep) and are read on the items used
DECIDING_RULES = ("lower", "upper")

StopReason = Literal["decided", "cap", "nothing to decide"]


def draws_sequentially(settings: SequentialSettings | None, name: str) -> bool:
    """Whether a facet or control cell ``name`` draws its items sequentially under ``settings``
    (None: fixed N, ``audit.sequential: false`` or ``--fixed-n``): not when its facet needs a
    judge over its whole item set."""
    return settings is not None and not get_facet(Cell.parse(name).facet).judged


class ThresholdDecision(BaseModel):
    """How one threshold stood when its cell stopped."""

    model_config = ConfigDict(frozen=True)

    threshold: str
    metric: str
    readout: str
    rule: str
    #: 'pass' or 'fail' once its sequence lay wholly on one side of the bound; None: undecided
    decision: Literal["pass", "fail"] | None = None
    #: items drawn when it was decided
    decided_at: int | None = None
    #: whether it could hold the cell: a lower/upper rule on a mean of per-item values
    holds: bool = True
    #: why it does not hold the cell, or why it held it to the cap
    note: str | None = None


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


def _decision(t: Threshold, values: ItemValues) -> Literal["pass", "fail"] | None:
    lo, hi = values.sequence(t.level)
    if within(lo, t) and within(hi, t):
        return "pass"
    if not within(lo, t) and not within(hi, t):
        return "fail"
    return None


def look(
    thresholds: list[Threshold],
    values: Mapping[tuple[str, str], ItemValues],
    primary: str,
    n_items: int,
    before: Mapping[str, ThresholdDecision] | None = None,
) -> list[ThresholdDecision]:
    """Each threshold's standing after ``n_items`` items: a threshold decided at an earlier look
    (``before``) keeps its decision (the running intersection never widens)."""
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
        decision = _decision(t, item_values)
        out.append(
            ThresholdDecision(**common, decision=decision, decided_at=n_items if decision else None)
        )
    return out


def run_sequential(
    settings: SequentialSettings,
    cap: int,
    thresholds: list[Threshold],
    primary: str,
    measure: Callable[[int], Mapping[tuple[str, str], ItemValues]],
    **key: Any,
) -> SequentialStop:
    """Draw items in batches (``measure(n)`` measures the first ``n`` and returns their per-item
    values) and look after each batch from ``min_items`` on, until every holding threshold is
    decided, or the ``cap``. ``key``: the stop's ``model_id``, ``dataset``, ``cell``,
    ``calls_per_item`` (and ``cap_from``)."""
    n, batches = 0, 0
    decisions: dict[str, ThresholdDecision] = {}
    holding = [t for t in thresholds if t.rule in DECIDING_RULES]
    while True:
        n = min(cap, n + settings.batch_items)
        batches += 1
        values = measure(n)
        if n < min(settings.min_items, cap):
            continue  # the first look is at min_items
        standing = look(thresholds, values, primary, n, decisions)
        decisions = {d.threshold: d for d in standing}
        open_ = [d for d in standing if d.holds and d.decision is None]
        if (holding and not open_) or n >= cap:
            break
    if not holding:
        reason: StopReason = "nothing to decide"
    else:
        reason = "decided" if not open_ else "cap"
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
