"""ODI (docs/definitions.md §4): a Bayesian 2PL decomposition of the order suites' trials into
per-facet ordering noise σ_π, per-cell offsets |δ| and per-model θ; a fit that fails its diagnostics
fails, and thresholds naming ``facet: odi`` (e.g. ``sigma_pi@option_order``) are gated."""

SUITE = "odi"


def test_odi(flipgate_cell):
    flipgate_cell.run()
