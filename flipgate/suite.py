"""What every suite's test shares (each suite's cell, ``flipgate/<suite>/cell.py``, runs one test):
the live progress display's terminal, the input-error failure, the not-applicable and ungated
skips, and acting on the verdicts (:func:`assert_verdicts`)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import pytest

from flipgate import FlipgateError
from flipgate.config import ThresholdSet, load_thresholds
from flipgate.results import Verdict

T = TypeVar("T")


def live_output(capture_manager: Any = None):  # pytest's CaptureManager, a private type
    """A context in which the live progress display reaches the terminal: pytest's output
    capture (its CaptureManager) suspended, or nothing without one."""
    cm = capture_manager
    return cm.global_and_fixture_disabled() if cm is not None else contextlib.nullcontext()


def fail_input(exc: FlipgateError) -> NoReturn:
    """Fail the cell with the error's one-line message (no chained traceback); the plugin turns a
    "flipgate: " failure into the run's usage-error status (flipgate.exitcodes)."""
    raise pytest.fail.Exception(f"flipgate: {exc}", pytrace=False) from None


#: a skip reason that starts with this is a cell that cannot exist for the model (it takes no
#: images, an ODI panel of one): reported, and not a reason to withhold GATE_PASSED
NOT_APPLICABLE = "not applicable: "
#: a skip reason that starts with this is a cell that ran but that no threshold could fail, let
#: through by ``--allow-ungated``
UNGATED = "not gated (--allow-ungated): "
#: the one-line failure of a cell that no threshold could fail (flipgate.gate_ledger counts it)
NOTHING_GATED = "flipgate: nothing gated: "


def measure_cell(
    thresholds_dir: str, model_id: str, measure: Callable[[], T]
) -> tuple[ThresholdSet, T]:
    """The thresholds that apply to ``model_id`` and what ``measure()`` measured; a bad input
    in either fails the cell with its one-line message (:func:`fail_input`)."""
    try:
        return load_thresholds(thresholds_dir, model_id), measure()
    except FlipgateError as exc:
        fail_input(exc)


def skip_not_applicable(why: str) -> NoReturn:
    """Skip a cell that cannot exist for this model (:data:`NOT_APPLICABLE`)."""
    pytest.skip(NOT_APPLICABLE + why)


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
            pytest.skip(UNGATED + why)
        pytest.fail(
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
