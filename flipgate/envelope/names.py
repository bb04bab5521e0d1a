"""The configuration envelope suite's names: its cell, its analysis table and its cells' prefix
in the trials store."""

from flipgate.store import AnalysisTable

#: the envelope's cell name (``facet: envelope`` in thresholds)
ENVELOPE_CELL = "envelope"
#: its analysis of each benchmark over the whole roster (docs/definitions.md §7), in the store
ENVELOPE_ANALYSES = AnalysisTable("envelopes", "dataset")
#: the prefix of its cells in the trials store (flipgate.envelope.run.envelope_cell)
CELL_PREFIX = "envelope["
