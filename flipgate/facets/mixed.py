"""mixed_modality_order facet (docs/definitions.md §3.5; Facet-Probe §3, App. H): permute a whole
heterogeneous sequence of text and image components; free-form answers.

Two flip notions: text-flip (the exact answer strings differ; an upper bound) and sem-flip (a
judge says the K answers are not equivalent). Correctness is exact match against a short gold.
"""

from __future__ import annotations

from flipgate.backends.base import Request
from flipgate.facets.base import FacetDefaults
from flipgate.hashing import sha256_text
from flipgate.items.item import Item
from flipgate.scoring import exact_match

MIXED_TEMPLATE = (
    "Read every item below (text passages and images) before answering. "
    "Answer the question in one or two "
    'sentences. On the final line, output your answer preceded by "Answer: ".\n\n{components}\n\n'
    "Question: {question}"
)


class MixedModalityOrder(FacetDefaults):
    name = "mixed_modality_order"
    template_id = "fp-mixed-v1"
    template = MIXED_TEMPLATE
    template_sha256 = sha256_text(MIXED_TEMPLATE)
    readouts = ("regex",)
    scoring = (
        "exact answer string (text-flip); judge verdict over the K answers (sem-flip); "
        "EM vs short gold"
    )
    needs_images = True
    judged = True
    max_new_tokens = 32

    max_components = 24  # MMDocRAG gives 15 or 20 quotes per question

    def keep(self, item: Item) -> bool:
        """At least one image among 2..max_components text/image components."""
        components = item.meta.get("components", ())
        kinds = {kind for kind, _ in components}
        return (
            "image" in kinds
            and kinds <= {"text", "image"}
            and 2 <= len(components) <= self.max_components
        )

    def n_units(self, item: Item) -> int:
        return len(item.meta["components"])

    def n_classes(self, item: Item, k: int) -> int:
        return k

    def render(self, item: Item, perm: tuple[int, ...], seed: int = 0, key: tuple = ()) -> Request:
        components = item.meta["components"]
        shown, images = [], []
        for slot, src in enumerate(perm):
            kind, index = components[src]
            if kind == "image":
                shown.append(f"[{slot + 1}] <image>")
                images.append(item.images[index])
            else:
                passage = item.passages[index]
                text = passage.text.strip()
                titled = (
                    passage.title and passage.title not in text
                )  # e.g. a MultiModalQA page title
                shown.append(f"[{slot + 1}] {passage.title.strip() + ': ' if titled else ''}{text}")
        prompt = self.template.format(components="\n\n".join(shown), question=item.question.strip())
        return Request(
            (("user", prompt),), "Answer:", (), seed, key, self.max_new_tokens, tuple(images)
        )

    def map_back(self, answer: str | None, item: Item, perm: tuple[int, ...]) -> str | None:
        return (
            answer.strip() if answer and answer.strip() else None
        )  # text-flip compares exact strings

    def is_correct(self, content: str | None, item: Item) -> bool | None:
        if item.answer is None:
            return None
        return exact_match(content, (item.answer, *item.aliases))
