"""Continuity of uncertainty (docs/definitions.md §10; continuity paper): per model × sweep ×
uncertainty estimator, seeded sweeps of 10 inputs (5 growing more ambiguous, 5 growing clearer);
L_local and L_global (does uncertainty peak at the most ambiguous input?), the abstention AUC
(does it predict errors?) and the greedy answer's accuracy, with CIs over sweeps."""

SUITE = "continuity"


def test_continuity(flipgate_cell):
    flipgate_cell.run()
