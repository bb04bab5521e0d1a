"""The envelope suite's test modules (docs/architecture.md)."""
