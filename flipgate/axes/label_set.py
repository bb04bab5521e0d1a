"""label_set axis (docs/definitions.md §8): the options in place under A–D, 1–4, a–d and I–IV."""

from __future__ import annotations

from flipgate.axes.variant import LABEL_SETS, Variant
from flipgate.items.item import Item


class LabelSetAxis:
    name = "label_set"

    def variants(self, item: Item) -> list[Variant]:
        source = tuple(range(item.n_options))
        return [Variant(c, source, labels) for c, labels in enumerate(LABEL_SETS)]
