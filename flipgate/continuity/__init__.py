"""Continuity of uncertainty along input sweeps (docs/definitions.md §10; continuity paper)."""
