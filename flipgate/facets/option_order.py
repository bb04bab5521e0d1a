"""option_order facet (docs/definitions.md §3.1; Facet-Probe §3): permute which option content
sits under each label.

A predicted label maps back through the inverse permutation to the source option index; a flip
is a change of chosen content, never of letter.
"""

from __future__ import annotations

from flipgate.backends.base import Request
from flipgate.facets.choice import ChoiceFacet
from flipgate.hashing import sha256_text
from flipgate.items.item import LETTERS, Item

MCQ_TEMPLATE = (
    "Answer the following multiple-choice question. Read every option before answering. "
    'On the final line, output exactly one option label preceded by "Answer: ", with no other '
    "content on that line.\n\nQuestion: {question}\n{options}"
)


class OptionOrder(ChoiceFacet):
    name = "option_order"
    template_id = "fp-mcq-v1"
    template = MCQ_TEMPLATE
    template_sha256 = sha256_text(MCQ_TEMPLATE)
    scoring = "inverse permutation to the source option index"

    def keep(self, item: Item) -> bool:
        return 2 <= item.n_options <= len(LETTERS)

    def n_units(self, item: Item) -> int:
        return item.n_options

    def render(self, item: Item, perm: tuple[int, ...], seed: int = 0, key: tuple = ()) -> Request:
        labels = self.labels(item)
        lines = "\n".join(f"{labels[slot]}. {item.options[src]}" for slot, src in enumerate(perm))
        prompt = self.template.format(question=item.question.strip(), options=lines)
        if item.images:  # e.g. MathVision: the figure comes first, unpermuted
            prompt = "<image>\n" * len(item.images) + prompt
        return Request((("user", prompt),), "Answer:", labels, seed, key, images=item.images)

    def map_back(self, label: str | None, item: Item, perm: tuple[int, ...]) -> int | None:
        if label is None:
            return None
        return perm[self.labels(item).index(label)]
