"""few_shot_order facet (demoted, opt-in; Facet-Probe App. F): runs only when models.yaml lists it
under audit.facets."""

SUITE = "order"
PART = "few_shot_order"


def test_few_shot_order(flipgate_cell):
    flipgate_cell.run()
