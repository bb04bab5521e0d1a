"""Shared scoring for facets whose answer is one of an item's options (a displayed letter)."""

from __future__ import annotations

from flipgate.facets.base import FacetDefaults
from flipgate.items.item import LETTERS, Item


class ChoiceFacet(FacetDefaults):
    """Letters A, B, ... label the options; the content label is a source option index."""

    readouts = ("letter_logprob", "regex")

    def n_classes(self, item: Item, k: int) -> int:
        return item.n_options

    def labels(self, item: Item) -> tuple[str, ...]:
        return tuple(LETTERS[: item.n_options])

    def is_correct(self, content: int | None, item: Item) -> bool | None:
        if item.gold is None:
            return None
        return content is not None and content == item.gold
