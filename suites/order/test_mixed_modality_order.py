"""mixed_modality_order facet (docs/definitions.md §3.5): text-flip and judge sem-flip across orders
of a mixed text + image sequence (VLMs only)."""

SUITE = "order"
PART = "mixed_modality_order"


def test_mixed_modality_order(flipgate_cell):
    flipgate_cell.run()
