"""image_set_order facet (docs/definitions.md §3.4; Facet-Probe §3): permute the order of a VLM's
input images.

The options stay in place, so the chosen option index is the content label. Items whose question
or options refer to an image's position ("first image", "Image 2", "left", "last", ...) are
screened out (Facet-Probe: 52/70 Mantis-Eval items); the counts are reported in the card.
"""

from __future__ import annotations

import re

from flipgate.backends.base import Request
from flipgate.facets.choice import ChoiceFacet
from flipgate.hashing import sha256_text
from flipgate.items.item import LETTERS, Item

IMAGE_TEMPLATE = (
    "Look at every image below before answering. "
    "Answer the multiple-choice question about the images. "
    'On the final line, output exactly one option label preceded by "Answer: ", '
    "with no other content "
    "on that line.\n\n{images}\n\nQuestion: {question}\n{options}"
)
_ORDINALS = (
    r"first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last|final|penultimate|"
    r"previous|next|former|latter|preceding|following|left|leftmost|right|rightmost|top|bottom|middle|"
    r"\d+(?:st|nd|rd|th)"
)
_UNITS = r"image|images|picture|pictures|photo|photos|frame|frames|figure|figures|panel|panels|one"
POSITION_PATTERNS = [
    re.compile(rf"\b(?:{_ORDINALS})\s+(?:{_UNITS})\b", re.IGNORECASE),
    re.compile(rf"\b(?:{_UNITS})\s*(?:#|no\.?\s*)?\d+\b", re.IGNORECASE),
    re.compile(r"\b(?:on|to|at|in)\s+the\s+(?:left|right|top|bottom)\b", re.IGNORECASE),
    re.compile(r"<image_?\d+>", re.IGNORECASE),
]


def position_reference(text: str) -> str | None:
    """The phrase in ``text`` that refers to an image by position, or None."""
    for pattern in POSITION_PATTERNS:
        found = pattern.search(text)
        if found:
            return found.group(0)
    return None


class ImageSetOrder(ChoiceFacet):
    name = "image_set_order"
    template_id = "fp-image-set-v1"
    template = IMAGE_TEMPLATE
    template_sha256 = sha256_text(IMAGE_TEMPLATE)
    scoring = "chosen option index (options are not permuted; images are)"
    needs_images = True
    screens = True

    def screen(self, item: Item) -> str | None:
        """Why the item is excluded by the position-reference screen (None = kept)."""
        for text in (item.question, *item.options):
            phrase = position_reference(text)
            if phrase:
                return f"position reference {phrase!r}"
        return None

    def keep(self, item: Item) -> bool:
        return (
            2 <= len(item.images) <= 6
            and 2 <= item.n_options <= len(LETTERS)
            and self.screen(item) is None
        )

    def n_units(self, item: Item) -> int:
        return len(item.images)

    def render(self, item: Item, perm: tuple[int, ...], seed: int = 0, key: tuple = ()) -> Request:
        labels = self.labels(item)
        images = "\n".join(f"Image {slot + 1}: <image>" for slot in range(len(perm)))
        options = "\n".join(f"{label}. {text}" for label, text in zip(labels, item.options))
        prompt = self.template.format(
            images=images, question=item.question.strip(), options=options
        )
        return Request(
            (("user", prompt),),
            "Answer:",
            labels,
            seed,
            key,
            images=tuple(item.images[src] for src in perm),
        )

    def map_back(self, label: str | None, item: Item, perm: tuple[int, ...]) -> int | None:
        return None if label is None else self.labels(item).index(label)
