"""The continuity suite (docs/definitions.md §10): one cell per (model, sweep, uncertainty
estimator) of ``audit.continuity``; models opt in with ``suites: [continuity]``."""

from __future__ import annotations

from typing import Any

from flipgate.continuity.names import CONTINUITY_CELL
from flipgate.suite.api import AFTER_ODI, Case, GatedCell, MetricSpec, Plan, SuiteContext
from flipgate.suite.builtin import DeclaredPlanSuite, schema_beside

CONTINUITY_METRICS = (
    MetricSpec("l_local", 0.0, 1.0),
    MetricSpec("l_global", 0.0, 1.0),
    MetricSpec("abstention_auc", 0.0, 1.0),
    MetricSpec("accuracy", 0.0, 1.0, shared=True),
    MetricSpec("parse_rate", 0.0, 1.0, shared=True),
)


class ContinuitySuite(DeclaredPlanSuite):
    name = "continuity"
    config_key = "continuity"
    facet = CONTINUITY_CELL
    metrics = CONTINUITY_METRICS
    schema = schema_beside(__file__)
    plan_class = "flipgate.continuity.plan:ContinuityPlan"

    def keys(self, plan: Any) -> list[tuple[str, ...]]:
        return [(sweep, est) for sweep in plan.sweeps for est in plan.estimators]

    def case(self, model_id: str, key: tuple[str, ...]) -> Case:
        sweep, estimator = key  # a model's sweep is one group: its estimators share the greedy
        group = f"{model_id}/continuity/{sweep}"  # answers (through the response cache)
        case_id = f"{model_id}-{sweep}-{estimator}"
        return Case(
            (model_id, sweep, estimator), case_id, group, (model_id,), sweep, rank=AFTER_ODI + 1
        )

    def gated_cells(self, config: Any, plan: Any, model_id: str) -> list[GatedCell]:
        # an estimator is the cell's "readout"
        return [GatedCell(model_id, CONTINUITY_CELL, s, plan.estimators) for s in plan.sweeps]

    def cell_class(self) -> Any:
        from flipgate.continuity.cell import ContinuityCell

        return ContinuityCell

    def planned_trials(self, ctx: SuiteContext, plan: Any, param: Any) -> Plan:
        """The greedy answer on every sweep input, plus the estimator's samples
        (docs/definitions.md §10)."""
        from flipgate.continuity.run import planned
        from flipgate.continuity.sweeps import SWEEPS

        model_id, sweep, estimator = param
        seed = ctx.audit_config().seed
        runs = SWEEPS[sweep].modality != "image" or model_id not in ctx.text_only_models()
        return {  # an image sweep of a model that takes no images is skipped as unmeasurable
            (model_id, sweep, part): n if runs else 0
            for part, n in planned(plan, sweep, estimator, ctx.items_override, seed).items()
        }

    def project_model(self, auditor: Any, plan: Any, model_id: str) -> list:
        from flipgate.continuity.cost import project_continuity

        return [project_continuity(auditor, plan, model_id)]

    # -- its GRID card (flipgate.cards.build.TypedCardSuite)
    card_module = "flipgate.continuity.card"
    #: a sweep's card, after an envelope-only benchmark's (flipgate.cards.build.build_card)
    own_card_rank = 1


SUITE = ContinuitySuite()
