"""The facets suite's test modules (docs/architecture.md)."""
