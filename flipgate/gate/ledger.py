"""What the run gated: the controller's count of flipgate cells by what happened to them, and the
run's status when something was not checked (docs/thresholds.md, "Nothing gated").

A run may only report ``GATE_PASSED`` when every collected cell was decided by a threshold that
could fail it. The ledger reads every cell's test report (on the controller: an xdist worker's
reports arrive there too) and sorts each cell into

- **gated**: it ran and a threshold decided it (passed, failed or xfailed);
- **ungated**: no threshold could fail it (flipgate.suite.cell_loop.assert_verdicts fails it with
  a usage error, or skips it under ``--allow-ungated``; typed in flipgate.outcomes);
- **not applicable**: the cell cannot exist for its model (a text-only model on an image facet,
  an ODI panel of one; flipgate.suite.cell_loop.skip_not_applicable, typed in flipgate.outcomes);
- **skipped**: a declared cell that did not run for another reason (a baseline with nothing to
  compare, ...).

A skipped cell, or a model whose every collected cell was skipped, turns what would have been
``GATE_PASSED`` into ``USAGE_ERROR`` with a line saying what was not checked, unless
``--allow-ungated``. A worker that crashed mid-cell is an interruption (``INTERRUPTED``), not a
failed threshold.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest

from flipgate.exitcodes import GATE_FAILED, GATE_PASSED, INTERRUPTED, USAGE_ERROR
from flipgate.outcomes import Outcome, outcome_of

#: the ``user_properties`` key under which a cell carries the models it gates
MODELS_PROPERTY = "flipgate_models"
#: how many skipped cells the summary names before it counts the rest
NAMED = 5


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


@dataclass(eq=False)  # hashed by identity: pluggy keeps plugins in sets (a conftest's subset)
class GateLedger:
    """Controller plugin: the run's cells by outcome, its summary lines and its status."""

    allow_ungated: bool = False
    outcomes: Counter[str] = field(default_factory=Counter)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (node id, reason)
    crashed: list[str] = field(default_factory=list)
    #: per model: cells collected and cells gated
    cells_of: Counter[str] = field(default_factory=Counter)
    gated_of: Counter[str] = field(default_factory=Counter)
    #: the session, from its end (pytest_sessionfinish) on
    session: pytest.Session | None = field(default=None, repr=False)

    @staticmethod
    def kind(report: pytest.TestReport) -> str | None:
        """What a cell's final report says happened to it, or None for a report that is not a
        cell's last word (setup that passed, teardown)."""
        outcome = outcome_of(report)
        if report.skipped:
            if hasattr(report, "wasxfail"):
                return "gated"
            if outcome is Outcome.NOT_APPLICABLE:
                return "not applicable"
            return "ungated" if outcome is Outcome.UNGATED else "skipped"
        if report.failed and outcome is Outcome.NOTHING_GATED:
            return "ungated"
        if report.failed and (report.when != "call" or outcome is Outcome.BAD_INPUT):
            return "error"  # could not run: bad input (exit 4), or a setup error
        return "gated" if report.when == "call" else None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "???":  # xdist's report of a worker that died mid-test
            self.crashed.append(report.nodeid)
            return
        if "flipgate_cell" not in report.keywords:
            return
        kind = GateLedger.kind(report)
        if kind is None:
            return
        self.outcomes[kind] += 1
        if kind == "skipped":
            self.skipped.append((report.nodeid, _skip_reason(report)))
        models: list[str] = dict(report.user_properties).get(MODELS_PROPERTY, [])  # type: ignore[assignment]
        for model_id in models:
            self.cells_of[model_id] += 1
            self.gated_of[model_id] += kind == "gated"

    def unchecked(self) -> list[str]:
        """What was not checked, one line each (empty when every cell was gated)."""
        lines = [
            f"declared cell not run: {nodeid}: {reason}" for nodeid, reason in self.skipped[:NAMED]
        ]
        if len(self.skipped) > NAMED:
            lines.append(f"... and {len(self.skipped) - NAMED} more skipped cells")
        lines += [
            f"model {m!r}: none of its {n} cells was gated (each was skipped or not applicable)"
            for m, n in sorted(self.cells_of.items())
            if not self.gated_of[m]
        ]
        return lines

    def summary_lines(self, interrupted: bool = False) -> list[str]:
        """The cells by outcome and what was not checked; the usage-error line only for a run
        that was not ``interrupted`` (its status is then ``INTERRUPTED``)."""
        if not self.outcomes and not self.crashed:
            return []
        counts = ", ".join(
            f"{self.outcomes[k]} {k}"
            for k in ("gated", "ungated", "skipped", "not applicable", "error")
            if self.outcomes[k] or k == "gated"
        )
        lines = [f"flipgate: cells: {counts}"]
        lines += [f"flipgate: worker crashed while running {n}" for n in self.crashed]
        unchecked = self.unchecked()
        if unchecked:
            allowed = " (allowed by --allow-ungated)" if self.allow_ungated else ""
            lines += [f"flipgate: not checked{allowed}: {line}" for line in unchecked]
            if not self.allow_ungated and not interrupted:
                lines.append(
                    "flipgate: nothing may pass unchecked: exit status 4 (usage error); pass "
                    "--allow-ungated to accept these cells"
                )
        return lines

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.session = session
        status = int(session.exitstatus)
        if self.crashed and status in (GATE_PASSED, GATE_FAILED):
            session.exitstatus = INTERRUPTED
        elif status == GATE_PASSED and self.unchecked() and not self.allow_ungated:
            session.exitstatus = USAGE_ERROR

    def pytest_terminal_summary(self, terminalreporter) -> None:
        session = self.session  # its status is final by now (flipgate.plugin sets it last)
        interrupted = session is not None and session.exitstatus == INTERRUPTED
        for line in self.summary_lines(interrupted):
            terminalreporter.write_line(line)
