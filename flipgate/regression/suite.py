"""The regression suite (docs/definitions.md §11): one cell per (candidate, baseline, order
cell) of each pairing, in the xdist group of the candidate's cell (which measures it)."""

from __future__ import annotations

from typing import Any

from flipgate.cell import cell_group
from flipgate.order.suite import facet_cells
from flipgate.progress import cell_plan
from flipgate.regression.baseline import baseline_run, compared_cells, pairings
from flipgate.suite.api import (
    READS_ORDER_CELLS,
    Case,
    GatedCell,
    MetricSpec,
    NoCases,
    Plan,
    SuiteContext,
)
from flipgate.suite.builtin import TypedCardSection

#: paired candidate − baseline deltas (docs/definitions.md §11), on the order suite's cells with
#: ``vs: baseline``; delta_delta_order: control cells
REGRESSION_METRICS = tuple(
    MetricSpec(m, -1.0, 1.0, vs="baseline")
    for m in ("delta_flip_rate", "delta_accuracy", "delta_parse_rate", "delta_delta_order")
)


class RegressionSuite(TypedCardSection):
    name = "regression"
    config_key = None  # models.yaml baseline: and --baseline
    schema = None
    facet = None  # the candidate's order cells, with vs: baseline
    metrics = REGRESSION_METRICS
    piloted = False

    def parse(self, spec: dict, where: str, config) -> Any:
        return None

    def configure(self, ctx: SuiteContext) -> None:
        """A bad ``--baseline`` / ``--candidate`` is one usage-error line before anything is
        collected, loaded or written."""
        if baseline_run(ctx) is not None or ctx.option("--candidate") is not None:
            from flipgate.config import load_models

            pairings(ctx, load_models(ctx.path("--models")))

    def cases(self, ctx: SuiteContext, part: str | None) -> list[Case] | NoCases:
        cfg = ctx.audit_config()
        cases = [
            Case(
                (p, cell, dataset),
                f"{p.label}-{cell.replace(':', '-')}-{dataset}",
                # a group of its own, scheduled with ODI after every order cell: in its
                # candidate's group it could run while the other worker still measured the
                # baseline's cell, and waited for it (30 s of a worker, docs/benchmarks.md)
                f"regression:{cell_group(p.candidate, cell, dataset)}",
                models=(p.candidate,),
                dataset=dataset,
                rank=READS_ORDER_CELLS,
            )
            for p in pairings(ctx)
            for cell, dataset in compared_cells(cfg, p)
        ]
        return cases or NoCases(
            "no-baseline",
            f"no baseline: name one with `baseline: <model id>` in {cfg.path} or pass "
            "--baseline PATH",
        )

    def gated(self, ctx: SuiteContext) -> list[GatedCell]:
        """Every order cell of each candidate (``vs: baseline``), as the order suite gates it."""
        compared = {p.candidate for p in pairings(ctx) if not p.skip}
        return [
            GatedCell(c.model, c.cell, c.dataset, c.readouts, vs="baseline")
            for c in facet_cells(ctx.audit_config())
            if c.model in compared
        ]

    def cell(self, ctx: SuiteContext, param: Any, auditor, capture_manager: Any):
        from flipgate.regression.cell import RegressionCell

        pairing, cell, dataset = param
        partial = ctx.option("--baseline-partial")
        return RegressionCell(
            auditor, ctx.thresholds_dir, pairing, cell, dataset, partial, capture_manager
        )

    def planned(self, ctx: SuiteContext, param: Any) -> Plan:
        pairing, cell, dataset = param
        cfg, plan = ctx.audit_config(), Plan()
        models = [pairing.candidate] + ([pairing.baseline] if pairing.run is None else [])
        for model_id in filter(None, models):
            plan |= cell_plan(cfg, ctx.items_override, model_id, cell, dataset)
        return plan

    def project(self, ctx: SuiteContext, auditor, ledger) -> list:
        return []  # its cells are the order suite's, priced with it

    def dependents(self, ctx: SuiteContext, auditor, model_id: str, dataset: str, cell: str):
        """Its cases hold their candidate's facet cell while they can still be decided
        (docs/definitions.md §12.4; flipgate.regression.hold)."""
        from flipgate.regression.hold import regression_dependents

        return regression_dependents(ctx, auditor, model_id, dataset, cell)

    # -- its GRID card (flipgate.cards.build.TypedCardSuite)
    card_module = "flipgate.regression.card"


SUITE = RegressionSuite()
