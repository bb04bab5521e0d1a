"""Regression between model versions (SPEC §11): each candidate against its baseline, per cell."""


def test_versions(regression_cell):
    regression_cell.run()
