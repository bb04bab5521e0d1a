"""The core's cell loop (:func:`run_cell`): every suite's test measures its cell
(:meth:`flipgate.suite_api.SuiteCell.measure`), and this decides its thresholds, stores, reports
to Allure and asserts; with the input-error failure, the not-applicable and ungated skips, and
acting on the verdicts (:func:`assert_verdicts`)."""

from __future__ import annotations

import warnings
from typing import NoReturn

import pytest

from flipgate import FlipgateError
from flipgate.config import ThresholdSet
from flipgate.gate import evaluate
from flipgate.outcomes import BadInput, NotApplicable, NothingGated, Ungated
from flipgate.results import Verdict
from flipgate.suite_api import Gated, Measurement, SuiteCell


def fail_input(exc: FlipgateError) -> NoReturn:
    """Fail the cell with the error's one-line message (no chained traceback), typed
    :class:`~flipgate.outcomes.BadInput`: the run's usage-error status (flipgate.exitcodes)."""
    raise BadInput(f"flipgate: {exc}", pytrace=False) from None


#: how the skip reason of a cell that cannot exist for the model begins (it takes no images, an
#: ODI panel of one; typed :class:`~flipgate.outcomes.NotApplicable`): reported, and not a reason
#: to withhold GATE_PASSED
NOT_APPLICABLE = "not applicable: "
#: how the skip reason of a cell that no threshold could fail begins, let through by
#: ``--allow-ungated`` (typed :class:`~flipgate.outcomes.Ungated`)
UNGATED = "not gated (--allow-ungated): "
#: how the one-line failure of a cell that no threshold could fail begins (typed
#: :class:`~flipgate.outcomes.NothingGated`; flipgate.gate_ledger counts it)
NOTHING_GATED = "flipgate: nothing gated: "


def decide(gated: Gated, thresholds: ThresholdSet) -> list[Verdict]:
    """The verdicts of ``thresholds`` (its model's) on ``gated``
    (:class:`~flipgate.suite_api.Gated`)."""
    if gated.decide is not None:
        return gated.decide(thresholds)
    selected = thresholds.for_cell(gated.select or gated.cell, gated.dataset, gated.vs)
    return evaluate(
        [t for t in selected if gated.applies is None or gated.applies(t)],
        gated.estimates,
        gated.readout,
        thresholds.on_inconclusive,
        gated.sequences,
        gated.looks,
        gated.planned,
        **{"facet": gated.select or gated.cell, **gated.context},
    )


def run_cell(cell: SuiteCell) -> list[Verdict]:
    """One test: measure the cell, decide each gated part on its model's thresholds, store the
    measurement and the verdicts, report them to Allure and act on them (:func:`assert_verdicts`).
    A bad input fails the cell with its one-line message (:func:`fail_input`)."""
    try:
        measurement: Measurement = cell.measure()
        decided = [(g, decide(g, cell.thresholds(g.model))) for g in measurement.gated]
    except FlipgateError as exc:
        fail_input(exc)
    store = cell.auditor.store
    if measurement.record is not None:
        measurement.record(store)
    verdicts: list[Verdict] = []
    for gated, mine in decided:
        store.add_verdicts(gated.model, gated.dataset, gated.cell, mine)
        verdicts += mine
    if measurement.report is not None:
        measurement.report(verdicts)
    if measurement.not_applicable:
        skip_not_applicable(measurement.not_applicable)
    if measurement.failure:
        violated = "".join(f"\n  {v.describe()}" for v in verdicts if v.outcome == "fail")
        pytest.fail(measurement.failure + violated, pytrace=False)
    assert_verdicts(verdicts, cell.auditor.allow_ungated)
    return verdicts


def skip_not_applicable(why: str) -> NoReturn:
    """Skip a cell that cannot exist for this model (:data:`NOT_APPLICABLE`)."""
    raise NotApplicable(NOT_APPLICABLE + why)


class InconclusiveThreshold(UserWarning):
    """A threshold whose CI straddles its bound (docs/definitions.md §5)."""


class ThresholdWarning(UserWarning):
    """A ``warn``-rule threshold that was exceeded."""


def assert_verdicts(verdicts: list[Verdict], allow_ungated: bool) -> None:
    """Act on each verdict's outcome (flipgate.gate.outcome): fail on any 'fail', else xfail on
    any 'xfail', and warn on 'warn' (an exceeded ``warn`` bound or a tolerated inconclusive CI).
    A cell that no threshold could fail (none applies, or only ``rule: warn`` ones) fails with a
    usage error, since passing it would say nothing: unless ``allow_ungated``
    (``--allow-ungated``), which skips it with the reason instead."""
    if not any(v.rule != "warn" for v in verdicts):
        warned = [v.threshold for v in verdicts]
        why = (
            "no threshold in the thresholds files applies to this cell"
            if not warned
            else f"only rule: warn thresholds apply to this cell ({', '.join(warned)})"
        )
        if allow_ungated:
            raise Ungated(UNGATED + why)
        raise NothingGated(
            f"{NOTHING_GATED}{why}, so nothing could fail it; declare a threshold for it "
            "(docs/thresholds.md) or pass --allow-ungated to accept ungated cells",
            pytrace=False,
        )
    by = {o: [v for v in verdicts if v.outcome == o] for o in ("fail", "xfail", "warn")}
    if by["fail"]:
        pytest.fail(
            "threshold(s) violated:\n  " + "\n  ".join(v.describe() for v in by["fail"]),
            pytrace=False,
        )
    for v in by["warn"]:
        kind = InconclusiveThreshold if v.verdict == "inconclusive" else ThresholdWarning
        warnings.warn(
            ("inconclusive threshold: " if kind is InconclusiveThreshold else "") + v.describe(),
            kind,
            stacklevel=2,
        )
    if by["xfail"]:
        pytest.xfail(
            "inconclusive threshold(s):\n  " + "\n  ".join(v.describe() for v in by["xfail"])
        )
