"""dialog_turn_order facet (demoted, opt-in; Facet-Probe App. F): runs only when models.yaml lists
it under audit.facets."""

FACET = "dialog_turn_order"


def test_dialog_turn_order(flip_cell):
    flip_cell.run()
