"""Readout decomposition (docs/definitions.md §8; flipbench): per model × dataset × axis, each
readout's flip rate split into the genuine part (regex over the generated text, e*) and the
readout artifact, with paired bootstrap CIs; the paraphrase gate stops cells with unchecked
rewrites."""

SUITE = "decomposition"


def test_decomposition(flipgate_cell):
    flipgate_cell.run()
