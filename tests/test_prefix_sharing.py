"""Shared-prefix batching: the plan (pure) and the transformers engine's answers against the
reference path (every prompt computed whole) on a tiny random Llama."""

import pytest

from conftest import tiny_hf_config
from flipgate.backends.base import Request
from flipgate.backends.hf import HFBackend
from flipgate.backends.prefix import MIN_SHARED, common_prefix, plan_batches
from flipgate.facets import get_facet
from flipgate.grammar import orderings
from flipgate.items import Item


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([], [1]) == 0 and common_prefix([7, 8], [7, 8]) == 2


def test_orderings_of_two_items_form_one_group_each_and_controls_share_all_but_one_token():
    stem_a, stem_b = list(range(100, 130)), list(range(200, 240))
    perms = [stem_a + [1, 2, 3], stem_a + [3, 1, 2], stem_a + [2, 3, 1]]
    replicates = [stem_b + [5, 6]] * 3
    ids = perms + replicates
    batches = plan_batches(ids, [4] * 6, batch_size=8)
    groups = sorted((g for b in batches for g in b), key=lambda g: min(g.rows))
    assert [(sorted(g.rows), g.shared) for g in groups] == [([0, 1, 2], 30), ([3, 4, 5], 41)]
    assert sum(len(b) for b in batches) == 2  # one batch holds both groups


def test_batches_respect_size_and_budget_and_cover_every_prompt_once():
    stem = list(range(50, 50 + 2 * MIN_SHARED))
    ids = [stem + [i, i + 1] for i in range(10)] + [[9] * 5, [8] * 3]
    budgets = [4] * 10 + [6, 6]
    batches = plan_batches(ids, budgets, batch_size=4)
    rows = [r for b in batches for g in b for r in g.rows]
    assert sorted(rows) == list(range(12))
    for b in batches:
        members = [r for g in b for r in g.rows]
        assert len(members) <= 4 and len({budgets[r] for r in members}) == 1
    # a prefix shorter than MIN_SHARED is not shared; without sharing every prompt stands alone
    assert all(g.shared == 0 for b in plan_batches([[1, 2, 3]] * 3, [4] * 3, 8) for g in b)
    assert all(
        len(g.rows) == 1 and g.shared == 0
        for b in plan_batches(ids, budgets, 4, share=False)
        for g in b
    )


def test_the_dynamic_program_splits_at_the_item_boundary():
    """Two items' orderings, 6 each, with batch_size 12: grouping all twelve saves only the
    common instruction; one group per item saves each question as well."""
    instruction = list(range(1000, 1010))
    items = [instruction + list(range(2000 + 100 * i, 2000 + 100 * i + 40)) for i in range(2)]
    ids = [q + [7 + (k % 3), 8, 9 + k] for q in items for k in range(6)]
    groups = [g for b in plan_batches(ids, [4] * 12, 12) for g in b]
    assert sorted(sorted(g.rows) for g in groups) == [list(range(6)), list(range(6, 12))]
    assert {g.shared for g in groups} == {50}


ITEMS = [
    Item("t/1", "t", "Which is a fruit?", ("car", "apple", "rock", "chair"), 1),
    Item("t/2", "t", "Which animal can fly over the sea?", ("cow", "pig", "gull", "dog"), 2),
]


def mixed_requests() -> list[Request]:
    """Orderings of two items, three identical control replicates and a lone other prompt."""
    facet = get_facet("option_order")
    reqs = [facet.render(it, p) for it in ITEMS for p in orderings(it.item_id, 4, 6)]
    reqs += [facet.render(ITEMS[0], (0, 1, 2, 3), seed=s) for s in range(3)]
    reqs.append(Request((("user", "Say hello."),), "Answer:", ("A", "B")))
    return reqs


@pytest.mark.parametrize("readouts", [["regex", "letter_logprob"], ["letter_logprob"]])
def test_shared_prefix_answers_equal_the_reference_path(tiny_model_dir, tmp_path, readouts):
    cfg = tiny_hf_config(
        tiny_model_dir, tmp_path, batch_size=8, max_new_tokens=3, readouts=readouts
    )
    shared = HFBackend(cfg)
    reference = HFBackend({**cfg, "prefix_sharing": False})
    assert shared.settings["prefix_sharing"] is True and "prefix_sharing" not in reference.settings
    assert "shared-prefix" in shared.fingerprint["engine"]
    reqs = mixed_requests()
    ids = [shared.tokenizer(shared.render(r), add_special_tokens=False)["input_ids"] for r in reqs]
    assert any(g.shared for b in plan_batches(ids, [3] * len(ids), 8) for g in b)
    for a, b in zip(shared.complete(reqs), reference.complete(reqs)):
        assert a.text == b.text and a.tokens_in == b.tokens_in and a.tokens_out == b.tokens_out
        assert a.label_logprobs.keys() == b.label_logprobs.keys()
        for label, value in a.label_logprobs.items():
            assert value == pytest.approx(b.label_logprobs[label], abs=1e-4)
