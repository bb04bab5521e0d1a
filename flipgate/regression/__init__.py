"""Regression between model versions (docs/definitions.md §11, docs/regression.md): paired per-item
comparison of a candidate with its baseline on identical manifests, gated by ``vs: baseline``
thresholds."""

from flipgate.regression.compare import (
    DELTA_METRICS,
    Arm,
    CellComparison,
    IncomparableCell,
    compare_cell,
)

__all__ = ["DELTA_METRICS", "Arm", "CellComparison", "IncomparableCell", "compare_cell"]
