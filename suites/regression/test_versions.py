"""Regression between model versions (docs/definitions.md §11): each candidate against its baseline,
per cell."""


def test_versions(regression_cell):
    regression_cell.run()
