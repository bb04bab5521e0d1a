"""What a facet provides to the audit runner."""

from __future__ import annotations

from typing import Hashable, Protocol

from flipgate.backends.base import Request
from flipgate.items.item import Item


class Facet(Protocol):
    name: str
    template_id: str
    template: str
    template_sha256: str
    #: readouts that make sense for this facet's answers (docs/definitions.md §8)
    readouts: tuple[str, ...]

    def keep(self, item: Item) -> bool:
        """Facet filter: does the item have the structure this facet permutes?"""

    def n_units(self, item: Item) -> int:
        """Number of permutable units (n in n!)."""

    def n_classes(self, item: Item, k: int) -> int:
        """Answer classes for OSI (docs/definitions.md §3): the option count, or K for free-form
        answers."""

    def render(self, item: Item, perm: tuple[int, ...]) -> Request:
        """The request for ``item`` with units shown in order ``perm`` (perm[slot] = source)."""

    def map_back(self, label: str | None, item: Item, perm: tuple[int, ...]) -> Hashable | None:
        """Displayed label -> content label invariant under the permutation (None stays None)."""

    def is_correct(self, content: Hashable | None, item: Item) -> bool | None:
        """Gold match of a content label (None when the item has no gold)."""
