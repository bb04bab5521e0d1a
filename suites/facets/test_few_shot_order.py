"""few_shot_order facet (demoted, opt-in; Facet-Probe App. F): runs only when models.yaml lists it
under audit.facets."""

FACET = "few_shot_order"


def test_few_shot_order(flip_cell):
    flip_cell.run()
