"""The ODI suite (docs/definitions.md §4): a Bayesian fit of each order-suite model's facet trials
alone (what gates it) and one over the whole panel (panel checks, gating no model)."""

from __future__ import annotations

import math
from typing import Any

from flipgate.cell import CellKey
from flipgate.facets import FACETS
from flipgate.odi.names import ODI_CELL, ODI_FITS, ORDER_PANEL
from flipgate.progress import cell_plan
from flipgate.suite.api import (
    READS_ORDER_CELLS,
    Case,
    GatedCell,
    MetricSpec,
    NoCases,
    Plan,
    SuiteContext,
)
from flipgate.suite.builtin import TypedCardSection, schema_beside

_INF = math.inf
_FACETS = tuple(sorted(FACETS))  # e.g. sigma_pi@option_order
#: posterior quantities (``@<facet>`` selects one facet) and fit diagnostics
ODI_METRICS = (
    MetricSpec("sigma_pi", 0.0, _INF, at=_FACETS, at_name="facet"),
    MetricSpec("sigma_delta", 0.0, _INF, at=_FACETS, at_name="facet"),
    MetricSpec("mean_abs_delta", 0.0, _INF, at=_FACETS, at_name="facet"),
    MetricSpec("rhat_max", 1.0, _INF),
    MetricSpec("ess_bulk_min", 0.0, _INF),
    MetricSpec("ess_tail_min", 0.0, _INF),
    MetricSpec("divergences", 0.0, _INF),
)


class ODISuite(TypedCardSection):
    name = "odi"
    config_key = "odi"  # optional: profile name, seed and profile field overrides
    schema = schema_beside(__file__)
    facet = ODI_CELL
    metrics = ODI_METRICS
    piloted = False

    def parse(self, spec: dict, where: str, config) -> dict:
        """``audit.odi`` (valid against schema.json): the fit's settings, as given."""
        return dict(spec)

    def cases(self, ctx: SuiteContext, part: str | None) -> list[Case] | NoCases:
        ctx.audit_config()  # a bad models.yaml is the collection error
        # its own group, since it reads every model; scheduled once the order cells are done
        return [Case("order", "order-facets", "odi", rank=READS_ORDER_CELLS)]

    def gated(self, ctx: SuiteContext) -> list[GatedCell]:
        """The panel's fit, per order-suite model on every dataset of the order plan (a
        threshold's ``dataset:`` narrows it to that dataset's cells)."""
        cfg = ctx.audit_config()
        models = cfg.audited("order")
        datasets = sorted({d for m in models for _, d in cfg.cells(m)})
        return [GatedCell(m, ODI_CELL, d, panel=True) for m in models for d in datasets]

    def cell(self, ctx: SuiteContext, param: Any, auditor, capture_manager: Any):
        from flipgate.odi.cell import ODICell

        return ODICell(auditor, ctx.thresholds_dir, capture_manager)

    def planned(self, ctx: SuiteContext, param: Any) -> Plan:
        """The ODI panel: every order-facet cell of every order-suite model."""
        cfg, plan = ctx.audit_config(), Plan()
        for model_id in cfg.audited("order"):
            for cell, dataset in cfg.cells(model_id):
                if not CellKey.parse(cell).is_control:
                    plan |= cell_plan(cfg, ctx.items_override, model_id, cell, dataset)
        return plan

    def project(self, ctx: SuiteContext, auditor, ledger) -> list:
        return []  # it reads the order suite's trials and calls no model

    def summary_lines(self, store) -> list[str]:
        """One line per model (its own fit, what gates it) and one for the panel (pooled; gates
        no model)."""
        odi = store.analysis(ODI_FITS, ORDER_PANEL)
        if not odi:
            return []
        lines = []
        for model_id in odi["roster"]:
            own = (odi["models"].get(model_id) or {}).get("own") or {}
            if "facets" not in own:
                why = own.get("missing") or "the stored fit predates own fits"
                lines.append(f"flipgate: ODI {model_id}: no own fit ({why})")
                continue
            lines.append(
                f"flipgate: ODI {model_id} (own fit, diagnostics "
                f"{'passed' if own['passed'] else 'FAILED'}): σ_δ "
                + ", ".join(
                    f"{f} {v['sigma_delta']['median']:.3f}" for f, v in own["facets"].items()
                )
            )
        checks = odi.get("panel_checks") or []
        failed = [c["threshold"] for c in checks if c["outcome"] == "fail"]
        return lines + [
            f"flipgate: ODI panel ({odi['profile']}, {', '.join(odi['roster'])}; gates no model; "
            f"diagnostics {'passed' if odi['passed'] else 'FAILED'}): σ_π "
            + ", ".join(f"{f} {v['sigma_pi']['median']:.3f}" for f, v in odi["facets"].items())
            + (f"; panel checks failed: {'; '.join(failed)}" if failed else "")
        ]

    # -- its GRID card (flipgate.cards.build.TypedCardSuite)
    card_module = "flipgate.odi.card"


SUITE = ODISuite()
