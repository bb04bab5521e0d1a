"""The readout decomposition suite (docs/definitions.md §8): one cell per (model, dataset,
perturbation axis) of ``audit.decomposition``; models opt in with ``suites: [decomposition]``
(``readouts``, its former name, is still read)."""

from __future__ import annotations

from typing import Any

from flipgate.axes import AXIS_NAMES
from flipgate.decomposition.names import DECOMPOSITION_CELL
from flipgate.suite.api import AFTER_ODI, Case, GatedCell, MetricSpec, Plan, SuiteContext
from flipgate.suite.builtin import DeclaredPlanSuite, schema_beside

DECOMPOSITION_METRICS = (
    MetricSpec("genuine_flip_rate", 0.0, 1.0, at=AXIS_NAMES, at_name="axis"),
    MetricSpec("artifact", -1.0, 1.0, at=AXIS_NAMES, at_name="axis"),
    MetricSpec("artifact_share", 0.0, 1.0, at=AXIS_NAMES, at_name="axis"),
    MetricSpec("flip_rate", 0.0, 1.0, shared=True, at=AXIS_NAMES, at_name="axis"),  # per readout
    MetricSpec("parse_rate", 0.0, 1.0, shared=True, at=AXIS_NAMES, at_name="axis"),
)


class DecompositionSuite(DeclaredPlanSuite):
    name = DECOMPOSITION_CELL  # also its cells' name and facet: in thresholds
    former_names = ("readouts",)
    config_key = "decomposition"
    metrics = DECOMPOSITION_METRICS
    schema = schema_beside(__file__)
    plan_class = "flipgate.decomposition.plan:DecompositionPlan"

    def keys(self, plan: Any) -> list[tuple[str, ...]]:
        return [(spec.name, axis) for spec in plan.datasets for axis in plan.axes]

    def case(self, model_id: str, key: tuple[str, ...]) -> Case:
        dataset, axis = key  # the axes of a (model, dataset) share one group: their canonical
        group = f"{model_id}/decomposition/{dataset}"  # variant is one call
        case_id = f"{model_id}-{dataset}-{axis}"
        return Case((model_id, dataset, axis), case_id, group, (model_id,), dataset, rank=AFTER_ODI)

    def gated_cells(self, config: Any, plan: Any, model_id: str) -> list[GatedCell]:
        return [
            GatedCell(model_id, DECOMPOSITION_CELL, spec.name, plan.readouts, part=axis)
            for spec in plan.datasets
            for axis in plan.axes
        ]

    def cell_class(self) -> Any:
        from flipgate.decomposition.cell import DecompositionCell

        return DecompositionCell

    def planned_trials(self, ctx: SuiteContext, plan: Any, param: Any) -> Plan:
        """Every item under every variant of the cell's axis (docs/definitions.md §8); the
        paraphrase axis counts the store's checked rewrites."""
        from flipgate.decomposition.run import axis_cell, planned_trials
        from flipgate.paraphrases import ParaphraseStore

        model_id, dataset, axis = param
        store = ParaphraseStore.load(plan.paraphrases)
        seed = ctx.audit_config().seed
        n = planned_trials(plan, plan.dataset(dataset), axis, store, seed, ctx.items_override)
        return {(model_id, dataset, axis_cell(axis)): n}

    def project_model(self, auditor: Any, plan: Any, model_id: str) -> list:
        from flipgate.decomposition.cost import project_decomposition

        return project_decomposition(auditor, plan, model_id)

    # -- its GRID card (flipgate.cards.build.TypedCardSuite)
    card_module = "flipgate.decomposition.card"
    #: a dataset only the decomposition audited: after a judge's card, which carries the
    #: decomposition of its candidate sets too
    own_card_rank = 3


SUITE = DecompositionSuite()
