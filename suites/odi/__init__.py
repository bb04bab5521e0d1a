"""The odi suite's test modules (docs/architecture.md)."""
