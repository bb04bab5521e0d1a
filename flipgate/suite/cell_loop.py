"""The core's cell: what a suite's cell gives (:class:`SuiteCell`, whose :meth:`~SuiteCell.measure`
returns a typed :class:`Measurement` of :class:`Gated` parts) and the cell loop (:func:`run_cell`)
that decides its thresholds, stores, reports to Allure and asserts; with the input-error failure,
the not-applicable and ungated skips, and acting on the verdicts (:func:`assert_verdicts`). A
suite imports these through :mod:`flipgate.suite.api`."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from flipgate import FlipgateError
from flipgate.config import ThresholdSet
from flipgate.gate.rules import evaluate
from flipgate.outcomes import BadInput, NotApplicable, NothingGated, Ungated
from flipgate.results import Verdict

if TYPE_CHECKING:
    from flipgate.calls import Auditor
    from flipgate.config import Threshold
    from flipgate.store import TrialStore


@dataclass
class Gated:
    """One model's part of a cell's :class:`Measurement` that thresholds decide. The core
    (:func:`run_cell`) reads the model's thresholds once per session, decides
    them and stores the verdicts under (``model``, ``dataset``, ``cell``).

    By default the core applies the thresholds that select ``select`` (``cell`` when None) on
    ``dataset`` (with ``vs``), those ``applies`` keeps, to ``estimates`` (``{readout: {metric:
    MetricEstimate}}``; ``readout`` is the primary one): a ``lower``/``upper`` threshold on a
    metric with per-item values in ``sequences`` (``{(readout, metric): ItemValues}``) is decided
    by the one-sided tests of docs/definitions.md §12 on the look grid ``looks`` of a cell that
    drew sequentially (fixed N otherwise; ``planned``: the items fixed-N tests wait for), any other
    by its interval (``n_items``: the units behind an estimate that does not say, from which an
    undecided verdict says why: docs/definitions.md §12.8); ``context`` goes to every verdict
    (its ``facet`` is the selector unless ``context`` names one). A suite whose thresholds reach
    its estimates in a way of its own (a readout or a CI level per threshold) gives ``decide``,
    which the core calls with the model's thresholds instead."""

    model: str
    dataset: str
    cell: str
    estimates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    readout: str = ""
    select: str | None = None
    vs: str | None = None
    applies: Callable[[Threshold], bool] | None = None
    sequences: Mapping[tuple[str, str], Any] | None = None
    looks: Any = None
    planned: int | None = None
    n_items: int | None = None
    context: Mapping[str, Any] = field(default_factory=dict)
    decide: Callable[[ThresholdSet], list[Verdict]] | None = None


@dataclass
class Measurement:
    """What a cell measured, for the core to decide, store, report and assert
    (:func:`run_cell`): its ``gated`` parts; ``record`` stores what it measured
    besides the verdicts (called once they are decided, so a record may carry them); ``report``
    attaches it to Allure with the verdicts; ``not_applicable``: the cell is reported and then
    skipped with this reason (never a pass); ``failure``: reported, then the cell fails with
    this reason and any violated threshold."""

    gated: list[Gated]
    record: Callable[[TrialStore], None] | None = None
    report: Callable[[list[Verdict]], None] | None = None
    not_applicable: str | None = None
    failure: str | None = None


class SuiteCell:
    """The base of a suite's cell: a subclass sets ``auditor`` and ``thresholds_dir`` (and
    ``capture_manager`` to show live progress) and gives :meth:`measure`; :meth:`run`, what the
    test calls, is the core's cell loop (:func:`run_cell`): decide, store, report
    to Allure and assert."""

    auditor: Auditor
    thresholds_dir: str
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def measure(self) -> Measurement:
        """Measure the cell (model calls through :attr:`auditor`)."""
        raise NotImplementedError(f"{type(self).__name__} does not define measure()")

    def thresholds(self, model_id: str) -> ThresholdSet:
        """``model_id``'s thresholds, read once per session."""
        return self.auditor.thresholds(model_id, self.thresholds_dir)

    def live_output(self) -> contextlib.AbstractContextManager:
        """A context in which the live progress display reaches the terminal."""
        cm = self.capture_manager
        return cm.global_and_fixture_disabled() if cm is not None else contextlib.nullcontext()

    def run(self) -> list[Verdict]:
        return run_cell(self)


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
#: :class:`~flipgate.outcomes.NothingGated`; flipgate.gate.ledger counts it)
NOTHING_GATED = "flipgate: nothing gated: "


def decide(gated: Gated, thresholds: ThresholdSet) -> list[Verdict]:
    """The verdicts of ``thresholds`` (its model's) on ``gated``
    (:class:`~flipgate.suite.api.Gated`)."""
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
        gated.n_items,
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
    """Act on each verdict's outcome (flipgate.gate.rules.outcome): fail on any 'fail', else xfail
    on any 'xfail', and warn on 'warn' (an exceeded ``warn`` bound or a tolerated inconclusive CI).
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
