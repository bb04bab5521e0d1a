"""paraphrase axis (docs/definitions.md §8): the original question, then each rewrite of it in
the paraphrase store that passed its meaning and difficulty checks (the paraphrase gate,
:mod:`flipgate.paraphrases`, stops a run whose store holds unchecked rewrites of its items)."""

from __future__ import annotations

from flipgate.axes.variant import Variant
from flipgate.items.item import Item
from flipgate.paraphrases import ParaphraseStore


class ParaphraseAxis:
    name = "paraphrase"

    def __init__(self, store: ParaphraseStore):
        self.store = store

    def variants(self, item: Item) -> list[Variant]:
        source = tuple(range(item.n_options))
        rewrites = self.store.usable(item.item_id)
        return [Variant(0, source)] + [
            Variant(c, source, question=p.text, paraphrase_id=p.paraphrase_id)
            for c, p in enumerate(rewrites, start=1)
        ]
