"""The readouts suite's test modules (docs/architecture.md)."""
