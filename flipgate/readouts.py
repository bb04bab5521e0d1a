"""Readouts: how a raw backend output becomes a displayed label (docs/definitions.md §8; flipbench).

``letter_logprob``: argmax over the candidate labels' log-probs at the answer position.
``regex``: the label after "Answer:" in the generated text (the faithful reference e*); for a
free-form request (no labels) the short answer on the last "Answer:" line.
``cloze``: the label whose option string (the request's continuation) has the highest mean
log-probability per token after the answer prefix (the decomposition suite asks for it).
An output that yields no label is a parse failure (``None``), never a guess.
"""

from __future__ import annotations

import math
import re

from flipgate import FlipgateError
from flipgate.backends.base import Output

READOUTS = ("letter_logprob", "regex", "cloze")


def parse_answer_label(text: str, labels: tuple[str, ...]) -> str | None:
    """Label from 'Answer: X' (last occurrence), or a text that is only a label ('B', '(B).')."""
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    found = re.findall(
        rf"answer\s*(?:is)?\s*[:\-]?\s*\(?\**({alternatives})\b\)?", text, flags=re.IGNORECASE
    )
    found = (
        [f for f in found if f in labels]
        or [f.upper() for f in found if f.upper() in labels]
        or [f.lower() for f in found if f.lower() in labels]
    )
    if found:
        return found[-1]
    bare = re.fullmatch(
        rf"\s*\(?\**({alternatives})\**\)?[.:)]?\s*(?:[.\-:]\s.*)?", text, flags=re.DOTALL
    )
    return bare.group(1) if bare else None


def parse_short_answer(text: str) -> str | None:
    """The text after the last "Answer:" that is followed by an answer, up to the end of its
    line; without any "Answer:", the first line. Repeated bare prefixes ("Answer: Answer:") parse
    to nothing."""
    marker = re.compile(r"answer(?:\s+is)?\s*:", flags=re.IGNORECASE)
    matches = list(marker.finditer(text))
    pieces = [text[m.end() :].split("\n")[0] for m in reversed(matches)] or [
        text.strip().split("\n")[0]
    ]
    for piece in pieces:
        candidate = marker.sub(" ", piece).strip().strip("*").strip()
        if candidate:
            return candidate
    return None


def label_probabilities(output: Output, labels: tuple[str, ...]) -> list[float] | str:
    """The probability of each label at the answer position, normalised over ``labels`` (from
    the letter log-probs), or why there is none: a label without a log-prob."""
    logp = {k: v for k, v in output.label_logprobs.items() if k in labels}
    missing = sorted(set(labels) - set(logp))
    if missing:
        return f"no log-prob for label(s) {missing}"
    top = max(logp.values())
    weights = [math.exp(logp[label] - top) for label in labels]
    return [w / sum(weights) for w in weights]


def read_label(
    readout: str, output: Output, labels: tuple[str, ...], answer_prefix: str
) -> str | None:
    """The displayed label (or, with no labels, the short answer) under ``readout``."""
    if not labels:
        if readout == "regex":
            return parse_short_answer(answer_prefix + output.text) if output.text else None
        return None  # letter log-probs need candidate labels
    if readout == "letter_logprob":
        scores = {k: v for k, v in output.label_logprobs.items() if k in labels}
        return max(scores, key=scores.__getitem__) if scores else None
    if readout == "regex":
        return parse_answer_label(answer_prefix + output.text, labels) if output.text else None
    if readout == "cloze":
        cloze = {k: v for k, v in output.continuation_logprobs.items() if k in labels}
        return max(cloze, key=cloze.__getitem__) if cloze else None
    raise FlipgateError(f"unknown readout {readout!r}; known: {', '.join(READOUTS)}")
