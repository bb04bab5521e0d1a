"""One way of showing an item: option order, label set, prompt format and question text, and how
a displayed label maps back to the source option."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flipgate.axes.formats import CANONICAL_FORMAT, PromptFormat
from flipgate.backends.base import Request
from flipgate.items.item import LETTERS, Item

#: label sets of docs/definitions.md §8, each long enough for 10 options (MMLU-Pro)
LABEL_SETS: dict[str, tuple[str, ...]] = {
    "A-D": tuple(LETTERS[:10]),
    "1-4": tuple(str(i) for i in range(1, 11)),
    "a-d": tuple(LETTERS[:10].lower()),
    "I-IV": ("I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X"),
}
CANONICAL_LABELS = "A-D"


@dataclass(frozen=True)
class Variant:
    """``perm[slot]`` = the source option shown at ``slot``; ``labels`` names a label set;
    ``question`` replaces the item's question when set (a paraphrase, ``paraphrase_id``)."""

    condition: int
    perm: tuple[int, ...]
    labels: str = CANONICAL_LABELS
    format: PromptFormat = field(default=CANONICAL_FORMAT)
    question: str | None = None
    paraphrase_id: str | None = None

    def shown_labels(self, item: Item) -> tuple[str, ...]:
        return LABEL_SETS[self.labels][: item.n_options]

    def render(self, item: Item, key: tuple = (), cloze: bool = False) -> Request:
        """The request; with ``cloze`` it also carries the option strings in displayed order, so
        a backend that can scores their likelihood (the cloze readout)."""
        labels = self.shown_labels(item)
        options = [item.options[src] for src in self.perm]
        prompt = self.format.render((self.question or item.question).strip(), labels, options)
        return Request(
            (("user", prompt),),
            self.format.answer_cue,
            labels,
            0,
            key,
            continuations=tuple(options) if cloze else (),
        )

    def map_back(self, label: str | None, item: Item) -> int | None:
        """A displayed label -> the source option index (None stays None)."""
        if label is None:
            return None
        return self.perm[self.shown_labels(item).index(label)]

    def describe(self) -> dict[str, Any]:
        """What the manifest stores of this variant."""
        return {
            "condition": self.condition,
            "perm": list(self.perm),
            "labels": self.labels,
            "format": self.format.id,
            "paraphrase_id": self.paraphrase_id,
        }
