"""The continuity suite's names: its cell and its cells' prefix in the trials store."""

#: the continuity cells' name (``facet: continuity`` in thresholds; trials: continuity[...])
CONTINUITY_CELL = "continuity"
#: the prefix of its cells in the trials store (``continuity[<sweep>]``)
CELL_PREFIX = "continuity["
