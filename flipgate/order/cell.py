"""What one order suite test does: run a (facet or control, model, dataset) cell, record it,
report it to Allure and gate it."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from flipgate.backends.floor import NOT_MEASURED_FLOOR, floor_not_measured
from flipgate.calls import Auditor
from flipgate.cards.disclosure import card_section, stop_line
from flipgate.cell import CellKey
from flipgate.facets import get_facet
from flipgate.gate.sequential import SequentialStop
from flipgate.metrics.sequential import ItemValues
from flipgate.order.allure import report_cell
from flipgate.order.measure import order_cells
from flipgate.results import CellSummary, Verdict
from flipgate.store import TrialStore
from flipgate.suite.api import Gated, Measurement, SuiteCell
from flipgate.suite.cell_loop import skip_not_applicable
from flipgate.summary import control_summary, facet_summary, item_values
from flipgate.trend import metric_trend


@dataclass
class OrderCell(SuiteCell):
    """One parametrised suite case: a facet or control cell of a model on a dataset."""

    auditor: Auditor
    thresholds_dir: str
    name: str
    model_id: str
    dataset: str
    capture_manager: object = None
    #: the cell's per-item values (docs/definitions.md §12), on which its gate's tests decide
    sequences: dict[tuple[str, str], ItemValues] | None = None
    #: where a sequential cell stopped
    stop: SequentialStop | None = None

    def summarised(self) -> tuple[dict[str, CellSummary], pd.DataFrame]:
        cfg = self.auditor.config
        cell = CellKey.parse(self.name)
        control, facet = cell.control, cell.facet
        readouts = self.auditor.readouts(self.model_id, facet)[0]
        cells = order_cells(self.auditor)
        with self.live_output():
            trials, perm = cells.cell_trials(self.model_id, self.dataset, self.name)
            # per-item values: the thresholds on means are decided by one-sided tests
            # (docs/definitions.md §12), on the look grid when the cell drew sequentially
            self.sequences = item_values(trials, readouts, perm)
            if cells.is_sequential(self.name):
                self.stop = cells.stop(self.model_id, self.dataset, self.name)
            judged = get_facet(facet).judged and not control
            verdicts = (
                cells.judgements(self.model_id, self.dataset, self.name, trials) if judged else None
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

    def _stop_line(self) -> str:
        """Where this sequential cell stopped, as the card says it."""
        assert self.stop is not None
        return stop_line(self.name, card_section(self.stop, self.auditor.config.level))

    def measure(self) -> Measurement:
        """The cell's summaries and item table, gated by the thresholds on the cell; a control
        whose backend answered its replicates as copies measured no floor: its summaries are
        kept, labelled, and its thresholds are not applicable (§12.5)."""
        facet = CellKey.parse(self.name).facet
        why = order_cells(self.auditor).unmeasurable(self.model_id, self.dataset, facet)
        if why:
            skip_not_applicable(why)
        summaries, items = self.summarised()
        unmeasured = (
            floor_not_measured(self.model_id, self.auditor.backend(self.model_id))
            if CellKey.parse(self.name).is_control
            else None
        )
        if unmeasured:
            summaries = {
                r: s.model_copy(update={"floor": NOT_MEASURED_FLOOR}) for r, s in summaries.items()
            }
        primary = self.auditor.readouts(self.model_id, facet)[1]
        gated = Gated(
            self.model_id,
            self.dataset,
            self.name,
            {r: s.metrics for r, s in summaries.items()},
            primary,
            sequences=self.sequences,
            looks=self.stop.looks if self.stop else None,
            n_items=summaries[primary].n_items if primary in summaries else None,
            decide=(lambda ts: []) if unmeasured else None,
        )

        def record(store: TrialStore) -> None:
            store.add_summaries(self.model_id, self.dataset, self.name, summaries)
            store.add_item_table(self.model_id, self.dataset, self.name, items)

        def report(verdicts: list[Verdict]) -> None:
            store = self.auditor.store
            # the runs directory holds every run's store: this cell's flip rate across them,
            # this run last
            trend = metric_trend(
                store.path.parent.parent,
                self.model_id,
                self.dataset,
                self.name,
                primary,
                "flip_rate",
            )
            thresholds = self.thresholds(self.model_id)
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
                    **({"sequential": self._stop_line()} if self.stop else {}),
                    **({"floor": NOT_MEASURED_FLOOR} if unmeasured else {}),
                },
                trend,
                stop=self.stop,
            )

        return Measurement([gated], record=record, report=report, not_applicable=unmeasured)
