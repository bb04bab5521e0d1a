"""ODI (docs/definitions.md §4, docs/suites/odi.md): a Bayesian 2PL decomposition of the order
suites' trials. Each model is gated on its own fit (its σ_δ, |δ| and diagnostics; thresholds naming
``facet: odi``, e.g. ``sigma_delta@option_order``). The panel's pooled fit (σ_π, θ) gives panel
checks, which gate no model."""

SUITE = "odi"


def test_odi(flipgate_cell):
    flipgate_cell.run()
