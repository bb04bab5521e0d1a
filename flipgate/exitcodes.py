"""Exit statuses of a flipgate run, the same from ``pytest`` and from ``make audit``.

0-5 are pytest's own codes (``pytest.ExitCode``); flipgate adds one for the cost guard.
"""

from __future__ import annotations

#: every declared threshold held
GATE_PASSED = 0
#: at least one threshold failed (or a suite test errored)
GATE_FAILED = 1
#: interrupted (Ctrl-C or SIGTERM: flipgate.interrupts; a ``-x`` stop; a worker crash)
INTERRUPTED = 2
#: flipgate or pytest itself failed (e.g. writing the GRID cards); the trials store is kept
INTERNAL_ERROR = 3
#: could not run: bad input (models.yaml, a thresholds file and its selectors, a command-line
#: option, a dataset spec or row) or a failed backend call, at collection or in a cell; wins over 1
USAGE_ERROR = 4
#: nothing collected (e.g. ``-k`` matched no test)
NO_TESTS = 5
#: ``--budget``: the projected cost exceeds the budget, or a model has no known price; no paid call
#: made
BUDGET_REFUSED = 6

MEANING = {
    GATE_PASSED: "every threshold held",
    GATE_FAILED: "a threshold failed",
    INTERRUPTED: "interrupted",
    INTERNAL_ERROR: "internal error",
    USAGE_ERROR: "usage error (bad input)",
    NO_TESTS: "no test collected",
    BUDGET_REFUSED: "refused by the cost guard",
}
