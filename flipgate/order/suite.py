"""The order suite (docs/definitions.md §1–§3): one cell per (facet or control, model, dataset);
its test modules, one per facet or control, declare ``PART = "<facet or control>"``."""

from __future__ import annotations

from typing import Any

from flipgate import FlipgateError
from flipgate.cell import CellKey, cell_group
from flipgate.config import CONTROL_METRICS, FACET_METRIC_RANGES, FACET_METRICS, AuditConfig
from flipgate.facets import CONTROLS, FACETS, get_facet, readouts_for
from flipgate.facets.short_answer import ShortAnswerFacet
from flipgate.gate.sequential import draws_sequentially
from flipgate.progress import cell_plan
from flipgate.suite.api import Case, GatedCell, MetricSpec, NoCases, Plan, SuiteContext
from flipgate.suite.builtin import TypedCardSection


def facet_cells(cfg: AuditConfig) -> list[GatedCell]:
    """Every facet and control cell of every order-suite model, with the readouts the model
    gives on that facet (the order suite's gated cells, and the regression suite's)."""
    out = []
    for model_id in cfg.audited("order"):
        model = cfg.models[model_id]
        for cell, dataset in cfg.cells(model_id):
            try:
                readouts = readouts_for(
                    CellKey.parse(cell).facet, model["readouts"], model["primary_readout"]
                )[0]
            except FlipgateError:  # the cell itself reports this when it runs
                readouts = model["readouts"]
            out.append(GatedCell(model_id, cell, dataset, tuple(readouts)))
    return out


class OrderSuite(TypedCardSection):
    name = "order"
    config_key = None  # audit.facets and audit.controls, described by the shipped schema
    schema = None
    facet = None  # thresholds name its facets and controls (facet: option_order, ...)
    metrics = tuple(MetricSpec(m, *FACET_METRIC_RANGES[m]) for m in FACET_METRICS + CONTROL_METRICS)
    piloted = True
    # -- its GRID card (flipgate.cards.build.TypedCardSuite): the facet card, first of all cards
    card_module = "flipgate.order.card"
    own_card_rank = -1

    def parse(self, spec: dict, where: str, config) -> Any:
        return None  # audit.facets / audit.controls are parsed by flipgate.config

    def cases(self, ctx: SuiteContext, part: str | None) -> list[Case] | NoCases:
        if part is None:
            every = [self.cases(ctx, p) for p in (*FACETS, *CONTROLS)]
            return [c for cases in every if isinstance(cases, list) for c in cases]
        if part not in FACETS and part not in CONTROLS:
            raise FlipgateError(
                f"PART = {part!r} is not a known facet or control "
                f"(known: {', '.join(sorted(list(FACETS) + list(CONTROLS)))})"
            )
        cfg = ctx.audit_config()
        if part in CONTROLS:
            cells = [
                (CellKey(facet=f, control=part).name, f"{f}-{d.name}", d.name)
                for f, d in cfg.controls.get(part, [])
            ]
        else:
            cells = [(part, d.name, d.name) for d in cfg.facets.get(part, [])]
        cases = [
            Case(
                (cell, model_id, dataset),
                f"{model_id}-{label}",
                cell_group(model_id, cell, dataset),
                models=(model_id,),
                dataset=dataset,
                # cells of free-form facets (long generations) before the others
                rank=1 if isinstance(get_facet(CellKey.parse(cell).facet), ShortAnswerFacet) else 2,
            )
            for model_id in cfg.audited("order")
            for cell, label, dataset in cells
            if (cell, dataset) in cfg.cells(model_id)
        ]
        if cases:
            return cases
        why = (  # e.g. an opt-in facet that models.yaml does not list
            f"no dataset declared for it in {cfg.path} (audit.facets / audit.controls)"
            if not cells
            else f"no model in {cfg.path} lists suite 'order'"
            if not cfg.audited("order")
            else f"no order-suite model of {cfg.path} takes it (see the models' facets: / "
            "datasets:)"
        )
        return NoCases("not-declared", f"{part}: {why}")

    def cell(self, ctx: SuiteContext, param: Any, auditor, capture_manager: Any):
        from flipgate.order.cell import OrderCell

        name, model_id, dataset = param
        return OrderCell(auditor, ctx.thresholds_dir, name, model_id, dataset, capture_manager)

    def gated(self, ctx: SuiteContext) -> list[GatedCell]:
        return facet_cells(ctx.audit_config())

    def planned(self, ctx: SuiteContext, param: Any) -> Plan:
        cell, model_id, dataset = param
        cfg = ctx.audit_config()
        settings = None if ctx.option("--fixed-n") else cfg.sequential
        return cell_plan(
            cfg, ctx.items_override, model_id, cell, dataset, draws_sequentially(settings, cell)
        )

    def project(self, ctx: SuiteContext, auditor, ledger) -> list:
        """Pilot each order-suite API model on the first ``--pilot-items`` items of each cell
        and project the rest (flipgate.order.cost.project); every price is checked before the first
        pilot call."""
        from flipgate.cost import require_prices
        from flipgate.order.cost import project

        cfg = ctx.audit_config()
        models = cfg.audited("order")
        judged = any(get_facet(CellKey.parse(name).facet).judged for name, _ in cfg.cells())
        require_prices(cfg.models, models + ([cfg.judge] if cfg.judge and judged else []))
        pilot = ctx.option("--pilot-items")
        return [project(auditor, m, pilot, ledger) for m in models]


SUITE = OrderSuite()
