"""The continuity suite's projection for the cost guard (flipgate.cost): its calls, costed
without a pilot call."""

from __future__ import annotations

from flipgate.continuity.run import SweepRunner
from flipgate.continuity.sweeps import SWEEPS
from flipgate.cost import Projection, add_call, charge, require_prices, uncached


def project_continuity(auditor, plan, model_id: str) -> Projection:
    """Project the continuity suite's calls of ``model_id`` (no pilot): every sweep's greedy
    answers plus each estimator's samples (docs/definitions.md §10), sweeps the model cannot take
    left out, each call costed with :func:`~flipgate.cost.estimate_tokens`; calls the response
    cache answers cost nothing."""
    model = auditor.config.models[model_id]
    proj = Projection(model_id, suite="continuity")
    if model["backend"] != "litellm":
        return proj
    require_prices(auditor.config.models, [model_id])  # before the work
    runner, backend = SweepRunner(auditor, plan), auditor.backend(model_id)
    max_out = plan.max_new_tokens
    for sweep in plan.sweeps:
        modality = SWEEPS[sweep].modality
        if (modality == "image" and not backend.supports_images) or modality == "audio":
            continue  # skipped: no images (API models take no audio)
        inputs = runner.inputs(sweep)
        requests = [c.request for c in runner.greedy_calls(sweep, inputs)]
        sampler = runner.sampler(model_id)
        for estimator in plan.estimators:
            sampled = [c.request for c in runner.sampled_calls(inputs, estimator)]
            for request in uncached(auditor, sampler, sampled):
                add_call(proj, request, max_out)
        for request in uncached(auditor, model_id, requests):
            add_call(proj, request, max_out)
    return charge(proj, model)
