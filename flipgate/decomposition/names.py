"""The readout decomposition suite's names: its cell and its cells' prefix in the trials store."""

#: the decomposition cells' name (``facet: decomposition`` in thresholds)
DECOMPOSITION_CELL = "decomposition"
#: the prefix of its cells in the trials store (flipgate.decomposition.run.axis_cell)
CELL_PREFIX = "axis["
