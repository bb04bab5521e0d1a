"""The continuity suite's test modules (docs/architecture.md)."""
