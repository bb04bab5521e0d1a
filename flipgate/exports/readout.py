"""What the exports read off a GRID card (JSON data, as :func:`flipgate.cards.write.cards_on_disk`
gives it): its score and each order cell's metrics under the cell's primary readout, the way the
model card's table and model-index read them (flipgate/exports/model_card.py,
flipgate/cards/write.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from flipgate.cell import CellKey


@dataclass(frozen=True)
class Value:
    """An estimate and its CI (None where the card has none, or only half of one)."""

    estimate: float
    ci: tuple[float, float] | None

    @classmethod
    def of(cls, m: dict | None) -> Value | None:
        """The card's ``{"estimate", "ci"}``, or None where it has no finite estimate."""
        if not m or not _finite(m.get("estimate")):
            return None
        ci = m.get("ci")
        bounds = (ci[0], ci[1]) if ci and _finite(ci[0]) and _finite(ci[1]) else None
        return cls(float(m["estimate"]), bounds)

    def text(self) -> str:
        return f"{self.estimate:.3f}" + (
            f" [{self.ci[0]:.3f}, {self.ci[1]:.3f}]" if self.ci else " (no CI)"
        )


@dataclass(frozen=True)
class CellReadout:
    """One order cell (or control) of a card under its primary readout."""

    cell: str
    readout: str
    control: bool
    flip_rate: Value | None
    accuracy: Value | None
    n_items: int
    k: int


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def cell_readouts(card: dict) -> list[CellReadout]:
    """The card's order cells, then its controls, each under its facet's primary readout (the
    first readout it has where the primary is missing)."""
    primaries = card["axis_receipt"]["scoring_path"]["primary_readout"]
    out = []
    for group in ("order_robustness", "controls"):
        for cell, by_readout in card[group].items():
            readout = primaries.get(CellKey.parse(cell).facet)
            readout = readout if readout in by_readout else next(iter(by_readout))
            m = by_readout[readout]
            out.append(
                CellReadout(
                    cell=cell,
                    readout=readout,
                    control=group == "controls",
                    flip_rate=Value.of(m.get("flip_rate")),
                    accuracy=Value.of(m.get("accuracy")),
                    n_items=int(m["n_items"]),
                    k=int(m["k"]),
                )
            )
    return out


def card_path(card: dict, base: str) -> str:
    """Where the card's readable page is: ``base/<model>/<dataset>.md`` (``base`` a URL or the GRID
    cards directory)."""
    return f"{base.rstrip('/')}/{card['model']['id']}/{card['dataset']['name']}.md"
