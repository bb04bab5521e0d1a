"""Drawn scenes for the image sweeps (docs/definitions.md §10): flat coloured shapes on a white
canvas (PIL), the 2-D stand-in for the continuity paper's rendered CLEVR scenes."""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

from flipgate.items.shapes import COLOURS

WIDTH, HEIGHT = 320, 240
#: shape kinds and the nouns the questions use for them
NOUNS = {"circle": "ball", "square": "cube", "triangle": "cone"}


@dataclass(frozen=True)
class Shape:
    kind: str  # circle | square | triangle
    colour: str  # a key of flipgate.items.shapes.COLOURS
    cx: float
    cy: float
    size: float  # diameter / side, pixels


def render(shapes: list[Shape]) -> bytes:
    """A PNG of the shapes, drawn in order (later ones on top), outlined so overlaps stay
    visible."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (WIDTH, HEIGHT), "white")
    pen = ImageDraw.Draw(img)
    for s in shapes:
        r = s.size / 2
        box = (s.cx - r, s.cy - r, s.cx + r, s.cy + r)
        fill, outline = COLOURS[s.colour], (20, 20, 20)
        if s.kind == "circle":
            pen.ellipse(box, fill=fill, outline=outline, width=2)
        elif s.kind == "square":
            pen.rectangle(box, fill=fill, outline=outline, width=2)
        else:
            points = [(s.cx, s.cy - r), (s.cx + r, s.cy + r), (s.cx - r, s.cy + r)]
            pen.polygon(points, fill=fill, outline=outline)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def scattered(rng: random.Random, specs: list[tuple[str, str]], size: float = 30) -> list[Shape]:
    """``(kind, colour)`` shapes at distinct cells of a grid over the canvas (no overlaps),
    jittered inside their cells."""
    cols, rows = int(WIDTH // (size * 1.4)), int(HEIGHT // (size * 1.4))
    if len(specs) > cols * rows:
        raise ValueError(f"{len(specs)} shapes do not fit a {cols}x{rows} grid")
    cells = rng.sample(range(cols * rows), len(specs))
    cw, ch = WIDTH / cols, HEIGHT / rows
    slack = (min(cw, ch) - size) / 2
    return [
        Shape(
            kind,
            colour,
            (c % cols + 0.5) * cw + rng.uniform(-slack, slack),
            (c // cols + 0.5) * ch + rng.uniform(-slack, slack),
            size,
        )
        for (kind, colour), c in zip(specs, cells)
    ]
