"""What a facet provides to the audit runner."""

from __future__ import annotations

from typing import Hashable, Protocol, TypeVar

from flipgate.backends.base import Request
from flipgate.items.item import Item

#: a facet's content label: what :meth:`Facet.map_back` gives and :meth:`Facet.is_correct` takes
#: (a source option index for choice facets, a normalised answer string for short answers)
Content = TypeVar("Content", bound=Hashable)


class Facet(Protocol[Content]):
    name: str
    template_id: str
    template: str
    #: how an answer is scored, as disclosed on the card
    scoring: str
    #: its items carry images: a model that takes none cannot be measured on it
    needs_images: bool
    #: its answers are compared by a judge (sem-flip, docs/definitions.md §3.5)
    judged: bool
    #: it screens items out before the first N are taken (docs/definitions.md §3.4)
    screens: bool

    def screen(self, item: Item) -> str | None:
        """Why ``item`` is screened out, or None to keep it (always None unless ``screens``)."""

    @property
    def template_sha256(self) -> str: ...

    @property
    def readouts(self) -> tuple[str, ...]:
        """Readouts that make sense for this facet's answers (docs/definitions.md §8)."""

    def keep(self, item: Item) -> bool:
        """Facet filter: does the item have the structure this facet permutes?"""

    def n_units(self, item: Item) -> int:
        """Number of permutable units (n in n!)."""

    def n_classes(self, item: Item, k: int) -> int:
        """Answer classes for OSI (docs/definitions.md §3): the option count, or K for free-form
        answers."""

    def render(
        self, item: Item, perm: tuple[int, ...], seed: int = 0, key: tuple[Hashable, ...] = ()
    ) -> Request:
        """The request for ``item`` with units shown in order ``perm`` (perm[slot] = source);
        ``seed`` and ``key`` go into the request (see :class:`flipgate.backends.base.Request`)."""

    def map_back(self, label: str | None, item: Item, perm: tuple[int, ...]) -> Content | None:
        """Displayed label -> content label invariant under the permutation (None stays None)."""

    def is_correct(self, content: Content | None, item: Item) -> bool | None:
        """Gold match of a content label (None when the item has no gold)."""


class FacetDefaults:
    """What most facets declare: text items, no judge, no screen."""

    needs_images = False
    judged = False
    screens = False

    def screen(self, item: Item) -> str | None:
        return None
