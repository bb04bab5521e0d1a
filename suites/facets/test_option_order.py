"""option_order facet (docs/definitions.md §3.1): flip rate of the chosen option content across K
orderings."""

FACET = "option_order"


def test_option_order(flip_cell):
    flip_cell.run()
