"""evidence_chunk_order facet (docs/definitions.md §3.2): flip of the normalised short answer across
chunk orders."""

FACET = "evidence_chunk_order"


def test_evidence_chunk_order(flip_cell):
    flip_cell.run()
