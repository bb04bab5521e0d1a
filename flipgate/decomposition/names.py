"""The readout decomposition suite's names: its own and its cells' prefix in the trials store."""

#: the suite's name, which is also its cells' name: a model's ``suites: [decomposition]``
#: (``readouts``, its former name, is still read), ``facet: decomposition`` in thresholds and the
#: key of its plan (``audit.decomposition``, cfg.plans)
DECOMPOSITION_CELL = "decomposition"
#: the prefix of its cells in the trials store (flipgate.decomposition.run.axis_cell)
CELL_PREFIX = "axis["
