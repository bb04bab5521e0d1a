"""prompt_format axis (docs/definitions.md §8): the item under each declared format
(:data:`flipgate.axes.formats.FORMATS`), options and labels in place."""

from __future__ import annotations

from flipgate.axes.formats import FORMATS
from flipgate.axes.variant import Variant
from flipgate.items.item import Item


class PromptFormatAxis:
    name = "prompt_format"

    def variants(self, item: Item) -> list[Variant]:
        source = tuple(range(item.n_options))
        return [Variant(c, source, format=f) for c, f in enumerate(FORMATS)]
