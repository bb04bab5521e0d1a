"""same_ordering control (docs/definitions.md §3.6): canonical ordering K times; Δ_order against
option_order."""

SUITE = "order"
PART = "same_ordering"


def test_same_ordering(flipgate_cell):
    flipgate_cell.run()
