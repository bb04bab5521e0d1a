"""Suites and the core's cell: the public suite API (:mod:`flipgate.suite.api`, the one module a
suite imports), the cell loop that decides, stores, reports and asserts what a suite's cell
measured (:mod:`flipgate.suite.cell_loop`), what flipgate's own suites share
(:mod:`flipgate.suite.builtin`), and the check that every threshold selects a cell of the plan's
suites (:mod:`flipgate.suite.threshold_coverage`). The registry of suites is
:mod:`flipgate.registry`."""
