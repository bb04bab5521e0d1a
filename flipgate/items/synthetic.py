"""Generated multi-hop QA with distractors: offline default data for the evidence facets.

Names are invented (no world knowledge helps); each item needs two supporting facts (person →
city → country) and carries distractor facts about other people and cities. Deterministic in
``seed``. ``units="chunks"`` gives sentence-level passages (3–6), ``"documents"`` whole titled
documents (2–6) as a retrieval list.
"""

from __future__ import annotations

import random

from flipgate.items.item import Item, Passage

_ONSETS = [
    "b",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "kl",
    "st",
    "tr",
]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "eo", "ou"]
_TRADES = [
    "weaver",
    "surveyor",
    "glassblower",
    "cartographer",
    "luthier",
    "astronomer",
    "brewer",
    "archivist",
]
_SIGHTS = [
    "salt markets",
    "copper bridges",
    "tide gardens",
    "bell towers",
    "river ferries",
    "stone libraries",
]


def _name(rng: random.Random, syllables: int, used: set[str]) -> str:
    while True:
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)
        ).capitalize()
        if word not in used:
            used.add(word)
            return word


def _world(rng: random.Random, used: set[str]) -> dict:
    person = f"{_name(rng, 2, used)} {_name(rng, 3, used)}"
    city, country = _name(rng, 3, used), _name(rng, 3, used) + "ia"
    return {
        "person": person,
        "city": city,
        "country": country,
        "trade": rng.choice(_TRADES),
        "sight": rng.choice(_SIGHTS),
        "year": rng.randint(1801, 1999),
    }


def _a(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def _chunks(w: dict, gold: bool) -> list[Passage]:
    return [
        Passage(
            f"{w['person']}, {_a(w['trade'])}, was born in {w['city']} in {w['year']}.",
            w["person"],
            gold,
        ),
        Passage(
            f"{w['city']} is a city in {w['country']}, known for its {w['sight']}.", w["city"], gold
        ),
    ]


def _document(w: dict, gold: bool) -> Passage:
    text = (
        f"{w['person']} (born {w['year']}) is {_a(w['trade'])}. "
        f"{w['person']} was born in {w['city']}, "
        f"a city in {w['country']} known for its {w['sight']}."
    )
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
            passages = [_document(target, True)] + [
                _document(w, False) for w in others[: rng.randint(1, 3)]
            ]
        order = list(range(len(passages)))
        rng.shuffle(order)  # the canonical order is a fixed shuffle, not "gold first"
        question = f"In which country was {target['person']} born?"
        items.append(
            Item(
                f"{dataset}/{i}",
                dataset,
                question,
                passages=tuple(passages[j] for j in order),
                answer=target["country"],
                meta={"hops": 2 if units == "chunks" else 1},
            )
        )
    return items


_TOOLS = [
    (
        "weather_forecast",
        "get the weather forecast for a city and date",
        "Will it rain in {city} tomorrow?",
    ),
    (
        "currency_convert",
        "convert an amount of money between two currencies",
        "How many euros are 40 dollars?",
    ),
    (
        "calendar_add",
        "add an event to the user's calendar",
        "Put lunch with {person} on my calendar for Friday.",
    ),
    (
        "flight_search",
        "search flights between two airports",
        "Find me a flight from {city} to Lisbon.",
    ),
    (
        "translate_text",
        "translate a text into another language",
        "How do you say 'good morning' in Finnish?",
    ),
    (
        "unit_convert",
        "convert a quantity between units of measure",
        "What is 12 miles in kilometres?",
    ),
    ("send_email", "send an email to a contact", "Email {person} that the meeting moved to 3pm."),
    (
        "stock_quote",
        "get the latest price of a stock",
        "What is the share price of Acme Corp right now?",
    ),
]


def generate_dialogs(dataset: str, n: int = 200, seed: int = 42) -> list[Item]:
    """Notes told across earlier dialog turns (3–6), then a question that needs one of them."""
    rng = random.Random(f"{dataset}:{seed}")
    items = []
    for i in range(n):
        used: set[str] = set()
        people = [_name(rng, 2, used) for _ in range(rng.randint(3, 6))]
        codes = [str(rng.randint(1000, 9999)) for _ in people]
        turns = tuple(f"Please remember: {p}'s locker code is {c}." for p, c in zip(people, codes))
        target = rng.randrange(len(people))
        items.append(
            Item(
                f"{dataset}/{i}",
                dataset,
                f"What is {people[target]}'s locker code?",
                answer=codes[target],
                meta={"turns": turns},
            )
        )
    return items


def generate_tool_queries(dataset: str, n: int = 200, seed: int = 42) -> list[Item]:
    """A user request that exactly one of 4–6 described tools serves (a disambiguating query)."""
    rng = random.Random(f"{dataset}:{seed}")
    items = []
    for i in range(n):
        used: set[str] = set()
        tools = rng.sample(_TOOLS, rng.randint(4, 6))
        name, _, query = rng.choice(tools)
        question = query.format(city=_name(rng, 3, used), person=_name(rng, 2, used))
        items.append(
            Item(
                f"{dataset}/{i}",
                dataset,
                question,
                answer=name,
                meta={"tools": tuple((t, d) for t, d, _ in tools)},
            )
        )
    return items
