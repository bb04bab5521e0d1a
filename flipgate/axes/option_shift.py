"""option_order axis (docs/definitions.md §8; flipbench): the options cyclically shifted, one
variant per shift (n options -> n variants, shift 0 canonical). Unlike the option_order facet
(§2's drawn permutations), every option visits every slot once."""

from __future__ import annotations

from flipgate.axes.variant import Variant
from flipgate.items.item import Item


class OptionShiftAxis:
    name = "option_order"

    def variants(self, item: Item) -> list[Variant]:
        n = item.n_options
        return [Variant(s, tuple((slot + s) % n for slot in range(n))) for s in range(n)]
