"""The regression suite's test modules (docs/architecture.md)."""
