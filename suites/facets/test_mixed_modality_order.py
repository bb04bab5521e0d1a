"""mixed_modality_order facet (docs/definitions.md §3.5): text-flip and judge sem-flip across orders
of a mixed text + image sequence (VLMs only)."""

FACET = "mixed_modality_order"


def test_mixed_modality_order(flip_cell):
    flip_cell.run()
