"""LLM-judge sem-flip for free-form facets (docs/definitions.md §3.5; Facet-Probe §3, App. E
"Judge 3").

One structured prompt per item shows the K answers and asks for one verdict from a constrained
set. The judge is any configured model (``audit.judge`` in models.yaml; by default the audited
model itself, a local one). Its calls go through the response cache like any other call.
"""

from __future__ import annotations

from flipgate.backends.base import Request
from flipgate.items.item import Item

VERDICTS = ("equivalent", "partial-flip", "full-flip")
UNPARSABLE = "unparsable"
LABELS = ("A", "B", "C")
JUDGE_TEMPLATE = (
    "You compare answers that one assistant gave to the same question when its input was "
    "presented in "
    "different orders. Decide whether the answers mean the same thing.\n\n"
    "Question: {question}\n{gold}\nAnswers:\n{answers}\n\n"
    "A. equivalent: all answers say the same thing\n"
    "B. partial-flip: the answers agree on the main point but differ in some details\n"
    "C. full-flip: at least two answers contradict each other on the main point\n\n"
    'On the final line, output exactly one option label preceded by "Answer: ".'
)


def sem_flip_request(item: Item, answers: list[str | None], key: tuple = ()) -> Request:
    """The judge's request for one item's K answers (unparsed answers shown as "(no answer)")."""
    listed = "\n".join(f"{i + 1}. {a if a else '(no answer)'}" for i, a in enumerate(answers))
    gold = f"Reference answer: {item.answer}" if item.answer else ""
    prompt = JUDGE_TEMPLATE.format(question=item.question.strip(), gold=gold, answers=listed)
    return Request((("user", prompt),), "Answer:", LABELS, 0, key)


def verdict_from_label(label: str | None) -> str:
    return VERDICTS[LABELS.index(label)] if label in LABELS else UNPARSABLE


def is_sem_flip(verdict: str) -> float:
    """1 for partial/full flip, 0 for equivalent, NaN for unparsable (excluded, like a parse
    failure)."""
    if verdict == UNPARSABLE:
        return float("nan")
    return float(verdict != "equivalent")
