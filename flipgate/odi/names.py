"""The ODI suite's names: its cell, its fits' table in the store and the order suites' panel."""

from flipgate.store import AnalysisTable

#: the ODI fit's cell name (``facet: odi`` in thresholds)
ODI_CELL = "odi"
#: the ODI fit over a panel's order-suite trials (docs/definitions.md §4), in the store; the
#: order suites' panel is keyed "order"
ODI_FITS = AnalysisTable("odi", "name")
ORDER_PANEL = "order"
