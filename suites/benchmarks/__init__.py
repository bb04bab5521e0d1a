"""The benchmarks suite's test modules (docs/architecture.md)."""
