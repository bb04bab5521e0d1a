"""Drawn image sets (PIL): offline default data for image_set_order.

Each item shows 2–5 images, one coloured shape each, and asks a question whose answer does not
depend on the image order (a count, or the colour of the one shape of a kind). About one item in
ten asks about "the first image" on purpose, so the position-reference screen has work to do.
"""

from __future__ import annotations

import io
import random

from flipgate.items.item import Item

COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 160, 60),
    "blue": (40, 70, 220),
    "yellow": (235, 200, 20),
    "purple": (140, 50, 170),
    "orange": (240, 130, 20),
}
SHAPES = ("circle", "square", "triangle")


def draw(shape: str, colour: str, size: int = 96) -> bytes:
    """A PNG of one filled shape on a white background."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (size, size), "white")
    pen = ImageDraw.Draw(img)
    m = size // 6
    box = (m, m, size - m, size - m)
    fill = COLOURS[colour]
    if shape == "circle":
        pen.ellipse(box, fill=fill)
    elif shape == "square":
        pen.rectangle(box, fill=fill)
    else:
        pen.polygon([(size // 2, m), (size - m, size - m), (m, size - m)], fill=fill)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _options(rng: random.Random, gold: str, pool: list[str]) -> tuple[tuple[str, ...], int]:
    options = [gold] + rng.sample([p for p in pool if p != gold], 3)
    rng.shuffle(options)
    return tuple(options), options.index(gold)


def generate(dataset: str, n: int = 200, seed: int = 42) -> list[Item]:
    rng = random.Random(f"{dataset}:{seed}")
    items = []
    for i in range(n):
        count = rng.randint(2, 5)
        shapes = rng.sample(SHAPES, min(count, len(SHAPES))) + [
            rng.choice(SHAPES) for _ in range(count - 3)
        ]
        colours = [rng.choice(list(COLOURS)) for _ in range(count)]
        kind = rng.random()
        if kind < 0.1:
            question = "What colour is the shape in the first image?"
            options, gold = _options(rng, colours[0], list(COLOURS))
        elif kind < 0.55 and shapes.count(shapes[0]) == 1:
            question = f"What colour is the {shapes[0]}?"
            options, gold = _options(rng, colours[0], list(COLOURS))
        else:
            colour = rng.choice(colours)
            true = sum(c == colour for c in colours)
            options, gold = _options(rng, str(true), [str(k) for k in range(0, 6)])
            question = f"How many of the images show a {colour} shape?"
        items.append(
            Item(
                f"{dataset}/{i}",
                dataset,
                question,
                options,
                gold,
                images=tuple(draw(s, c) for s, c in zip(shapes, colours)),
                meta={"shapes": shapes, "colours": colours},
            )
        )
    return items


def generate_mixed(dataset: str, n: int = 200, seed: int = 42) -> list[Item]:
    """Mixed text + image component sets: two or three short passages and one or two drawn shapes.
    Half the questions are answered by a passage, half by an image."""
    from flipgate.items.item import Passage
    from flipgate.items.synthetic import _a, _world

    rng = random.Random(f"{dataset}:{seed}")
    items = []
    for i in range(n):
        used: set[str] = set()
        worlds = [_world(rng, used) for _ in range(rng.randint(2, 3))]
        passages = tuple(
            Passage(f"{w['person']} works as {_a(w['trade'])} in {w['city']}.", w["person"])
            for w in worlds
        )
        figures = [
            (rng.choice(SHAPES), rng.choice(list(COLOURS))) for _ in range(rng.randint(1, 2))
        ]
        if len({s for s, _ in figures}) < len(figures):
            figures = figures[:1]
        if rng.random() < 0.5:
            target = rng.choice(worlds)
            question, answer = f"In which city does {target['person']} work?", target["city"]
        else:
            shape, colour = rng.choice(figures)
            question, answer = f"What colour is the {shape} in the images?", colour
        components = [("text", j) for j in range(len(passages))] + [
            ("image", j) for j in range(len(figures))
        ]
        rng.shuffle(components)
        items.append(
            Item(
                f"{dataset}/{i}",
                dataset,
                question,
                passages=passages,
                answer=answer,
                images=tuple(draw(s, c) for s, c in figures),
                meta={"components": tuple(components)},
            )
        )
    return items
