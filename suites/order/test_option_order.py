"""option_order facet (docs/definitions.md §3.1): flip rate of the chosen option content across K
orderings."""

SUITE = "order"
PART = "option_order"


def test_option_order(flipgate_cell):
    flipgate_cell.run()
