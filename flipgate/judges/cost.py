"""The judge consensus suite's projection for the cost guard (flipgate.cost): its calls, costed
without a pilot call."""

from __future__ import annotations

from flipgate.cost import Projection, project_calls
from flipgate.judges.run import JudgeRunner


def project_judges(auditor, plan, model_id: str) -> Projection:
    """Project the judge consensus suite's calls of ``model_id`` (no pilot): K calls per
    candidate set, one per ordering (docs/definitions.md §9), priced as every suite's calls are
    (:func:`~flipgate.cost.project_calls`: a local model's free, an API model's that the response
    cache cannot answer at its price)."""
    runner = JudgeRunner(auditor, plan)
    readout = plan.readout_for(auditor.config.models[model_id])
    requests = [
        call[3]
        for spec in plan.datasets
        for call in runner.plan_calls(spec, runner.items(spec), readout)
    ]
    return project_calls(auditor, "judges", model_id, requests)
