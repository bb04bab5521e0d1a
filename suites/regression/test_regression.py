"""Regression between model versions (docs/definitions.md §11): each candidate against its baseline,
per cell."""

SUITE = "regression"


def test_regression(flipgate_cell):
    flipgate_cell.run()
