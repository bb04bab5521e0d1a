"""tool_description_order facet (demoted, opt-in; Facet-Probe App. F): runs only when models.yaml
lists it under audit.facets."""

SUITE = "order"
PART = "tool_description_order"


def test_tool_description_order(flipgate_cell):
    flipgate_cell.run()
