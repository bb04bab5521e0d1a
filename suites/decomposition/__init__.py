"""The decomposition suite's test modules (docs/architecture.md)."""
