"""What happened to a cell besides pass, fail and xfail, as types rather than message prefixes.

Each outcome is raised as one of pytest's own (a failure or a skip: :class:`BadInput`,
:class:`NothingGated`, :class:`NotApplicable`, :class:`Ungated`), so pytest, Allure and the
terminal report it as they always have, with its one-line message. The plugin stamps the
cell's report with the outcome (:func:`stamp`, the ``user_properties`` entry
:data:`OUTCOME_PROPERTY`), which travels with the report from an xdist worker to the controller,
where the gate ledger (flipgate.gate.ledger) and the usage-error status read it
(:func:`outcome_of`); no message is parsed."""

from __future__ import annotations

import enum
from typing import Any, ClassVar

from _pytest.outcomes import Failed, Skipped  # pytest.fail.Exception, pytest.skip.Exception

#: the ``user_properties`` key under which a cell's report carries its :class:`Outcome`
OUTCOME_PROPERTY = "flipgate_outcome"


class Outcome(str, enum.Enum):
    #: the cell could not run: bad input (config, data, a failed backend); the run's status is
    #: USAGE_ERROR (flipgate.exitcodes)
    BAD_INPUT = "bad input"
    #: no threshold could fail the cell (none applies, or only ``rule: warn`` ones): a failure
    #: with the usage-error status, since passing it would say nothing
    NOTHING_GATED = "nothing gated"
    #: the cell cannot exist for its model (a text-only model on an image facet, an ODI panel of
    #: one, a floor its backend does not measure): reported, and never a pass
    NOT_APPLICABLE = "not applicable"
    #: a cell no threshold could fail, skipped under ``--allow-ungated``
    UNGATED = "ungated"


class _Typed:
    outcome: ClassVar[Outcome]


class BadInput(Failed, _Typed):
    """A failed cell that could not run (its message starts ``flipgate: ``)."""

    outcome = Outcome.BAD_INPUT


class NothingGated(Failed, _Typed):
    outcome = Outcome.NOTHING_GATED


class NotApplicable(Skipped, _Typed):
    outcome = Outcome.NOT_APPLICABLE


class Ungated(Skipped, _Typed):
    outcome = Outcome.UNGATED


#: the outcomes that give the run the usage-error status
USAGE_ERRORS = frozenset({Outcome.BAD_INPUT, Outcome.NOTHING_GATED})


def stamp(report: Any, exception: BaseException | None) -> None:
    """Record on a test report the outcome of the typed exception that ended its phase."""
    if isinstance(exception, _Typed):
        report.user_properties = [
            *report.user_properties,
            (OUTCOME_PROPERTY, exception.outcome.value),
        ]


def outcome_of(report: Any) -> Outcome | None:
    """The outcome a report was stamped with (:func:`stamp`), None for a plain pass or fail."""
    for key, value in getattr(report, "user_properties", ()):
        if key == OUTCOME_PROPERTY:
            return Outcome(value)
    return None
