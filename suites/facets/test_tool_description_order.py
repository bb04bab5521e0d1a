"""tool_description_order facet (demoted, opt-in; Facet-Probe App. F): runs only when models.yaml
lists it under audit.facets."""

FACET = "tool_description_order"


def test_tool_description_order(flip_cell):
    flip_cell.run()
