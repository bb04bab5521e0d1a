"""Sweeps of the continuity suite (docs/definitions.md §10, CP §3): text sweeps for every model,
image sweeps (drawn scenes) for models that take images, audio sweeps (synthesised beeps) for
audio-language models.

A sweep is a run of inputs whose ambiguity rises step by step to a most ambiguous input and then
falls again. The I+ branch (``n_plus`` inputs, d = n_plus - 1 … 0) moves toward that input, the
I- branch (``n_minus`` inputs, d = 0 … n_minus - 1) moves away from it; d counts the steps to it.
The gold answer may differ between the branches (the transition lies between them).

Each input carries FESTA prompts: functionally equivalent ones (reworded, same gold) and
complementary ones (the opposite gold; none for counting, as in the paper). A sweep source draws
everything from its own ``random.Random`` seeded by a sha256 of ``"{name}/{seed}/{index}"``, so a
source is stable across processes and does not change when more sources are asked for.
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from flipgate import FlipgateError
from flipgate.items.shapes import COLOURS

PLUS = "I+"
MINUS = "I-"


@dataclass(frozen=True)
class SweepInput:
    """One input of a sweep: where it sits (branch, step, d), its prompt, gold and FESTA prompts."""

    sweep: str
    source: str
    branch: str
    step: int
    d: int
    prompt: str
    gold: str
    equivalents: tuple[str, ...]
    complements: tuple[tuple[str, str], ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    #: the input's image (PNG) for an image sweep, its clip (WAV) for an audio sweep; its FESTA
    #: variants reword the question about it
    image: bytes | None = None
    audio: bytes | None = None


@dataclass(frozen=True)
class SweepSpec:
    """A sweep's answer space, a one-line description, and how to read a model's answer."""

    name: str
    answers: tuple[str, ...]
    question: str
    modality: str = "text"  # text | image | audio

    def parse(self, text: str) -> str | None:
        """The canonical answer in a model's free text, None when it names none.

        Word answers: the one answer word (whole word, any case) the text names; None when it
        names both (an echo of the options is not an answer). Numeric answers:
        the first integer in digits, or number word zero … twelve (also "once", "twice"); digits
        are returned as written (normalised, so possibly outside ``answers``, e.g. "13").
        """
        if all(a.isdigit() for a in self.answers):
            return _parse_count(text)
        return _parse_word(text, self.answers)


@functools.cache
def _word_pattern(answers: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"\b(" + "|".join(re.escape(a.lower()) for a in answers) + r")\b")


def _parse_word(text: str, answers: tuple[str, ...]) -> str | None:
    """The one answer word the text names; None when it names none or several (a model that
    echoes "larger or smaller" has not answered)."""
    named = set(_word_pattern(answers).findall(text.lower()))
    return named.pop() if len(named) == 1 else None


_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}
_NUMBER_WORDS.update(once=1, twice=2)
_COUNT_RE = re.compile(r"\b(\d+|" + "|".join(_NUMBER_WORDS) + r")\b")


def _parse_count(text: str) -> str | None:
    match = _COUNT_RE.search(text.lower())
    if match is None:
        return None
    token = match.group(1)
    return str(int(token)) if token.isdigit() else str(_NUMBER_WORDS[token])


# ---------------------------------------------------------------------------------------------
# shared machinery


@dataclass(frozen=True)
class _Step:
    """What a sweep generator makes for one (branch, d) point of a source."""

    prompt: str
    gold: str
    equivalents: tuple[str, ...]
    complements: tuple[tuple[str, str], ...]
    meta: dict[str, Any]
    image: bytes | None = None
    audio: bytes | None = None


_StepFn = Callable[[str, int], _Step]  # (branch, d) -> the input at that point
# (rng, n_equivalent, n_complementary, max_d) -> the step maker of one source
_Build = Callable[[random.Random, int, int, int], _StepFn]


@dataclass(frozen=True)
class _Generator:
    spec: SweepSpec
    build: _Build
    max_equivalent: int | None  # None: any number
    max_complementary: int | None  # None: any number (or ignored)


def _source_rng(name: str, seed: int, index: int) -> random.Random:
    digest = hashlib.sha256(f"{name}/{seed}/{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _check_int(what: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FlipgateError(f"{what} must be an integer >= {minimum}, got {value!r}")


def distances(n_plus: int, n_minus: int) -> list[int]:
    """d of every input of a sweep: [n_plus-1, …, 0] for I+, then [0, …, n_minus-1] for I-."""
    _check_int("n_plus", n_plus, 2)
    _check_int("n_minus", n_minus, 2)
    return list(range(n_plus - 1, -1, -1)) + list(range(n_minus))


# ---------------------------------------------------------------------------------------------
# comparison sweeps: a value a moves toward a fixed anchor b, then past it


@dataclass(frozen=True)
class _Comparison:
    """One source of a comparison sweep; values are integer ticks (``scale`` ticks per unit).

    Templates are ``str.format`` strings over {x}, {xv} (the object asked about and its value),
    {y}, {yv} (the reference) and the ``context`` fields; ``templates[0]`` is the primary prompt.
    """

    templates: tuple[str, ...]
    answers: tuple[str, str]  # (gold when a < b, gold when a > b)
    anchor: int
    base_gap: int
    scale: int = 1
    names: tuple[str, str] = ("", "")  # (primary, anchor)
    context: dict[str, str] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    #: an image or audio sweep: the scene (PNG) or clip (WAV) with the primary at value a
    draw: Callable[[int], bytes] | None = None
    modality: str = "text"

    def value(self, ticks: int) -> int | float:
        return ticks if self.scale == 1 else ticks / self.scale

    def text(self, ticks: int) -> str:
        return str(ticks) if self.scale == 1 else f"{ticks / self.scale:.1f}"

    def render(self, template: str, a: int, swapped: bool) -> str:
        """The prompt asking about the primary against the anchor (about the anchor if swapped)."""
        (x, xv), (y, yv) = (self.names[0], a), (self.names[1], self.anchor)
        if swapped:
            (x, xv), (y, yv) = (y, yv), (x, xv)
        return template.format(x=x, xv=self.text(xv), y=y, yv=self.text(yv), **self.context)


def _draw_ladder(rng: random.Random, max_d: int, low: int, high: int) -> tuple[int, int]:
    """(base_gap, anchor): gaps are base_gap * 2**d, and the anchor is at least ``low`` ticks
    above the largest gap so that every value stays positive."""
    base_gap = rng.randint(1, 3)
    top = base_gap * 2**max_d
    return base_gap, rng.randint(top + low, top + high)


def _comparison_steps(
    rng: random.Random, n_equivalent: int, n_complementary: int, src: _Comparison
) -> _StepFn:
    primary, *others = src.templates
    equivalents = rng.sample(others, n_equivalent)
    complements = rng.sample(src.templates, n_complementary)
    below, above = src.answers

    def step(branch: str, d: int) -> _Step:
        gap = src.base_gap * 2**d
        a = src.anchor - gap if branch == PLUS else src.anchor + gap
        gold, opposite = (below, above) if a < src.anchor else (above, below)
        return _Step(
            prompt=src.render(primary, a, swapped=False),
            gold=gold,
            equivalents=tuple(src.render(t, a, swapped=False) for t in equivalents),
            complements=tuple((src.render(t, a, swapped=True), opposite) for t in complements),
            image=src.draw(a) if src.draw and src.modality == "image" else None,
            audio=src.draw(a) if src.draw and src.modality == "audio" else None,
            meta={
                "a": src.value(a),
                "b": src.value(src.anchor),
                "gap": src.value(gap),
                "base_gap": src.value(src.base_gap),
                **src.meta,
            },
        )

    return step


_LARGER_OR_SMALLER = "Answer with one word: larger or smaller."
_NUMERIC_TEMPLATES = (
    "Is {xv} larger or smaller than {yv}? " + _LARGER_OR_SMALLER,
    "Compare {xv} with {yv}. Is {xv} larger or smaller? " + _LARGER_OR_SMALLER,
    "Consider the numbers {xv} and {yv}. Is {xv} larger or smaller than {yv}? "
    + _LARGER_OR_SMALLER,
    "Is the number {xv} larger or smaller than the number {yv}? " + _LARGER_OR_SMALLER,
    "Think of {xv} and {yv}. Is {xv} the larger or the smaller of the two? " + _LARGER_OR_SMALLER,
)
_DECIMAL_SHARE = 0.3  # share of numeric sources with one-decimal numbers


def _numeric_source(
    rng: random.Random, n_equivalent: int, n_complementary: int, max_d: int
) -> _StepFn:
    scale = 10 if rng.random() < _DECIMAL_SHARE else 1
    # anchors 30..90 (gap unit 1, integers) or about 11..91 (one decimal), above the largest gap
    low, high = (14, 74) if scale == 1 else (100, 900)
    base_gap, anchor = _draw_ladder(rng, max_d, low, high)
    src = _Comparison(
        templates=_NUMERIC_TEMPLATES,
        answers=("smaller", "larger"),
        anchor=anchor,
        base_gap=base_gap,
        scale=scale,
        meta={"decimals": int(scale != 1)},
    )
    return _comparison_steps(rng, n_equivalent, n_complementary, src)


_LEFT_OR_RIGHT = "Answer with one word: left or right."
_POSITION_TEMPLATES = (
    "{Where}, the {x} is {xv} {u} from the left end and the {y} is {yv} {u} from the left end. "
    "Is the {x} to the left or to the right of the {y}? " + _LEFT_OR_RIGHT,
    "{Where}, the {y} is {yv} {u} from the left end and the {x} is {xv} {u} from the left end. "
    "Is the {x} to the left or to the right of the {y}? " + _LEFT_OR_RIGHT,
    "A {x} and a {y} stand {where}. Measured from the left end, the {x} is at {xv} {u} and the "
    "{y} is at {yv} {u}. Is the {x} left or right of the {y}? " + _LEFT_OR_RIGHT,
    "{Where}, the {x} is {xv} {u} from the left end. The {y} is {yv} {u} from the left end. "
    "Relative to the {y}, is the {x} on the left or on the right? " + _LEFT_OR_RIGHT,
)
# consonant-initial (the templates write "a {x}"), none a prefix of another
_OBJECTS = (
    "cup vase book lamp clock candle bowl jar plant box bottle mug radio teapot basket globe"
).split()
_SURFACES = (
    "on a straight shelf",
    "on a long wooden bench",
    "on a narrow windowsill",
    "on a long table",
    "on a straight plank",
)
_LENGTH_UNITS = ("cm", "inches", "mm")


def _positions_source(
    rng: random.Random, n_equivalent: int, n_complementary: int, max_d: int
) -> _StepFn:
    primary, anchor_name = rng.sample(_OBJECTS, 2)
    where = rng.choice(_SURFACES)
    unit = rng.choice(_LENGTH_UNITS)
    base_gap, anchor = _draw_ladder(rng, max_d, 10, 70)
    src = _Comparison(
        templates=_POSITION_TEMPLATES,
        answers=("left", "right"),
        anchor=anchor,
        base_gap=base_gap,
        names=(primary, anchor_name),
        context={"where": where, "Where": where[0].upper() + where[1:], "u": unit},
        meta={"primary": primary, "anchor": anchor_name, "unit": unit, "surface": where},
    )
    return _comparison_steps(rng, n_equivalent, n_complementary, src)


# ---------------------------------------------------------------------------------------------
# counting with distractors: more clutter toward the most ambiguous input

_CATEGORIES = {
    "fruits": "apple pear plum fig grape lemon mango peach cherry melon kiwi lime".split(),
    "animals": "cat dog horse sheep goat mouse rabbit tiger zebra camel duck frog".split(),
    "colors": "red blue green yellow purple orange pink brown black white gray".split(),
    "tools": "hammer saw drill wrench chisel shovel rake axe pliers ladder".split(),
    "vehicles": "car bus train truck bike boat plane tram van taxi".split(),
}
_MIN_DISTRACTORS = 6  # at the largest d; one more per step toward d = 0


def _count_prompt(words: Sequence[str], target: str) -> str:
    return (
        f"Here is a list: {', '.join(words)}. "
        f"How many times does the word '{target}' appear? Answer with a number."
    )


def _reshuffles(rng: random.Random, words: list[str], n: int) -> list[list[str]]:
    """n orderings of the same words, each new where a few draws find one."""
    seen = {tuple(words)}
    out = []
    for _ in range(n):
        for _attempt in range(100):
            order = rng.sample(words, len(words))
            if tuple(order) not in seen:
                break
        seen.add(tuple(order))
        out.append(order)
    return out


def _counting_source(
    rng: random.Random, n_equivalent: int, n_complementary: int, max_d: int
) -> _StepFn:
    category = rng.choice(sorted(_CATEGORIES))
    target = rng.choice(_CATEGORIES[category])
    others = [w for w in _CATEGORIES[category] if w != target]
    count = rng.randint(2, 5)

    def step(branch: str, d: int) -> _Step:
        n_distractors = _MIN_DISTRACTORS + max_d - d
        words = [target] * count + rng.choices(others, k=n_distractors)
        rng.shuffle(words)
        return _Step(
            prompt=_count_prompt(words, target),
            gold=str(count),
            equivalents=tuple(
                _count_prompt(order, target) for order in _reshuffles(rng, words, n_equivalent)
            ),
            complements=(),
            meta={
                "distractors": n_distractors,
                "target_count": count,
                "target": target,
                "category": category,
                "words": tuple(words),
            },
        )

    return step


# ---------------------------------------------------------------------------------------------
# image sweeps (drawn scenes, flipgate/continuity/scenes.py; for models that take images)

_SPATIAL_TEMPLATES = (
    "Is the {x} to the left or to the right of the {y}? " + _LEFT_OR_RIGHT,
    "Relative to the {y}, is the {x} on the left or on the right? " + _LEFT_OR_RIGHT,
    "Look at the {x} and the {y} in the image. Is the {x} left or right of the {y}? "
    + _LEFT_OR_RIGHT,
    "In the picture, is the {x} on the left side or the right side of the {y}? " + _LEFT_OR_RIGHT,
)
_SCALE_TEMPLATES = (
    "Is the {x} larger or smaller than the {y}? " + _LARGER_OR_SMALLER,
    "Compare the sizes of the {x} and the {y}. Is the {x} larger or smaller? " + _LARGER_OR_SMALLER,
    "Look at the image. Is the {x} larger or smaller than the {y}? " + _LARGER_OR_SMALLER,
    "In the picture, is the {x} bigger or smaller than the {y}? Answer with one word: larger or "
    "smaller.",
)
_CLUTTER_TEMPLATES = (
    "How many {c} {n}s are in the image? Answer with a number.",
    "Count the {c} {n}s in the picture. Answer with a number.",
    "Look at the image. How many {c} {n}s can you see? Answer with a number.",
    "In this image, what is the number of {c} {n}s? Answer with a number.",
)


def _spatial_source(
    rng: random.Random, n_equivalent: int, n_complementary: int, max_d: int
) -> _StepFn:
    """A ball (or other shape) moves along a row past a fixed shape at the centre; optional
    distractor shapes sit off the sweep axis."""
    from flipgate.continuity.scenes import HEIGHT, NOUNS, WIDTH, Shape, render, scattered

    kinds = rng.sample(sorted(NOUNS), 2)
    colours = rng.sample(sorted(COLOURS), 3)
    anchor = Shape(kinds[1], colours[1], WIDTH / 2, HEIGHT / 2, 44)
    row = HEIGHT / 2 + rng.choice((-26, 26))
    extra = [(rng.choice(sorted(NOUNS)), colours[2]) for _ in range(rng.randint(0, 2))]
    off_axis = [s for s in scattered(rng, extra, 24) if abs(s.cy - HEIGHT / 2) > 60]

    def draw(x: int) -> bytes:
        return render([anchor, *off_axis, Shape(kinds[0], colours[0], x, row, 40)])

    names = (f"{colours[0]} {NOUNS[kinds[0]]}", f"{colours[1]} {NOUNS[kinds[1]]}")
    src = _Comparison(
        templates=_SPATIAL_TEMPLATES,
        answers=("left", "right"),
        anchor=WIDTH // 2,
        base_gap=rng.choice((4, 5, 6)),  # pixels; 64-96 at d = 4, overlapping at d = 0
        names=names,
        meta={"primary": names[0], "anchor": names[1], "distractors": len(off_axis)},
        draw=draw,
        modality="image",
    )
    return _comparison_steps(rng, n_equivalent, n_complementary, src)


def _scale_source(
    rng: random.Random, n_equivalent: int, n_complementary: int, max_d: int
) -> _StepFn:
    """Two shapes of one kind side by side; the first grows from smaller than the second to
    larger (sizes in pixels, the second's fixed)."""
    from flipgate.continuity.scenes import HEIGHT, NOUNS, WIDTH, Shape, render

    kind = rng.choice(sorted(NOUNS))
    colours = rng.sample(sorted(COLOURS), 2)
    left_first = rng.random() < 0.5
    xs = (WIDTH * 0.28, WIDTH * 0.72) if left_first else (WIDTH * 0.72, WIDTH * 0.28)
    size = rng.randint(70, 80)

    def draw(a: int) -> bytes:
        return render(
            [
                Shape(kind, colours[1], xs[1], HEIGHT / 2, size),
                Shape(kind, colours[0], xs[0], HEIGHT / 2, a),
            ]
        )

    names = (f"{colours[0]} {NOUNS[kind]}", f"{colours[1]} {NOUNS[kind]}")
    src = _Comparison(
        templates=_SCALE_TEMPLATES,
        answers=("smaller", "larger"),
        anchor=size,
        base_gap=rng.choice((2, 3)),  # pixels; 32-48 at d = 4, one size step at d = 0
        names=names,
        meta={"primary": names[0], "anchor": names[1], "kind": kind},
        draw=draw,
        modality="image",
    )
    return _comparison_steps(rng, n_equivalent, n_complementary, src)


def _clutter_source(
    rng: random.Random, n_equivalent: int, n_complementary: int, max_d: int
) -> _StepFn:
    """2-5 target shapes of one colour and kind among distractor shapes (other colour or kind),
    6 + (max_d - d) of them, scattered without overlaps."""
    from flipgate.continuity.scenes import NOUNS, render, scattered

    kind = rng.choice(sorted(NOUNS))
    colour = rng.choice(sorted(COLOURS))
    pool = [(k, c) for k in sorted(NOUNS) for c in sorted(COLOURS) if (k, c) != (kind, colour)]
    count = rng.randint(2, 5)
    primary, *others = _CLUTTER_TEMPLATES
    equivalents = rng.sample(others, n_equivalent)

    def step(branch: str, d: int) -> _Step:
        n_distractors = _MIN_DISTRACTORS + max_d - d
        specs = [(kind, colour)] * count + [rng.choice(pool) for _ in range(n_distractors)]
        words = {"c": colour, "n": NOUNS[kind]}
        return _Step(
            prompt=primary.format(**words),
            gold=str(count),
            equivalents=tuple(t.format(**words) for t in equivalents),
            complements=(),
            meta={"distractors": n_distractors, "target_count": count, "target": words},
            image=render(scattered(rng, specs)),
        )

    return step


# ---------------------------------------------------------------------------------------------
# audio sweeps (synthesised tone bursts, flipgate/continuity/sounds.py; for audio models)

_BEFORE_OR_AFTER = "Answer with one word: before or after."
_TEMPORAL_TEMPLATES = (
    "Does the {x} start before or after the {y}? " + _BEFORE_OR_AFTER,
    "Listen to the clip. Does the {x} begin before or after the {y}? " + _BEFORE_OR_AFTER,
    "In this recording, is the {x} heard before or after the {y}? " + _BEFORE_OR_AFTER,
    "Relative to the {y}, does the {x} come before or after it? " + _BEFORE_OR_AFTER,
)
_LOUDER_OR_QUIETER = "Answer with one word: louder or quieter."
_LOUDNESS_TEMPLATES = (
    "Is the {x} louder or quieter than the {y}? " + _LOUDER_OR_QUIETER,
    "Listen to the two beeps. Is the {x} louder or quieter than the {y}? " + _LOUDER_OR_QUIETER,
    "Compare the volume of the {x} with that of the {y}. Is the {x} louder or quieter? "
    + _LOUDER_OR_QUIETER,
    "In this recording, is the {x} louder or quieter than the {y}? " + _LOUDER_OR_QUIETER,
)
_PITCHES = {"high": (1100, 1600), "low": (250, 400)}  # Hz ranges of the two beeps


def _noise(rng: random.Random, levels: tuple[float, float]) -> float | None:
    """Half the sources get a white-noise floor (one of ``levels``, dB full scale)."""
    return rng.choice(levels) if rng.random() < 0.5 else None


def _temporal_source(
    rng: random.Random, n_equivalent: int, n_complementary: int, max_d: int
) -> _StepFn:
    """A beep moves along a 4-second timeline toward another beep's onset, then past it (onsets
    in milliseconds; the anchor's fixed at 1.8 s)."""
    from flipgate.continuity.sounds import Burst, mix, wav

    first = rng.choice(("high", "low"))
    pitch = {k: rng.uniform(*hz) for k, hz in _PITCHES.items()}
    other = "low" if first == "high" else "high"
    noise, anchor_ms, length = _noise(rng, (-45.0, -35.0)), 1800, rng.uniform(0.25, 0.35)

    def draw(onset_ms: int) -> bytes:
        bursts = [
            Burst(pitch[other], anchor_ms / 1000, length, -12.0),
            Burst(pitch[first], onset_ms / 1000, length, -12.0),
        ]
        return wav(mix(bursts, noise, seed=onset_ms))

    names = (f"{first} beep", f"{other} beep")
    src = _Comparison(
        templates=_TEMPORAL_TEMPLATES,
        answers=("before", "after"),
        anchor=anchor_ms,
        base_gap=rng.choice((80, 100)),  # ms; 1.28-1.6 s at d = 4, overlapping at d = 0
        names=names,
        meta={"primary": names[0], "anchor": names[1], "noise_db": noise},
        draw=draw,
        modality="audio",
    )
    return _comparison_steps(rng, n_equivalent, n_complementary, src)


def _loudness_source(
    rng: random.Random, n_equivalent: int, n_complementary: int, max_d: int
) -> _StepFn:
    """Two beeps in turn; the first's level rises from below the second's to above it (levels in
    dB, the second's fixed at -20 dBFS)."""
    from flipgate.continuity.sounds import Burst, mix, wav

    hz = rng.uniform(*_PITCHES[rng.choice(("high", "low"))])
    # ticks: level = ticks - 60 dB; the noise stays >= 16 dB under the quietest beep (-36 dBFS)
    noise, anchor_db = _noise(rng, (-60.0, -55.0)), 40

    def draw(level: int) -> bytes:
        bursts = [Burst(hz, 0.8, 0.5, level - 60.0), Burst(hz, 2.4, 0.5, anchor_db - 60.0)]
        return wav(mix(bursts, noise, seed=level))

    src = _Comparison(
        templates=_LOUDNESS_TEMPLATES,
        answers=("quieter", "louder"),
        anchor=anchor_db,
        base_gap=1,  # dB; 16 dB at d = 4, 1 dB at d = 0
        names=("first beep", "second beep"),
        meta={"hz": round(hz), "noise_db": noise},
        draw=draw,
        modality="audio",
    )
    return _comparison_steps(rng, n_equivalent, n_complementary, src)


# ---------------------------------------------------------------------------------------------
# registry and entry point


def _templated(
    name: str,
    answers: tuple[str, ...],
    question: str,
    build: _Build,
    templates: tuple[str, ...],
    modality: str = "text",
    complements: bool = True,
) -> _Generator:
    """A sweep whose FESTA rewordings are its other templates and whose complements are any
    template with the roles swapped (none with ``complements=False``)."""
    return _Generator(
        SweepSpec(name, answers, question, modality),
        build,
        max_equivalent=len(templates) - 1,
        max_complementary=len(templates) if complements else None,
    )


_COUNTS = tuple(str(i) for i in range(13))
_GENERATORS: dict[str, _Generator] = {
    g.spec.name: g
    for g in (
        _templated(
            "numeric_comparison",
            ("larger", "smaller"),
            "Is a number larger or smaller than an anchor it approaches and then passes?",
            _numeric_source,
            _NUMERIC_TEMPLATES,
        ),
        _templated(
            "described_positions",
            ("left", "right"),
            "Is an object left or right of another on a line, as it approaches and passes it?",
            _positions_source,
            _POSITION_TEMPLATES,
        ),
        _Generator(  # counting has no complements; n_complementary is ignored
            SweepSpec(
                "counting_distractors",
                _COUNTS,
                "How often does a word occur in a list, as distractor words are added and removed?",
            ),
            _counting_source,
            max_equivalent=None,
            max_complementary=None,
        ),
        _templated(
            "spatial_location",
            ("left", "right"),
            "Is a drawn shape left or right of another, as it moves toward and past it?",
            _spatial_source,
            _SPATIAL_TEMPLATES,
            "image",
        ),
        _templated(
            "scale",
            ("larger", "smaller"),
            "Is a drawn shape larger or smaller than another, as it grows past its size?",
            _scale_source,
            _SCALE_TEMPLATES,
            "image",
        ),
        _templated(
            "counting_clutter",
            _COUNTS,
            "How many shapes of one colour and kind are drawn, as clutter is added and removed?",
            _clutter_source,
            _CLUTTER_TEMPLATES,
            "image",
            complements=False,
        ),
        _templated(
            "temporal_order",
            ("before", "after"),
            "Does one beep start before or after another, as it moves toward and past it?",
            _temporal_source,
            _TEMPORAL_TEMPLATES,
            "audio",
        ),
        _templated(
            "loudness",
            ("louder", "quieter"),
            "Is one beep louder or quieter than another, as its level rises past the other's?",
            _loudness_source,
            _LOUDNESS_TEMPLATES,
            "audio",
        ),
    )
}

SWEEPS: dict[str, SweepSpec] = {name: g.spec for name, g in _GENERATORS.items()}


def generate(
    name: str,
    n_sources: int,
    seed: int,
    n_equivalent: int = 2,
    n_complementary: int = 2,
    n_plus: int = 5,
    n_minus: int = 5,
) -> list[SweepInput]:
    """The inputs of ``n_sources`` sweeps of one kind, source by source, I+ then I- in each.

    Deterministic in (name, seed, source index); source s is the same for any n_sources > s.
    """
    gen = _GENERATORS.get(name)
    if gen is None:
        raise FlipgateError(f"unknown sweep {name!r}; known sweeps: {', '.join(sorted(SWEEPS))}")
    ds = distances(n_plus, n_minus)
    _check_int("n_sources", n_sources, 0)
    for what, n, most in (
        ("n_equivalent", n_equivalent, gen.max_equivalent),
        ("n_complementary", n_complementary, gen.max_complementary),
    ):
        _check_int(what, n, 0)
        if most is not None and n > most:
            raise FlipgateError(f"{what}={n} but sweep {name!r} has at most {most}")
    plan = [(PLUS, i + 1) for i in range(n_plus)] + [(MINUS, j + 1) for j in range(n_minus)]
    inputs = []
    for index in range(n_sources):
        step = gen.build(_source_rng(name, seed, index), n_equivalent, n_complementary, max(ds))
        source = f"{name}/s{index:02d}"
        for (branch, i), d in zip(plan, ds):
            s = step(branch, d)
            inputs.append(
                SweepInput(
                    sweep=name,
                    source=source,
                    branch=branch,
                    step=i,
                    d=d,
                    prompt=s.prompt,
                    gold=s.gold,
                    equivalents=s.equivalents,
                    complements=s.complements,
                    meta=s.meta,
                    image=s.image,
                    audio=s.audio,
                )
            )
    return inputs
