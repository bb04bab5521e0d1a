"""dialog_turn_order facet (demoted, opt-in; Facet-Probe App. F): runs only when models.yaml lists
it under audit.facets."""

SUITE = "order"
PART = "dialog_turn_order"


def test_dialog_turn_order(flipgate_cell):
    flipgate_cell.run()
