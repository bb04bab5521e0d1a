"""Shared-prefix batching: the plan (pure) and the transformers engine's answers against the
reference path (every prompt computed whole) on a tiny random Llama."""

import warnings
from dataclasses import replace

import pytest
from support.tiny_models import tiny_hf_config

from flipgate.backends.base import Request
from flipgate.backends.hf import HFBackend
from flipgate.backends.prefix import (
    MIN_SAVED,
    common_prefix,
    decode_batches,
    length_batches,
    prefix_tree,
)
from flipgate.facets import get_facet
from flipgate.grammar import orderings
from flipgate.items import Item


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([], [1]) == 0 and common_prefix([7, 8], [7, 8]) == 2


def test_tree_of_two_items_orderings_and_control_replicates():
    """A shared instruction, two items' orderings and three identical control replicates: the
    instruction runs once, each question once on top of it, each ordering's options alone; the
    replicates share everything (nothing of their own)."""
    instruction = list(range(1000, 1030))
    stem_a, stem_b = instruction + list(range(100, 130)), instruction + list(range(200, 240))
    perms = [stem_a + [1, 2, 3], stem_a + [3, 1, 2], stem_a + [2, 3, 1]]
    seqs = perms + [stem_b + [5, 6]] * 3
    root = prefix_tree(seqs, list(range(6)))
    assert (root.start, root.end, root.leaves) == (0, 30, ())
    items = sorted(root.children, key=lambda n: min(n.rows))
    assert [(sorted(n.rows), n.start, n.end) for n in items] == [
        ([0, 1, 2], 30, 60),
        ([3, 4, 5], 30, 72),
    ]
    assert sorted(items[0].leaves) == [0, 1, 2] and not items[0].children
    assert sorted(items[1].leaves) == [3, 4, 5]  # replicates: len(seq) == end, nothing left
    assert root.computed_tokens(seqs) == 30 + 30 + 3 * 3 + 42


def test_a_run_that_saves_too_little_is_split_deeper_not_run():
    """Three items, two of whose questions start with the same two tokens: those two tokens
    save too little for a pass of their own, so each item still becomes its own node."""
    instruction = list(range(1000, 1030))
    item = [instruction + [7, 8] + list(range(100 * i, 100 * i + 30)) for i in (1, 2)]
    item.append(instruction + [9] + list(range(300, 331)))
    seqs = [q + [k, 1] for q in item for k in range(4)]
    root = prefix_tree(seqs, list(range(12)))
    assert root.end == 30 and not root.leaves
    assert sorted(sorted(n.rows) for n in root.children) == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [8, 9, 10, 11],
    ]
    assert {n.end for n in root.children} == {62}
    # a short common prefix is not run on its own; unrelated prompts are all leaves
    flat = prefix_tree([[1, 2, 3], [1, 2, 4], [9]], [0, 1, 2])
    assert (flat.end, flat.children, sorted(flat.leaves)) == (0, (), [0, 1, 2])


def test_tree_covers_every_row_once_at_any_depth():
    stem = list(range(50, 50 + MIN_SAVED))
    seqs = [stem + [i % 4] * (20 + i) for i in range(9)] + [[7] * 4, stem, stem]

    def rows(node):
        return list(node.leaves) + [r for c in node.children for r in rows(c)]

    root = prefix_tree(seqs, list(range(len(seqs))))
    assert sorted(rows(root)) == list(range(len(seqs)))
    assert root.computed_tokens(seqs) < sum(map(len, seqs))


def test_decode_batches_respect_size_and_budget_and_cut_between_items():
    instruction = list(range(1000, 1010))
    items = [instruction + list(range(2000 + 100 * i, 2000 + 100 * i + 40)) for i in range(3)]
    ids = [q + [7 + k, 8] for q in items for k in range(6)]
    budgets = [4] * 18
    batches = decode_batches(ids, budgets, size=8)
    assert sorted(r for b in batches for r in b) == list(range(18))
    assert [sorted(b) for b in batches] == [list(range(6)), list(range(6, 12)), list(range(12, 18))]
    mixed = decode_batches(ids[:4], [4, 6, 4, 6], size=8)
    assert all(len({[4, 6, 4, 6][r] for r in b}) == 1 for b in mixed) and len(mixed) == 2
    whole = length_batches([[1] * 5, [1] * 2, [1] * 9], [4, 4, 4], 2)
    assert whole == [[1, 0], [2]]


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
    assert shared.settings["prefix_sharing"] == "prefix-tree"
    assert "prefix_sharing" not in reference.settings
    assert "prefix-tree" in shared.fingerprint["engine"]
    reqs = mixed_requests()
    ids = [shared.tokenizer(shared.render(r), add_special_tokens=False)["input_ids"] for r in reqs]
    seqs = [row[:-1] for row in ids]
    tree = prefix_tree(seqs, list(range(len(seqs))))
    assert tree.computed_tokens(seqs) < sum(map(len, seqs)) / 2
    computed = []
    run_tree = shared._complete_tree
    shared._complete_tree = lambda batch, ids: computed.extend(batch) or run_tree(batch, ids)
    outs = shared.complete(reqs)
    # equal prompts (the control replicates, and the ordering equal to the canonical one) run once
    assert len(computed) == len({tuple(row) for row in ids}) < len(reqs)
    for a, b in zip(outs, reference.complete(reqs)):
        assert a.text == b.text and a.tokens_in == b.tokens_in and a.tokens_out == b.tokens_out
        assert a.label_logprobs.keys() == b.label_logprobs.keys()
        for label, value in a.label_logprobs.items():
            assert value == pytest.approx(b.label_logprobs[label], abs=1e-4)


@pytest.mark.parametrize("readouts", [["regex", "letter_logprob"], ["letter_logprob"]])
def test_a_prefix_shared_call_emits_no_deprecation_warning(tiny_model_dir, tmp_path, readouts):
    """Every path that hands the model a key/value cache (the tree's forward passes, generate,
    the forward-only readout, the cloze scoring) passes it as ``cache``: transformers 5.24 warns
    (FutureWarning) for each call that still says ``past_key_values``."""
    cfg = tiny_hf_config(
        tiny_model_dir, tmp_path, batch_size=8, max_new_tokens=3, readouts=readouts
    )
    backend = HFBackend(cfg)
    reqs = mixed_requests()
    reqs[0] = replace(reqs[0], continuations=("a car", "an apple", "a rock", "a chair"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", FutureWarning)
        outs = backend.complete(reqs)
    assert outs[0].continuation_logprobs.keys() == {"A", "B", "C", "D"}
    assert not [w for w in caught if "past_key_values" in str(w.message)]


def test_a_greedy_answer_of_an_earlier_call_is_not_computed_again(tiny_model_dir, tmp_path):
    """A facet's call, then its control's: the control's replicates are the facet's canonical
    prompt, so the second call computes nothing and returns the facet's answer with latency 0
    (its compute was counted once, in the first call). Sampling computes every call."""
    cfg = tiny_hf_config(tiny_model_dir, tmp_path, batch_size=8, max_new_tokens=3)
    backend = HFBackend(cfg)
    facet = get_facet("option_order")
    facet_reqs = [facet.render(ITEMS[0], p) for p in orderings(ITEMS[0].item_id, 4, 6)]
    control = [facet.render(ITEMS[0], (0, 1, 2, 3), seed=s) for s in range(3)]
    other = Request((("user", "Say hello."),), "Answer:", ("A", "B"))
    computed: list = []
    run_tree = backend._complete_tree
    backend._complete_tree = lambda batch, ids: computed.extend(batch) or run_tree(batch, ids)
    first = backend.complete(facet_reqs)
    assert len(computed) == 6 and first[0].latency_s > 0
    computed.clear()
    again = backend.complete([*control, other])
    assert computed == [other]  # only the new prompt ran
    for out in again[:3]:
        assert (out.text, out.label_logprobs, out.tokens_in) == (
            first[0].text,
            first[0].label_logprobs,
            first[0].tokens_in,
        )
        assert out.latency_s == 0.0
    computed.clear()
    replayed = backend.complete(control)  # a call answered wholly from earlier calls
    assert computed == [] and [o.text for o in replayed] == [first[0].text] * 3
    sampling = HFBackend({**cfg, "decoding": {"temperature": 1.0}})
    runs: list = []
    run_batch = sampling._complete_tree
    sampling._complete_tree = lambda batch, ids: runs.extend(batch) or run_batch(batch, ids)
    sampling.complete(control[:1])
    sampling.complete(control[:1])
    assert len(runs) == 2


def test_kept_answers_are_bounded(tiny_model_dir, tmp_path, monkeypatch):
    backend = HFBackend(tiny_hf_config(tiny_model_dir, tmp_path, batch_size=8, max_new_tokens=2))
    monkeypatch.setattr(HFBackend, "ANSWERED_MAX", 3)
    facet = get_facet("option_order")
    backend.complete([facet.render(ITEMS[0], p) for p in orderings(ITEMS[0].item_id, 4, 6)])
    assert len(backend._answered) == 3
