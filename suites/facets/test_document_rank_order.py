"""document_rank_order facet (docs/definitions.md §3.3): flip of the normalised short answer across
document ranks."""

FACET = "document_rank_order"


def test_document_rank_order(flip_cell):
    flip_cell.run()
