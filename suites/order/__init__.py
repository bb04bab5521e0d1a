"""The order suite's test modules: one per facet and control (docs/architecture.md)."""
