"""Opt-in demoted facets: few-shot exemplar, dialog-turn and tool-description order."""

import pytest

from flipgate.facets import FACETS, get_facet
from flipgate.grammar import orderings
from flipgate.items import DatasetSpec, load_items

CASES = [
    ("few_shot_order", "basic_arithmetic_few_shot"),
    ("dialog_turn_order", "synthetic_dialog"),
    ("tool_description_order", "synthetic_tools"),
]


@pytest.mark.parametrize("facet_name,dataset", CASES)
def test_units_move_and_answers_map_back(facet_name, dataset):
    facet = get_facet(facet_name)
    assert facet.opt_in and facet.readouts == ("regex",)
    item = load_items(DatasetSpec(dataset), 3, keep=facet.keep)[0]
    units = item.meta[facet.unit_key]
    for perm in orderings(item.item_id, len(units), 6):
        text = "\n".join(content for _, content in facet.render(item, perm).messages)
        marker = [
            str(units[src][0] if isinstance(units[src], tuple) else units[src]) for src in perm
        ]
        positions = [text.index(m) for m in marker]
        assert positions == sorted(positions)
        assert facet.is_correct(facet.map_back(f" {item.answer} ", item, perm), item)


def test_dialog_turns_are_separate_messages():
    facet = get_facet("dialog_turn_order")
    item = load_items(DatasetSpec("synthetic_dialog"), 1, keep=facet.keep)[0]
    messages = facet.render(item, tuple(range(facet.n_units(item)))).messages
    roles = [role for role, _ in messages]
    assert roles == ["user", "assistant"] * facet.n_units(item) + ["user"]
    assert item.answer in "".join(
        text for _, text in messages[:-1]
    )  # the needed note was told earlier


def test_few_shot_exemplars_exclude_the_item_and_are_seeded():
    facet = get_facet("few_shot_order")
    first = load_items(DatasetSpec("basic_arithmetic_few_shot"), 5, keep=facet.keep)
    again = load_items(DatasetSpec("basic_arithmetic_few_shot"), 5, keep=facet.keep)
    assert [i.meta["exemplars"] for i in first] == [i.meta["exemplars"] for i in again]
    assert all(
        len(i.meta["exemplars"]) == 4 and i.question not in [q for q, _ in i.meta["exemplars"]]
        for i in first
    )


def test_tool_queries_name_a_listed_tool():
    facet = get_facet("tool_description_order")
    for item in load_items(DatasetSpec("synthetic_tools"), 20, keep=facet.keep):
        assert item.answer in [name for name, _ in item.meta["tools"]]


def test_demoted_facets_are_not_in_the_default_plan():
    from support.paths import REPO

    from flipgate.config import load_models

    cfg = load_models(REPO / "models.yaml")
    assert not {f for f in cfg.facets if getattr(FACETS[f], "opt_in", False)}
