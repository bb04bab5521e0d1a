"""Ordering facets and controls. A facet = permutation unit + render + map-back (FP App. J)."""
from __future__ import annotations

from flipgate import FlipgateError
from flipgate.facets.base import Facet
from flipgate.facets.option_order import OptionOrder

FACETS: dict[str, Facet] = {f.name: f for f in [OptionOrder()]}
#: controls re-use a facet's rendering under the canonical ordering (SPEC §3.6)
CONTROLS: dict[str, str] = {"same_ordering": "option_order"}


def get_facet(name: str, where: str = "") -> Facet:
    if name not in FACETS:
        raise FlipgateError(f"{where + ': ' if where else ''}unknown facet {name!r}; "
                            f"known: {', '.join(sorted(FACETS))}")
    return FACETS[name]


__all__ = ["CONTROLS", "FACETS", "Facet", "get_facet"]
