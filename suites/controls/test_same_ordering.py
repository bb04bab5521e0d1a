"""same_ordering control (docs/definitions.md §3.6): canonical ordering K times; Δ_order against
option_order."""

FACET = "same_ordering"


def test_same_ordering(flip_cell):
    flip_cell.run()
