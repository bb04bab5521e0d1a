"""Perturbation axes of the readout decomposition (docs/definitions.md §8; flipbench).

An axis turns an item into *variants*: the same question shown in ways that should not change the
answer (cyclic option shifts, another label set, another prompt format, a checked paraphrase).
Variant 0 of every axis is the canonical rendering, so an axis's flip rate compares each change
with the same baseline. Axes are pure and seeded; the decomposition runner
(:mod:`flipgate.decomposition.run`) stores what each item was shown, with a sha256, before any
model is called.
"""

from __future__ import annotations

from typing import Protocol

from flipgate import FlipgateError
from flipgate.axes.label_set import LabelSetAxis
from flipgate.axes.option_shift import OptionShiftAxis
from flipgate.axes.paraphrase import ParaphraseAxis
from flipgate.axes.prompt_format import PromptFormatAxis
from flipgate.axes.variant import Variant
from flipgate.items.item import Item
from flipgate.paraphrases import ParaphraseStore


class Axis(Protocol):
    name: str

    def variants(self, item: Item) -> list[Variant]:
        """The item's variants on this axis, the canonical one first (condition 0)."""
        ...


#: the axes audit.decomposition may name (one module each)
AXIS_NAMES = ("option_order", "label_set", "prompt_format", "paraphrase")


def get_axis(name: str, paraphrases: ParaphraseStore | None = None, where: str = "") -> Axis:
    """The axis called ``name``; the paraphrase axis reads ``paraphrases`` (its store)."""
    if name == "option_order":
        return OptionShiftAxis()
    if name == "label_set":
        return LabelSetAxis()
    if name == "prompt_format":
        return PromptFormatAxis()
    if name == "paraphrase":
        if paraphrases is None:
            raise FlipgateError(f"{where or 'paraphrase axis'}: needs a paraphrase store")
        return ParaphraseAxis(paraphrases)
    raise FlipgateError(
        f"{where + ': ' if where else ''}unknown axis {name!r}; known: {', '.join(AXIS_NAMES)}"
    )


__all__ = ["AXIS_NAMES", "Axis", "Variant", "get_axis"]
