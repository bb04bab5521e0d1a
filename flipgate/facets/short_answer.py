"""Shared scoring for facets with a free-form short answer (Facet-Probe §3: normalised exact
match)."""

from __future__ import annotations

from flipgate.backends.base import Request
from flipgate.facets.base import FacetDefaults
from flipgate.items.item import Item
from flipgate.scoring import exact_match, normalize_answer

SHORT_ANSWER_TOKENS = 16


class ShortAnswerFacet(FacetDefaults):
    """The content label is the SQuAD-normalised answer string, invariant under any ordering."""

    readouts = ("regex",)
    scoring = "SQuAD-normalised short answer; exact match against gold and aliases"

    @staticmethod
    def ask(prompt: str | tuple[tuple[str, str], ...], seed: int, key: tuple) -> Request:
        """A free-form request: one user prompt (or whole chat), answer after "Answer:"."""
        messages = (("user", prompt),) if isinstance(prompt, str) else prompt
        return Request(messages, "Answer:", (), seed, key, SHORT_ANSWER_TOKENS)

    def n_classes(self, item: Item, k: int) -> int:
        return k  # free-form answers: C = K (docs/definitions.md §3 OSI)

    def map_back(self, answer: str | None, item: Item, perm: tuple[int, ...]) -> str | None:
        if answer is None:
            return None
        return normalize_answer(answer) or None

    def is_correct(self, content: str | None, item: Item) -> bool | None:
        if item.answer is None:
            return None
        return exact_match(content, (item.answer, *item.aliases))
