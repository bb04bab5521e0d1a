"""flipgate.cell.CellKey: the parsed form of a cell name (a facet, or a control on a facet)."""

import dataclasses

import pytest

from flipgate.cell import CellKey


def test_facet_round_trip():
    cell = CellKey.parse("option_order")
    assert cell == CellKey(facet="option_order")
    assert cell.control is None
    assert not cell.is_control
    assert cell.name == str(cell) == "option_order"


def test_control_round_trip():
    cell = CellKey.parse("same_ordering:option_order")
    assert cell == CellKey(facet="option_order", control="same_ordering")
    assert cell.is_control
    assert cell.name == str(cell) == "same_ordering:option_order"


def test_parse_splits_on_the_first_colon_only():
    cell = CellKey.parse("same_ordering:a:b")
    assert (cell.control, cell.facet) == ("same_ordering", "a:b")
    assert cell.name == "same_ordering:a:b"


def test_frozen_and_hashable():
    cell = CellKey.parse("same_ordering:option_order")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cell.facet = "few_shot_order"  # type: ignore[misc]
    assert {cell: 1}[CellKey("option_order", "same_ordering")] == 1
    assert len({cell, CellKey.parse("same_ordering:option_order"), CellKey("option_order")}) == 2


def test_equality_distinguishes_control_from_facet():
    assert CellKey.parse("option_order") != CellKey.parse("same_ordering:option_order")
    assert CellKey("option_order") != "option_order"  # a CellKey is not its name string
