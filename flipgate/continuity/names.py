"""The continuity suite's names: its cell."""

#: the continuity cells' name (``facet: continuity`` in thresholds; trials: continuity[...])
CONTINUITY_CELL = "continuity"
