"""The configuration envelope suite's names: its cell and its analysis table."""

from flipgate.store import AnalysisTable

#: the envelope's cell name (``facet: envelope`` in thresholds)
ENVELOPE_CELL = "envelope"
#: its analysis of each benchmark over the whole roster (docs/definitions.md §7), in the store's
#: table of the suite's name (envelopes before; a run reads only its own store's analyses)
ENVELOPE_ANALYSES = AnalysisTable(ENVELOPE_CELL, "dataset")
