"""The judge consensus suite's projection for the cost guard (flipgate.cost): its calls, costed
without a pilot call."""

from __future__ import annotations

from flipgate.cost import Projection, add_call, charge, require_prices, uncached
from flipgate.judges.run import JudgeRunner


def project_judges(auditor, plan, model_id: str) -> Projection:
    """Project the judge consensus suite's calls of ``model_id`` (no pilot): K calls per
    candidate set, one per ordering (docs/definitions.md §9), each costed with
    :func:`~flipgate.cost.estimate_tokens`; calls the response cache answers cost nothing."""
    model = auditor.config.models[model_id]
    proj = Projection(model_id, suite="judges")
    if model["backend"] != "litellm":
        return proj
    require_prices(auditor.config.models, [model_id])  # before the work
    runner = JudgeRunner(auditor, plan)
    max_out = int(model.get("max_new_tokens", 16))
    for spec in plan.datasets:
        calls = runner.plan_calls(spec, runner.items(spec), plan.readout_for(model))
        for request in uncached(auditor, model_id, [c[3] for c in calls]):
            add_call(proj, request, max_out)
    return charge(proj, model)
