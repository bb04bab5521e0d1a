"""The judge consensus suite (docs/definitions.md §9): one cell per (judge model, candidate-set
dataset) of ``audit.judges``; models opt in with ``suites: [judges]``."""

from __future__ import annotations

from typing import Any

from flipgate.judges.names import JUDGE_CELL
from flipgate.suite.api import AFTER_ODI, Case, GatedCell, MetricSpec, Plan, SuiteContext
from flipgate.suite.builtin import DeclaredPlanSuite, schema_beside

JUDGE_METRICS = (
    MetricSpec("judge_flip_rate", 0.0, 1.0),
    MetricSpec("direct_accuracy", 0.0, 1.0),
    MetricSpec("consensus_accuracy", 0.0, 1.0),
    MetricSpec("consensus_gain", -1.0, 1.0),
    MetricSpec("direct_macro_accuracy", 0.0, 1.0),
    MetricSpec("consensus_macro_accuracy", 0.0, 1.0),
    MetricSpec("parse_rate", 0.0, 1.0, shared=True),
)


class JudgesSuite(DeclaredPlanSuite):
    name = JUDGE_CELL
    former_names = ("judge",)  # its facet: in thresholds until the cells took the suite's name
    config_key = "judges"
    metrics = JUDGE_METRICS
    schema = schema_beside(__file__)
    plan_class = "flipgate.judges.plan:JudgePlan"

    def keys(self, plan: Any) -> list[tuple[str, ...]]:
        return [(spec.name,) for spec in plan.datasets]

    def case(self, model_id: str, key: tuple[str, ...]) -> Case:
        (dataset,) = key  # each its own group: different prompts, nothing shared
        group = f"{model_id}/judge/{dataset}"
        return Case(
            (model_id, dataset),
            f"{model_id}-{dataset}",
            group,
            (model_id,),
            dataset,
            rank=AFTER_ODI + 1,
        )

    def gated_cells(self, config: Any, plan: Any, model_id: str) -> list[GatedCell]:
        readout = plan.readout_for(config.models[model_id])  # the cell's one readout
        return [GatedCell(model_id, JUDGE_CELL, s.name, (readout,)) for s in plan.datasets]

    def cell_class(self) -> Any:
        from flipgate.judges.cell import JudgeCell

        return JudgeCell

    def planned_trials(self, ctx: SuiteContext, plan: Any, param: Any) -> Plan:
        """Every candidate set under each of its K orderings (docs/definitions.md §9)."""
        from flipgate.judges.run import planned_calls

        model_id, dataset = param
        seed = ctx.audit_config().seed
        n = planned_calls(plan, plan.dataset(dataset), seed, ctx.items_override)
        return {(model_id, dataset, JUDGE_CELL): n}

    def project_model(self, auditor: Any, plan: Any, model_id: str) -> list:
        from flipgate.judges.cost import project_judges

        return [project_judges(auditor, plan, model_id)]

    # -- its GRID card (flipgate.cards.build.TypedCardSuite)
    card_module = "flipgate.judges.card"
    #: a candidate-set dataset's card, after a sweep's (flipgate.cards.build.build_card)
    own_card_rank = 2


SUITE = JudgesSuite()
