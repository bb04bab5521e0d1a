"""Configuration envelope (docs/definitions.md §7): every valid configuration × roster model, per
benchmark; SDI, CFR, ρ_flip and τ_R gated by the thresholds that name ``facet: envelope``."""

SUITE = "envelope"


def test_envelope(flipgate_cell):
    flipgate_cell.run()
