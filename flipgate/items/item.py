"""The canonical per-item record every facet renders from."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from flipgate import FlipgateError

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class Passage:
    """An evidence unit: a chunk (flat list) or a whole retrieved document (ranked list)."""

    text: str
    title: str = ""
    supporting: bool = False


@dataclass(frozen=True)
class Item:
    """One evaluation item. ``options`` in source order with ``gold`` the source index (MCQ);
    ``passages`` in source order with ``answer``/``aliases`` the short gold answer (QA)."""

    item_id: str
    dataset: str
    question: str
    options: tuple[str, ...] = ()
    gold: int | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    passages: tuple[Passage, ...] = ()
    answer: str | None = None
    aliases: tuple[str, ...] = ()
    images: tuple[bytes, ...] = ()  # encoded images (PNG/JPEG bytes), in source order

    @property
    def n_options(self) -> int:
        return len(self.options)


def require(row: Mapping[str, Any], fields: list[str], where: str) -> list[Any]:
    """Fetch ``fields`` from a dataset row or raise a FlipgateError naming source, row and field."""
    values = []
    for name in fields:
        value = row.get(name) if hasattr(row, "get") else None
        if value is None or (isinstance(value, str) and not value.strip()):
            raise FlipgateError(
                f"{where}: required field {name!r} is missing or empty (value: {value!r})"
            )
        values.append(value)
    return values


def gold_from_letter(letter: Any, labels: list[str], where: str) -> int:
    """Index of the gold label ``letter`` among ``labels`` (e.g. answerKey 'C')."""
    if letter not in labels:
        raise FlipgateError(
            f"{where}: field 'answerKey' value {letter!r} is not one of the labels {labels}"
        )
    return labels.index(letter)


def with_shuffled_options(item: Item) -> Item:
    """``item`` with its options in a fixed pseudo-random order seeded by sha256 of its id, for
    sources that always list the gold first or second (TruthfulQA-MC, CrowS-Pairs): otherwise a
    model that always answers "A" scores 100% under any unpermuted template.
    ``meta["source_order"]`` maps each shown position to the source index."""
    import hashlib
    import random

    if item.gold is None:  # the ValueError order.index(None) raised, now naming the item
        raise ValueError(f"with_shuffled_options: item {item.item_id!r} has no gold option")
    order = list(range(item.n_options))
    random.Random(int(hashlib.sha256(item.item_id.encode()).hexdigest()[:16], 16)).shuffle(order)
    return replace(
        item,
        options=tuple(item.options[i] for i in order),
        gold=order.index(item.gold),
        meta={**item.meta, "source_order": order},
    )
