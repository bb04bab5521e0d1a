"""What one suite test does: run a (facet or control, model, dataset) cell and gate it."""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, NoReturn

import pandas as pd
import pytest

from flipgate import FlipgateError
from flipgate.audit import Auditor
from flipgate.cell import Cell
from flipgate.config import ThresholdSet, load_thresholds
from flipgate.facets import get_facet
from flipgate.gate import evaluate
from flipgate.report import report_cell
from flipgate.results import CellSummary, Verdict
from flipgate.summary import control_summary, facet_summary
from flipgate.trend import metric_trend


def live_output(capture_manager: Any = None):  # pytest's CaptureManager, a private type
    """A context in which the live progress display reaches the terminal: pytest's output
    capture (its CaptureManager) suspended, or nothing without one."""
    cm = capture_manager
    return cm.global_and_fixture_disabled() if cm is not None else contextlib.nullcontext()


def fail_input(exc: FlipgateError):
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


def skip_not_applicable(why: str) -> NoReturn:
    """Skip a cell that cannot exist for this model (:data:`NOT_APPLICABLE`)."""
    pytest.skip(NOT_APPLICABLE + why)


class InconclusiveThreshold(UserWarning):
    """A threshold whose CI straddles its bound (docs/definitions.md §5)."""


class ThresholdWarning(UserWarning):
    """A ``warn``-rule threshold that was exceeded."""


@dataclass
class FlipCell:
    """One parametrised suite case; ``run()`` measures, records, reports and asserts."""

    auditor: Auditor
    thresholds_dir: str
    name: str
    model_id: str
    dataset: str
    capture_manager: object = None

    def measure(self) -> tuple[dict[str, CellSummary], pd.DataFrame]:
        cfg = self.auditor.config
        cell = Cell.parse(self.name)
        control, facet = cell.control, cell.facet
        readouts = self.auditor.readouts(self.model_id, facet)[0]
        with live_output(self.capture_manager):
            trials, perm = self.auditor.cell_trials(self.model_id, self.dataset, self.name)
            judged = get_facet(facet).judged and not control
            verdicts = (
                self.auditor.judgements(self.model_id, self.dataset, self.name, trials)
                if judged
                else None
            )
        summaries: dict[str, CellSummary] = {}
        items: pd.DataFrame | None = None
        for r in readouts:
            if perm is not None:
                summaries[r], table = control_summary(
                    perm, trials, r, cfg.bootstrap_n, cfg.level, cfg.seed
                )
            else:
                summaries[r], table = facet_summary(
                    trials, r, cfg.bootstrap_n, cfg.level, cfg.seed, verdicts
                )
            table = table.add_prefix(f"{r}:").rename(columns={f"{r}:item_id": "item_id"})
            items = table if items is None else items.merge(table, on="item_id")
        assert items is not None  # a facet has at least one readout
        return summaries, items

    def run(self) -> list[Verdict]:
        facet = Cell.parse(self.name).facet
        try:
            thresholds: ThresholdSet = load_thresholds(self.thresholds_dir, self.model_id)
            why = self.auditor.unmeasurable(self.model_id, self.dataset, facet)
            if why:
                skip_not_applicable(why)
            summaries, items = self.measure()
        except FlipgateError as exc:
            fail_input(exc)
        primary = self.auditor.readouts(self.model_id, facet)[1]
        verdicts = evaluate(
            thresholds.for_cell(self.name, self.dataset),
            {r: s.metrics for r, s in summaries.items()},
            primary,
            thresholds.on_inconclusive,
            facet=self.name,
        )
        store = self.auditor.store
        store.add_verdicts(self.model_id, self.dataset, self.name, verdicts)
        store.add_summaries(self.model_id, self.dataset, self.name, summaries)
        store.add_item_table(self.model_id, self.dataset, self.name, items)
        # the runs directory holds every run's store: this cell's flip rate across them, this run
        # last
        trend = metric_trend(
            store.path.parent.parent, self.model_id, self.dataset, self.name, primary, "flip_rate"
        )
        report_cell(
            self.name,
            self.dataset,
            self.model_id,
            summaries,
            items,
            verdicts,
            {
                "model": self.model_id,
                "dataset": self.dataset,
                "facet": self.name,
                "K": self.auditor.config.k,
                "N": summaries[primary].n_items,
                "primary_readout": primary,
                "thresholds": ", ".join(thresholds.files),
            },
            trend,
        )
        assert_verdicts(verdicts, self.auditor.allow_ungated)
        return verdicts


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
