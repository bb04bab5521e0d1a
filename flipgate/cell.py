"""The cell key: a facet (``option_order``) or a control applied to a facet
(``same_ordering:option_order``). Trials, verdicts, cards and thresholds store the cell *name*
(``CellKey.name``); ``CellKey`` is only the parsed, in-memory form.

Kept free of imports so that any module (``flipgate.facets`` included) can use it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CellKey:
    """A facet, optionally under a control (``control=None``: the facet itself)."""

    facet: str
    control: str | None = None

    @classmethod
    def parse(cls, name: str) -> CellKey:
        """``same_ordering:option_order`` -> CellKey("option_order", "same_ordering"); a name
        without ``:`` -> CellKey(name)."""
        control, sep, facet = name.partition(":")
        return cls(facet, control) if sep else cls(name)

    @property
    def name(self) -> str:
        """The cell name string, the inverse of ``parse``."""
        return f"{self.control}:{self.facet}" if self.control is not None else self.facet

    @property
    def is_control(self) -> bool:
        """Whether this is a control cell (a control applied to a facet)."""
        return self.control is not None

    def __str__(self) -> str:
        return self.name


def cell_group(model_id: str, cell: str, dataset: str) -> str:
    """The xdist group of an order cell: a facet cell and its control share one (the first of them
    to run measures the facet's trials, the other reads them back); groups of one model run on
    both workers, each loading the model once. A regression case has a group of its own, scheduled
    after every order cell (flipgate/regression/suite.py)."""
    return f"{model_id}/{CellKey.parse(cell).facet}/{dataset}"
