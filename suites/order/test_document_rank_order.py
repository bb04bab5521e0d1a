"""document_rank_order facet (docs/definitions.md §3.3): flip of the normalised short answer across
document ranks."""

SUITE = "order"
PART = "document_rank_order"


def test_document_rank_order(flipgate_cell):
    flipgate_cell.run()
