"""Generated multi-hop QA with distractors: offline default data for the evidence facets.

Names are invented (no world knowledge helps); each item needs two supporting facts (person →
city → country) and carries distractor facts about other people and cities. Deterministic in
``seed``. ``units="chunks"`` gives sentence-level passages (3–6), ``"documents"`` whole titled
documents (2–6) as a retrieval list.
"""
from __future__ import annotations

import random

from flipgate.items.item import Item, Passage

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "kl", "st", "tr"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "eo", "ou"]
_TRADES = ["weaver", "surveyor", "glassblower", "cartographer", "luthier", "astronomer", "brewer", "archivist"]
_SIGHTS = ["salt markets", "copper bridges", "tide gardens", "bell towers", "river ferries", "stone libraries"]


def _name(rng: random.Random, syllables: int, used: set[str]) -> str:
    while True:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)).capitalize()
        if word not in used:
            used.add(word)
            return word


def _world(rng: random.Random, used: set[str]) -> dict:
    person = f"{_name(rng, 2, used)} {_name(rng, 3, used)}"
    city, country = _name(rng, 3, used), _name(rng, 3, used) + "ia"
    return {"person": person, "city": city, "country": country, "trade": rng.choice(_TRADES),
            "sight": rng.choice(_SIGHTS), "year": rng.randint(1801, 1999)}


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _chunks(w: dict, gold: bool) -> list[Passage]:
    return [Passage(f"{w['person']}, {_a(w['trade'])}, was born in {w['city']} in {w['year']}.", w["person"], gold),
            Passage(f"{w['city']} is a city in {w['country']}, known for its {w['sight']}.", w["city"], gold)]


def _document(w: dict, gold: bool) -> Passage:
    text = (f"{w['person']} (born {w['year']}) is {_a(w['trade'])}. {w['person']} was born in {w['city']}, "
            f"a city in {w['country']} known for its {w['sight']}.")
    return Passage(text, f"{w['person']} — biography", gold)


def generate(dataset: str, units: str = "chunks", n: int = 200, seed: int = 42) -> list[Item]:
    rng = random.Random(f"{dataset}:{seed}")
    items = []
    for i in range(n):
        used: set[str] = set()
        target = _world(rng, used)
        others = [_world(rng, used) for _ in range(3)]
        if units == "chunks":
            passages = _chunks(target, True)
            distractors = [p for w in others for p in _chunks(w, False)]
            passages += rng.sample(distractors, rng.randint(1, 4))  # 3–6 chunks
        else:
            passages = [_document(target, True)] + [_document(w, False) for w in others[: rng.randint(1, 3)]]
        order = list(range(len(passages)))
        rng.shuffle(order)  # the canonical order is a fixed shuffle, not "gold first"
        question = f"In which country was {target['person']} born?"
        items.append(Item(f"{dataset}/{i}", dataset, question, passages=tuple(passages[j] for j in order),
                          answer=target["country"], meta={"hops": 2 if units == "chunks" else 1}))
    return items
