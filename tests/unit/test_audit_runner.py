"""The runner with a scripted backend: cache, control bypass, map-back, no lost results."""

import pandas as pd
import pytest
from support.auditors import make_auditor
from support.scripted import ScriptedBackend

from flipgate import FlipgateError
from flipgate.items import DatasetSpec
from flipgate.order.measure import order_cells
from flipgate.session import record_calls
from flipgate.summary import control_summary, facet_summary


def test_position_bias_gives_full_flip_and_content_bias_none(tmp_path):
    biased = make_auditor(tmp_path, ScriptedBackend())
    s, _ = facet_summary(
        order_cells(biased).trials("scripted", "arc_challenge", "option_order"), "regex"
    )
    assert (
        s.metrics["flip_rate"].estimate == 1.0
        and s.metrics["parse_rate"].estimate == 1.0
        and s.k == 6
    )

    def always_gold(req):  # a perfect model: picks the slot whose text is the gold option's
        from flipgate.items import load_items

        items = {it.item_id: it for it in load_items(DatasetSpec("arc_challenge"), 5)}
        it = items[req.key[1]]
        gold_text = it.options[it.gold]
        for line in req.messages[0][1].splitlines():
            if line[2:].strip() == gold_text.strip():
                return line[0]
        raise AssertionError("gold option not rendered")

    perfect = make_auditor(tmp_path / "p", ScriptedBackend(rule=always_gold))
    s, _ = facet_summary(
        order_cells(perfect).trials("scripted", "arc_challenge", "option_order"), "regex"
    )
    assert (
        s.metrics["flip_rate"].estimate == 0.0
        and s.metrics["accuracy"].estimate == 1.0
        and s.metrics["osi"].estimate == 1.0
    )


def test_warm_cache_makes_no_calls(tmp_path):
    backend = ScriptedBackend()
    first = make_auditor(tmp_path, backend)
    order_cells(first).trials("scripted", "arc_challenge", "option_order")
    order_cells(first).trials("scripted", "arc_challenge", "same_ordering:option_order")
    assert backend.calls == 30 + 30  # K canonical calls per item for the control
    rerun = make_auditor(tmp_path, backend, run_id="r2")
    df = order_cells(rerun).trials("scripted", "arc_challenge", "option_order")
    control = order_cells(rerun).trials("scripted", "arc_challenge", "same_ordering:option_order")
    assert backend.calls == 60 and df["from_cache"].all() and control["from_cache"].all()


def test_no_cache_option(tmp_path):
    backend = ScriptedBackend()
    auditor = make_auditor(tmp_path, backend, cache=False)
    order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    assert backend.calls == 60


def test_delta_order_from_trials(tmp_path):
    auditor = make_auditor(tmp_path, ScriptedBackend())
    perm = order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    same = order_cells(auditor).trials("scripted", "arc_challenge", "same_ordering:option_order")
    s, _ = control_summary(perm, same, "regex", n_boot=200)
    assert s.metrics["flip_rate_same"].estimate == 0.0
    assert (
        s.metrics["delta_order"].estimate == 1.0
        and s.metrics["ordering_excess_share"].estimate == 1.0
    )


def test_unparsable_answers_counted_not_guessed(tmp_path):
    auditor = make_auditor(tmp_path, ScriptedBackend(rule=lambda r: None if r.key[3] % 2 else "A"))
    s, _ = facet_summary(
        order_cells(auditor).trials("scripted", "arc_challenge", "option_order"), "regex"
    )
    assert s.metrics["parse_rate"].estimate == 0.5


def test_backend_error_keeps_finished_batches(tmp_path):
    class Flaky(ScriptedBackend):
        def complete(self, requests):
            if self.calls >= 8:
                raise ConnectionError("HTTP 503 from provider")
            return super().complete(requests)

    flaky = Flaky()
    auditor = make_auditor(tmp_path, flaky)
    with pytest.raises(FlipgateError, match=r"model 'scripted': backend call failed .*HTTP 503"):
        order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    assert len(auditor.cache) == 8  # two batches of 4 were kept
    healthy = ScriptedBackend()
    resumed = make_auditor(tmp_path, healthy, run_id="r2")
    order_cells(resumed).trials("scripted", "arc_challenge", "option_order")
    assert healthy.calls == 30 - 8


def test_trials_are_recorded_with_identity(tmp_path):
    auditor = make_auditor(tmp_path, ScriptedBackend())
    order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    df = auditor.store.trials(model_id="scripted")
    assert len(df) == 30 and set(df["condition"]) == set(range(6))
    row = df.iloc[0]
    assert len(row.prompt_sha256) == 64 and row.readouts["regex"] == "A"
    assert row.mapped["regex"] == row.permutation[0]
    assert (tmp_path / "manifests").glob("option_order__arc_challenge__k6__s42.json")


def test_evidence_facet_scores_short_answers(tmp_path):
    from flipgate.items import load_items

    golds = {it.item_id: it.answer for it in load_items(DatasetSpec("synthetic_multihop"), 4)}
    cfg_facets = {"evidence_chunk_order": [DatasetSpec("synthetic_multihop")]}

    def auditor_for(rule):
        a = make_auditor(tmp_path / str(id(rule)), ScriptedBackend(rule=rule))
        a.config.facets, a.config.items_per_dataset = cfg_facets, 4
        return a

    right = auditor_for(lambda req: golds[req.key[1]])
    s, _ = facet_summary(
        order_cells(right).trials("scripted", "synthetic_multihop", "evidence_chunk_order"), "regex"
    )
    assert (
        s.metrics["accuracy"].estimate == 1.0
        and s.metrics["flip_rate"].estimate == 0.0
        and s.metrics["osi"].estimate == 1.0
    )
    # answering with whatever passage comes first: the content answer follows the ordering
    first_word = lambda req: req.messages[0][1].split("[1] ")[1].split()[0]  # noqa: E731
    s, _ = facet_summary(
        order_cells(auditor_for(first_word)).trials(
            "scripted", "synthetic_multihop", "evidence_chunk_order"
        ),
        "regex",
    )
    assert s.metrics["flip_rate"].estimate == 1.0 and s.metrics["accuracy"].estimate == 0.0


def test_a_cell_is_measured_once_per_run_and_read_back_by_every_reader(tmp_path, monkeypatch):
    """Every reader of a cell in one run (its test, a control, ODI, a regression cell) gets the
    trials the first one measured; without a response cache a cell is not paid twice either."""
    backend = ScriptedBackend()
    auditor = make_auditor(tmp_path, backend, cache=False)
    draws = []
    original = auditor.plans._draw_items
    monkeypatch.setattr(auditor.plans, "_draw_items", lambda *a: draws.append(a) or original(*a))
    control = "same_ordering:option_order"
    first = order_cells(auditor).measured_trials("scripted", "arc_challenge", control)
    calls = backend.calls
    assert calls == 5 * 6
    again = order_cells(auditor).measured_trials("scripted", "arc_challenge", control)
    pd.testing.assert_frame_equal(
        again[["item_id", "condition", "sample", "raw_output"]],
        first[["item_id", "condition", "sample", "raw_output"]],
    )
    assert backend.calls == calls  # read back, not re-measured
    perm = order_cells(auditor).measured_trials("scripted", "arc_challenge", "option_order")
    order_cells(auditor).measured_trials("scripted", "arc_challenge", "option_order")
    assert backend.calls == calls + len(perm)  # the facet cell, once, without a cache
    assert draws == [("arc_challenge", "option_order")]  # items drawn once per process
    s, _ = control_summary(perm, again, "regex", n_boot=200)
    assert s.metrics["delta_order"].estimate == 1.0


def test_an_incomplete_stored_cell_is_measured_again(tmp_path):
    backend = ScriptedBackend()
    auditor = make_auditor(tmp_path, backend, cache=False)
    order_cells(auditor).measured_trials("scripted", "arc_challenge", "option_order")
    with auditor.store.conn:  # a cell whose write was cut short
        auditor.store.conn.execute(
            "DELETE FROM trials WHERE item_id = (SELECT MIN(item_id) FROM trials)"
        )
    calls = backend.calls
    again = order_cells(auditor).measured_trials("scripted", "arc_challenge", "option_order")
    assert backend.calls == 2 * calls and len(again) == calls


def test_control_replicates_are_replayed_by_seed_and_fresh_controls_measure_again(tmp_path):
    """docs/definitions.md §3.6: each replicate has its own seed and cache key (greedy decoding
    too), a rerun replays the floor with no model call, --fresh-controls draws new seeds."""
    control = "same_ordering:option_order"
    backend = ScriptedBackend()
    first = make_auditor(tmp_path, backend, run_id="r1")
    cold = order_cells(first).measured_trials("scripted", "arc_challenge", control)
    assert backend.calls == 5 * 6 and not cold["from_cache"].any()
    _, requests = first.plans.cell_requests("arc_challenge", control)
    keys = first.cache_keys("scripted", requests, by_seed=True)
    assert len(set(keys)) == len(keys)  # six replicates of one prompt, six keys
    assert len(set(first.cache_keys("scripted", requests))) == 5  # without seeds: one per item
    record_calls(first, "gw0")
    assert first.store.model_calls() == {"scripted": 30}
    rerun = make_auditor(tmp_path, backend, run_id="r2")
    warm = order_cells(rerun).measured_trials("scripted", "arc_challenge", control)
    assert backend.calls == 5 * 6 and warm["from_cache"].all()  # replayed, no model call
    assert list(warm["raw_output"]) == list(cold["raw_output"])
    record_calls(rerun, "gw0")
    assert rerun.store.answered() == {"scripted": (0, 30)}
    assert rerun.store.model_calls() == {"scripted": 0}  # counted, and zero
    fresh = make_auditor(tmp_path, backend, run_id="r3", control_salt="r3")
    _, fresh_requests = fresh.plans.cell_requests("arc_challenge", control)
    assert {r.seed for r in fresh_requests}.isdisjoint({r.seed for r in requests})
    again = order_cells(fresh).measured_trials("scripted", "arc_challenge", control)
    assert backend.calls == 2 * 5 * 6 and not again["from_cache"].any()
