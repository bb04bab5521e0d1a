"""Ordering facets and controls. A facet = permutation unit + render + map-back
(docs/definitions.md §3; Facet-Probe App. J).

A *cell name* is a facet name (``option_order``) or a control applied to a facet
(``same_ordering:option_order``); trials, verdicts and cards are keyed by it, and
``flipgate.cell.CellKey`` parses it.
"""

from __future__ import annotations

from typing import Any

from flipgate import FlipgateError
from flipgate.facets.base import Facet
from flipgate.facets.demoted import DialogTurnOrder, FewShotOrder, ToolDescriptionOrder
from flipgate.facets.image_set import ImageSetOrder
from flipgate.facets.mixed import MixedModalityOrder
from flipgate.facets.option_order import OptionOrder
from flipgate.facets.passages import DocumentRankOrder, EvidenceChunkOrder

#: facets differ in their content label type, hence Facet[Any]
_ALL: list[Facet[Any]] = [
    OptionOrder(),
    EvidenceChunkOrder(),
    DocumentRankOrder(),
    ImageSetOrder(),
    MixedModalityOrder(),
    FewShotOrder(),
    DialogTurnOrder(),
    ToolDescriptionOrder(),
]
FACETS: dict[str, Facet[Any]] = {f.name: f for f in _ALL}
#: controls re-use a facet's rendering under the canonical ordering (docs/definitions.md §3.6)
CONTROLS: tuple[str, ...] = ("same_ordering",)


def get_facet(name: str, where: str = "") -> Facet[Any]:
    if name not in FACETS:
        raise FlipgateError(
            f"{where + ': ' if where else ''}unknown facet {name!r}; "
            f"known: {', '.join(sorted(FACETS))}"
        )
    return FACETS[name]


def readouts_for(facet: str, model_readouts: list[str], primary: str) -> tuple[list[str], str]:
    """The model's readouts that make sense for ``facet``, and the primary one among them."""
    supported = get_facet(facet).readouts
    usable = [r for r in model_readouts if r in supported]
    if not usable:
        raise FlipgateError(
            f"facet {facet!r} needs one of the readouts {list(supported)}; "
            f"the model declares {model_readouts}"
        )
    return usable, primary if primary in usable else usable[0]


__all__ = ["CONTROLS", "FACETS", "Facet", "get_facet", "readouts_for"]
