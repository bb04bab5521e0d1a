"""Short-answer scoring (Facet-Probe §3: normalised exact match; SQuAD v1.1 normalisation)."""

from __future__ import annotations

import re
import string

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and articles, collapse white space (SQuAD v1.1)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str | None, golds: list[str] | tuple[str, ...]) -> bool:
    """True iff the normalised prediction equals any normalised gold answer."""
    if prediction is None:
        return False
    pred = normalize_answer(prediction)
    return any(pred == normalize_answer(g) for g in golds if g is not None)
