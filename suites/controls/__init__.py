"""The controls suite's test modules (docs/architecture.md)."""
