"""The envelope suite's projection for the cost guard (flipgate.cost): its request plan, costed
without a pilot call."""

from __future__ import annotations

from flipgate.cost import Projection, add_call, charge, require_prices
from flipgate.envelope.render import render
from flipgate.envelope.run import EnvelopeRunner


def project_envelope(auditor, envelope, model_id: str) -> Projection:
    """Project the envelope suite's calls of ``model_id`` (no pilot): every valid configuration it
    runs on each benchmark x its items (x ``seeds`` for a stochastic decoding), each call costed
    with :func:`~flipgate.cost.estimate_tokens`. The response cache is not consulted (an upper
    bound)."""
    model = auditor.config.models[model_id]
    proj = Projection(model_id, suite="envelope")
    if model["backend"] != "litellm":
        return proj
    require_prices(auditor.config.models, [model_id])  # before the work
    max_out = int(model.get("max_new_tokens", 16))
    runner = EnvelopeRunner(auditor, envelope)
    for spec in envelope.benchmarks:
        items, exemplars = runner.split(spec)
        for config in envelope.configs(spec.name):
            if not runner.applicable(model_id, config):
                continue
            calls = 1 if config.greedy else envelope.seeds
            for it in items:
                add_call(proj, render(it, config, exemplars, 0, ()), max_out, calls)
    return charge(proj, model)
