"""Evidence facets (docs/definitions.md §3.2–3.3; Facet-Probe §3): permute the passages a
short-answer question rests on.

``evidence_chunk_order`` shows sub-document chunks as a flat list; ``document_rank_order`` shows
complete documents as a ranked retrieval list. Scoring is SQuAD-normalised exact match; the
content label is the normalised answer string, invariant under the permutation.
"""

from __future__ import annotations

from flipgate.backends.base import Request
from flipgate.facets.short_answer import ShortAnswerFacet
from flipgate.hashing import sha256_text
from flipgate.items.item import Item

INSTRUCTIONS = (
    "Read every {unit} below before answering. "
    "Answer the question with a short answer (a few words, "
    'no explanation). On the final line, output the answer preceded by "Answer: ".\n\n'
)
CHUNK_TEMPLATE = INSTRUCTIONS.format(unit="evidence passage") + "{evidence}\n\nQuestion: {question}"
DOCUMENT_TEMPLATE = (
    INSTRUCTIONS.format(unit="retrieved document") + "{evidence}\n\nQuestion: {question}"
)


class _PassageOrder(ShortAnswerFacet):
    """Shared logic; subclasses set the name, template, unit bounds and how one unit is shown."""

    name = ""
    template_id = ""
    template = ""
    min_units, max_units = 2, 6

    @property
    def template_sha256(self) -> str:
        return sha256_text(self.template)

    def keep(self, item: Item) -> bool:
        return item.answer is not None and self.min_units <= len(item.passages) <= self.max_units

    def n_units(self, item: Item) -> int:
        return len(item.passages)

    def show(self, slot: int, item: Item, source: int) -> str:
        raise NotImplementedError

    def render(self, item: Item, perm: tuple[int, ...], seed: int = 0, key: tuple = ()) -> Request:
        evidence = "\n\n".join(self.show(slot, item, src) for slot, src in enumerate(perm))
        prompt = self.template.format(evidence=evidence, question=item.question.strip())
        return self.ask(prompt, seed, key)


class EvidenceChunkOrder(_PassageOrder):
    name = "evidence_chunk_order"
    template_id = "fp-chunks-v1"
    template = CHUNK_TEMPLATE
    min_units, max_units = 3, 6

    def show(self, slot: int, item: Item, source: int) -> str:
        return f"[{slot + 1}] {item.passages[source].text.strip()}"


class DocumentRankOrder(_PassageOrder):
    name = "document_rank_order"
    template_id = "fp-documents-v1"
    template = DOCUMENT_TEMPLATE
    min_units, max_units = 2, 6

    def show(self, slot: int, item: Item, source: int) -> str:
        p = item.passages[source]
        return f"Document (rank {slot + 1}): {p.title.strip() or 'untitled'}\n{p.text.strip()}"
