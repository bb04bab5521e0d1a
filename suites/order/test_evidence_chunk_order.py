"""evidence_chunk_order facet (docs/definitions.md §3.2): flip of the normalised short answer across
chunk orders."""

SUITE = "order"
PART = "evidence_chunk_order"


def test_evidence_chunk_order(flipgate_cell):
    flipgate_cell.run()
