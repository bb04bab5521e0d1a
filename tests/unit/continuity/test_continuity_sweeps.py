"""Sweeps of the continuity suite (docs/definitions.md §10): shape, ambiguity profile,
determinism, FESTA variants, drawn scenes and answer parsing. No model is run."""

from __future__ import annotations

import io
import re
from collections import Counter

import pytest

from flipgate import FlipgateError
from flipgate.continuity.sweeps import SWEEPS, SweepInput, distances, generate

#: comparison sweeps -> (gold while the primary is below the anchor, gold once above)
BELOW_ABOVE = {
    "numeric_comparison": ("smaller", "larger"),
    "described_positions": ("left", "right"),
    "spatial_location": ("left", "right"),
    "scale": ("smaller", "larger"),
    "temporal_order": ("before", "after"),
    "loudness": ("quieter", "louder"),
}
BINARY = tuple(BELOW_ABOVE)
COUNTING = ("counting_distractors", "counting_clutter")
IMAGE = ("spatial_location", "scale", "counting_clutter")
AUDIO = ("temporal_order", "loudness")
ALL = (*BINARY, *COUNTING)
N_SOURCES = 12  # enough for both integer and one-decimal numeric sources
D = [4, 3, 2, 1, 0, 0, 1, 2, 3, 4]


def by_source(inputs: list[SweepInput]) -> dict[str, list[SweepInput]]:
    out: dict[str, list[SweepInput]] = {}
    for x in inputs:
        out.setdefault(x.source, []).append(x)
    return out


@pytest.fixture(scope="module", params=ALL)
def sweep(request):
    name = request.param
    return name, generate(name, N_SOURCES, seed=7)


def test_registry():
    assert set(SWEEPS) == set(ALL)
    for name, spec in SWEEPS.items():
        assert spec.name == name and spec.question
    assert SWEEPS["numeric_comparison"].answers == ("larger", "smaller")
    assert SWEEPS["described_positions"].answers == ("left", "right")
    assert SWEEPS["counting_distractors"].answers == tuple(str(i) for i in range(13))
    assert {n for n, spec in SWEEPS.items() if spec.modality == "image"} == set(IMAGE)
    assert {n for n, spec in SWEEPS.items() if spec.modality == "audio"} == set(AUDIO)


def test_distances():
    assert distances(5, 5) == D
    assert distances(2, 3) == [1, 0, 0, 1, 2]
    for bad in ((1, 5), (5, 1), (0, 0)):
        with pytest.raises(FlipgateError, match="n_plus|n_minus"):
            distances(*bad)


def test_shape(sweep):
    name, inputs = sweep
    sources = by_source(inputs)
    assert list(sources) == [f"{name}/s{i:02d}" for i in range(N_SOURCES)]
    for xs in sources.values():
        assert [x.d for x in xs] == D
        assert [x.branch for x in xs] == ["I+"] * 5 + ["I-"] * 5
        assert [x.step for x in xs] == [1, 2, 3, 4, 5] * 2
        assert {x.sweep for x in xs} == {name}
        for x in xs:
            assert x.gold in SWEEPS[name].answers
            assert x.prompt.rstrip().endswith(
                (
                    "larger or smaller.",
                    "left or right.",
                    "number.",
                    "before or after.",
                    "louder or quieter.",
                )
            )
            for p in (x.prompt, *x.equivalents, *(c for c, _ in x.complements)):
                assert len(p.split()) < 60, p


def test_other_branch_lengths():
    for name in ALL:
        xs = generate(name, 2, seed=1, n_plus=3, n_minus=4)
        for src in by_source(xs).values():
            assert [x.d for x in src] == [2, 1, 0, 0, 1, 2, 3]
            assert [(x.branch, x.step) for x in src] == [("I+", 1), ("I+", 2), ("I+", 3)] + [
                ("I-", j) for j in range(1, 5)
            ]


def test_gold_across_transition(sweep):
    name, inputs = sweep
    for xs in by_source(inputs).values():
        golds = [x.gold for x in xs]
        if name in BINARY:
            below, above = BELOW_ABOVE[name]
            assert golds == [below] * 5 + [above] * 5
        else:
            assert len(set(golds)) == 1
            assert golds[0] == str(xs[0].meta["target_count"])
            assert 2 <= xs[0].meta["target_count"] <= 5


def test_ambiguity_peaks_at_d0(sweep):
    name, inputs = sweep
    for xs in by_source(inputs).values():
        for branch in ("I+", "I-"):
            side = sorted((x for x in xs if x.branch == branch), key=lambda x: x.d)
            if name in BINARY:
                gaps = [x.meta["gap"] for x in side]
                assert gaps == sorted(gaps) and len(set(gaps)) == len(gaps)  # grows with d
                for x in side:
                    a, b = x.meta["a"], x.meta["b"]
                    assert a != b and a > 0 and b > 0
                    assert abs(a - b) == pytest.approx(x.meta["gap"])
                    assert (a < b) == (branch == "I+")
            else:
                clutter = [x.meta["distractors"] for x in side]
                assert clutter == [10, 9, 8, 7, 6]  # most distractors at d = 0
        if name in BINARY:  # one anchor per source
            assert len({x.meta["b"] for x in xs}) == 1


def test_determinism():
    for name in ALL:
        first = generate(name, 3, seed=11)
        again = generate(name, 3, seed=11)
        assert first == again
        assert [x.meta for x in first] == [x.meta for x in again]
        other = generate(name, 3, seed=12)
        shown = [(x.prompt, x.image, x.audio) for x in first]
        assert shown != [(x.prompt, x.image, x.audio) for x in other]
        # a source does not depend on how many sources are asked for
        one = generate(name, 1, seed=11)
        assert one == first[:10]
        assert [x.meta for x in one] == [x.meta for x in first[:10]]
        assert generate(name, 2, seed=11)[10:] == first[10:20]
        # sources differ from one another
        assert (
            len({(x.prompt, x.image, x.audio) for x in first if x.d == 4 and x.branch == "I+"}) == 3
        )


def test_sources_vary():
    xs = generate("numeric_comparison", 30, seed=3)
    assert {x.meta["decimals"] for x in xs} == {0, 1}
    assert len({x.meta["b"] for x in xs}) > 10
    ps = generate("described_positions", 30, seed=3)
    assert len({(x.meta["primary"], x.meta["anchor"]) for x in ps}) > 10
    assert len({x.meta["unit"] for x in ps}) > 1 and len({x.meta["surface"] for x in ps}) > 1
    cs = generate("counting_distractors", 30, seed=3)
    assert len({x.meta["target"] for x in cs}) > 5
    assert len({x.meta["target_count"] for x in cs}) > 1


# ---------------------------------------------------------------------------------------------
# drawn scenes (image sweeps)


def pixels(png: bytes):
    from PIL import Image

    img = Image.open(io.BytesIO(png))
    assert img.size == (320, 240) and img.format == "PNG"
    return img.convert("RGB")


@pytest.mark.parametrize("name", IMAGE)
def test_image_sweeps_draw_every_input(name):
    xs = generate(name, 3, seed=5)
    assert all(x.image is not None for x in xs)
    assert len({x.image for x in xs}) == len(xs)  # every step is a new scene
    for x in xs:
        pixels(x.image)
    assert all(generate(n, 1, seed=5)[0].image is None for n in ALL if n not in IMAGE)


def test_spatial_and_scale_scenes_follow_the_sweep():
    from flipgate.items.shapes import COLOURS

    for x in generate("spatial_location", 4, seed=5):
        colour = COLOURS[x.meta["primary"].split()[0]]
        img = pixels(x.image)
        row = [img.getpixel((px, y)) for px in range(320) for y in (94, 146)]
        assert colour in row  # the primary is drawn on its row ...
        cx = x.meta["a"]
        assert colour in [img.getpixel((cx, y)) for y in (94, 146)]  # ... at a
        for p, gold in x.complements:  # the anchor asked about relative to the primary
            assert f"is the {x.meta['anchor']}" in p.lower() and gold != x.gold
    for x in generate("scale", 4, seed=5):
        assert x.gold == comparison_gold("scale", x.meta["a"], x.meta["b"])
        assert abs(x.meta["a"] - x.meta["b"]) == x.meta["gap"]


def test_clutter_scenes_place_targets_without_overlap():
    import random

    from flipgate.continuity.scenes import scattered

    shapes = scattered(random.Random(0), [("circle", "red")] * 16, 30)
    for i, a in enumerate(shapes):
        for b in shapes[i + 1 :]:
            assert max(abs(a.cx - b.cx), abs(a.cy - b.cy)) >= 30
    for x in generate("counting_clutter", 3, seed=5):
        assert x.complements == () and len(x.equivalents) == 2
        assert x.gold == str(x.meta["target_count"])
        t = x.meta["target"]
        assert all(f"{t['c']} {t['n']}s" in p for p in (x.prompt, *x.equivalents))


# ---------------------------------------------------------------------------------------------
# synthesised clips (audio sweeps)


def clip(data: bytes):
    from flipgate.backends.hf import decode_wav

    samples, rate = decode_wav(data)
    assert rate == 16_000 and len(samples) == 4 * 16_000
    return samples


def rms_db(samples, start_s: float, end_s: float) -> float:
    import numpy as np

    part = samples[int(start_s * 16_000) : int(end_s * 16_000)]
    return float(20 * np.log10(np.sqrt(np.mean(part**2))))


@pytest.mark.parametrize("name", AUDIO)
def test_audio_sweeps_synthesise_every_input(name):
    xs = generate(name, 3, seed=5)
    assert all(x.audio is not None and x.image is None for x in xs)
    assert len({x.audio for x in xs}) == len(xs)
    assert all(generate(n, 1, seed=5)[0].audio is None for n in ALL if n not in AUDIO)


def test_loudness_clips_carry_the_planted_level_difference():
    for x in generate("loudness", 4, seed=5):
        samples = clip(x.audio)
        measured = rms_db(samples, 0.85, 1.25) - rms_db(samples, 2.45, 2.85)
        assert measured == pytest.approx(x.meta["a"] - x.meta["b"], abs=0.3)
        assert x.gold == comparison_gold("loudness", x.meta["a"], x.meta["b"])


def test_temporal_clips_start_where_the_sweep_says():
    import numpy as np

    for x in generate("temporal_order", 4, seed=5):
        samples = clip(x.audio)
        first = int(np.argmax(np.abs(samples) > 0.15)) / 16_000  # the earlier onset, faded in
        assert first == pytest.approx(min(x.meta["a"], x.meta["b"]) / 1000, abs=0.02)
        for p, gold in x.complements:  # the anchor asked about relative to the primary
            assert re.search(rf"(does|is) the {x.meta['anchor']}", p.lower()), p
            assert gold != x.gold


# ---------------------------------------------------------------------------------------------
# FESTA variants

NUMBER = re.compile(r"\d+(?:\.\d+)?")


def numbers_in_order(text: str) -> list[float]:
    seen: list[float] = []
    for n in map(float, NUMBER.findall(text)):
        if n not in seen:
            seen.append(n)
    return seen


def comparison_gold(name: str, a: float, b: float) -> str:
    below, above = BELOW_ABOVE[name]
    return below if a < b else above


def test_numeric_variants():
    name = "numeric_comparison"
    for x in generate(name, N_SOURCES, seed=7):
        a, b = float(x.meta["a"]), float(x.meta["b"])
        assert x.gold == comparison_gold(name, a, b)
        assert numbers_in_order(x.prompt) == [a, b]
        assert len(x.equivalents) == 2 and len(x.complements) == 2
        assert len({x.prompt, *x.equivalents}) == 3
        for p in x.equivalents:  # same operand order, hence the same gold
            assert numbers_in_order(p) == [a, b]
        for p, gold in x.complements:  # operands swapped, the opposite gold
            assert numbers_in_order(p) == [b, a]
            assert gold == comparison_gold(name, b, a) != x.gold
        if x.meta["decimals"]:
            assert re.fullmatch(r"\d+\.\d", NUMBER.findall(x.prompt)[0])


def position_roles(text: str, meta: dict) -> tuple[str, str]:
    """(object asked about, reference object) of a described-positions prompt, after checking
    that the prompt states both positions as in meta."""
    unit = meta["unit"]
    for role, value in (("primary", meta["a"]), ("anchor", meta["b"])):
        assert re.search(rf"\b[Tt]he {meta[role]} is (?:at )?{value} {unit}\b", text), text
    subject = re.search(r"\b[Ii]s the (\w+) (?:to the |on the )?left or", text)
    reference = re.search(r"(?:right of the|Relative to the) (\w+)", text)
    assert subject and reference, text
    return subject.group(1), reference.group(1)


def test_position_variants():
    name = "described_positions"
    for x in generate(name, N_SOURCES, seed=7):
        m = x.meta
        assert x.gold == comparison_gold(name, m["a"], m["b"])
        assert position_roles(x.prompt, m) == (m["primary"], m["anchor"])
        assert len(x.equivalents) == 2 and len(x.complements) == 2
        assert len({x.prompt, *x.equivalents}) == 3
        for p in x.equivalents:
            assert position_roles(p, m) == (m["primary"], m["anchor"])
        for p, gold in x.complements:  # the anchor asked about relative to the primary
            assert position_roles(p, m) == (m["anchor"], m["primary"])
            assert gold == comparison_gold(name, m["b"], m["a"]) != x.gold


LIST = re.compile(r"^Here is a list: (.*)\. (How many times does the word '(\w+)' appear\?.*)$")


def test_counting_lists():
    for x in generate("counting_distractors", N_SOURCES, seed=7, n_equivalent=3):
        m = x.meta
        match = LIST.match(x.prompt)
        assert match, x.prompt
        words = match.group(1).split(", ")
        assert match.group(3) == m["target"]
        assert words == list(m["words"])
        counts = Counter(words)
        assert counts[m["target"]] == m["target_count"] == int(x.gold)
        assert len(words) - m["target_count"] == m["distractors"]
        assert x.complements == ()
        assert len(x.equivalents) == 3
        assert len({x.prompt, *x.equivalents}) == 4
        for p in x.equivalents:  # reshuffled: the same multiset, the same question
            eq = LIST.match(p)
            assert eq and eq.group(2) == match.group(2)
            assert Counter(eq.group(1).split(", ")) == counts
    # targets land in different positions across inputs
    xs = generate("counting_distractors", 1, seed=7)
    firsts = {next(i for i, w in enumerate(x.meta["words"]) if w == x.meta["target"]) for x in xs}
    assert len(firsts) > 1


def test_variant_counts():
    xs = generate("numeric_comparison", 2, seed=0, n_equivalent=0, n_complementary=4)
    assert all(x.equivalents == () and len(x.complements) == 4 for x in xs)
    xs = generate("described_positions", 2, seed=0, n_equivalent=3, n_complementary=0)
    assert all(len(x.equivalents) == 3 and x.complements == () for x in xs)
    with pytest.raises(FlipgateError, match="n_equivalent"):
        generate("described_positions", 1, seed=0, n_equivalent=9)
    with pytest.raises(FlipgateError, match="n_complementary"):
        generate("numeric_comparison", 1, seed=0, n_complementary=-1)


def test_bad_arguments():
    with pytest.raises(FlipgateError) as err:
        generate("numeric_comparisons", 1, seed=0)
    assert "numeric_comparisons" in str(err.value)
    assert all(name in str(err.value) for name in ALL)
    with pytest.raises(FlipgateError, match="n_plus"):
        generate("counting_distractors", 1, seed=0, n_plus=1)
    with pytest.raises(FlipgateError, match="n_minus"):
        generate("numeric_comparison", 1, seed=0, n_minus=0)
    with pytest.raises(FlipgateError, match="n_sources"):
        generate("numeric_comparison", -1, seed=0)
    assert generate("numeric_comparison", 0, seed=0) == []


def test_inputs_hashable_and_meta_not_compared():
    x = generate("numeric_comparison", 1, seed=0)[0]
    assert hash(x) == hash(SweepInput(**{**x.__dict__, "meta": {}}))
    assert x == SweepInput(**{**x.__dict__, "meta": {"other": 1}})


# ---------------------------------------------------------------------------------------------
# parsing


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("numeric_comparison", "Larger.", "larger"),
        ("numeric_comparison", " smaller", "smaller"),
        ("numeric_comparison", "The answer is smaller", "smaller"),
        ("numeric_comparison", "**Larger**", "larger"),
        ("numeric_comparison", "SMALLER!", "smaller"),
        ("numeric_comparison", "34 is smaller than 50, not larger", None),
        ("numeric_comparison", "larger or smaller", None),  # an echo of the options
        ("numeric_comparison", "Smaller. It is smaller.", "smaller"),
        ("numeric_comparison", "It is largest", None),
        ("numeric_comparison", "Bigger", None),
        ("numeric_comparison", "", None),
        ("numeric_comparison", "I cannot tell.", None),
        ("described_positions", "Left", "left"),
        ("described_positions", "**left**", "left"),
        ("described_positions", "The cup is to the right", "right"),
        ("described_positions", "right, not left", None),
        ("described_positions", "Leftover", None),
        ("described_positions", "It is on the shelf", None),
        ("described_positions", "brightness", None),
        ("counting_distractors", "3", "3"),
        ("counting_distractors", "Three.", "3"),
        ("counting_distractors", "The word appears 4 times", "4"),
        ("counting_distractors", "It appears twice.", "2"),
        ("counting_distractors", "twelve", "12"),
        ("counting_distractors", "zero", "0"),
        ("counting_distractors", "05", "5"),
        ("counting_distractors", "five or 6", "5"),
        ("counting_distractors", "**2**", "2"),
        ("counting_distractors", "13", "13"),
        ("counting_distractors", "The word 'apple'", None),
        ("counting_distractors", "someone", None),
        ("counting_distractors", "", None),
    ],
)
def test_parse(name, text, expected):
    assert SWEEPS[name].parse(text) == expected
