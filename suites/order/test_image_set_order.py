"""image_set_order facet (docs/definitions.md §3.4): flip of the chosen option across image orders
(VLMs only; position-referencing items screened out)."""

SUITE = "order"
PART = "image_set_order"


def test_image_set_order(flipgate_cell):
    flipgate_cell.run()
