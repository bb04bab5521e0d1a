"""The analysis suite's test modules (docs/architecture.md)."""
