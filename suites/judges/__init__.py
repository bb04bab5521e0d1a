"""The judges suite's test modules (docs/architecture.md)."""
