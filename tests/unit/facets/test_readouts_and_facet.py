import pytest

from flipgate.backends.base import Output
from flipgate.facets import get_facet
from flipgate.grammar import orderings
from flipgate.items import Item
from flipgate.readouts import parse_answer_label, read_label

LABELS = ("A", "B", "C", "D")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Answer: B", "B"),
        ("Answer: (C)", "C"),
        ("Reasoning...\nAnswer: D", "D"),
        ("answer: a", "A"),
        ("Answer: B\nAnswer: C", "C"),
        ("B", "B"),
        ("(B).", "B"),
        ("Answer: E", None),
        ("I don't know", None),
        ("Answer: **A**", "A"),
        ("", None),
    ],
)
def test_parse_answer_label(text, expected):
    assert parse_answer_label(text, LABELS) == expected


def test_read_label_readouts():
    out = Output(" C.", {"A": -2.0, "B": -0.5, "C": -1.0, "D": -4.0})
    assert read_label("letter_logprob", out, LABELS, "Answer:") == "B"
    assert read_label("regex", out, LABELS, "Answer:") == "C"
    assert read_label("regex", Output(""), LABELS, "Answer:") is None


ITEM = Item("d/1", "d", "Which is a fruit?", ("car", "apple", "rock", "chair"), 1)


@pytest.mark.parametrize("perm", orderings("d/1", 4, 6))
def test_option_order_render_map_back_roundtrip(perm):
    facet = get_facet("option_order")
    req = facet.render(ITEM, perm)
    prompt = req.messages[0][1]
    # the gold content appears under the label at its slot, and maps back to the gold source index
    slot = perm.index(ITEM.gold)
    assert f"{LABELS[slot]}. apple" in prompt
    assert facet.map_back(LABELS[slot], ITEM, perm) == ITEM.gold
    assert facet.is_correct(facet.map_back(LABELS[slot], ITEM, perm), ITEM)
    assert facet.map_back(None, ITEM, perm) is None


def test_position_bias_flips_content():
    facet = get_facet("option_order")
    chosen = {facet.map_back("A", ITEM, p) for p in orderings("d/1", 4, 6)}
    assert len(chosen) > 1  # always answering "A" changes the chosen content
