"""The live progress display (flipgate/progress.py): its plan, its counts from the trials store,
trials/s and ETA, and what the controller prints."""

from __future__ import annotations

import io

import pytest
from support.auditors import make_auditor
from support.paths import write
from support.scripted import ScriptedBackend

from flipgate.items import DatasetSpec
from flipgate.metrics.sequential import SequentialSettings
from flipgate.order.measure import order_cells
from flipgate.progress import (
    LiveProgress,
    Rate,
    Snapshot,
    cell_plan,
    describe,
    read_snapshot,
    without_images,
)
from flipgate.store import TrialStore


def test_snapshot_counts_each_cell_up_to_its_plan_and_adds_calls_in_flight(tmp_path):
    auditor = make_auditor(tmp_path, ScriptedBackend())
    order_cells(auditor).measured_trials(
        "scripted", "arc_challenge", "option_order"
    )  # 5 items x K=6
    store = auditor.store
    store.add_planned(
        {
            ("scripted", "arc_challenge", "option_order"): 99,  # made exact (30) when measured
            ("scripted", "arc_challenge", "same_ordering:option_order"): 30,
            ("other", "mmlu", "option_order"): 12,
        }
    )
    store.set_live("gw1", "scripted", "same_ordering:option_order/arc_challenge", 8)
    store.set_live("gw0", "other", "option_order/mmlu", 20)  # more than planned: capped
    snap = read_snapshot(store.conn)
    assert snap.models == {"other": (12, 12), "scripted": (30 + 8, 60)}
    assert (snap.answered, snap.planned) == (50, 72)
    store.set_live("gw1", "scripted", "same_ordering:option_order/arc_challenge", None)
    assert read_snapshot(store.conn).models["scripted"] == (30, 60)


def test_a_call_notes_its_outputs_while_in_flight_and_clears_them_when_done(tmp_path):
    seen = []

    class Watched(ScriptedBackend):
        def complete(self, requests):
            seen.append(read_snapshot(auditor.store.conn).models.get("scripted"))
            return super().complete(requests)

    auditor = make_auditor(tmp_path, Watched())
    order_cells(auditor).measured_trials("scripted", "arc_challenge", "option_order")
    # batches of 4 over 30 trials: 0, 4, 8, ... returned before each batch, of 30 planned
    assert seen == [(a, 30) for a in range(0, 30, 4)]
    assert auditor.store.conn.execute("SELECT COUNT(*) FROM live").fetchone() == (0,)
    assert read_snapshot(auditor.store.conn).models["scripted"] == (30, 30)


def test_a_cell_the_model_cannot_take_plans_nothing(tmp_path):
    auditor = make_auditor(tmp_path, ScriptedBackend())  # takes no images
    shapes = DatasetSpec("synthetic_shapes")
    auditor.config.facets = {"image_set_order": [shapes]}
    auditor.config.controls = {"same_ordering": [("image_set_order", shapes)]}
    plan = cell_plan(auditor.config, None, "scripted", "same_ordering:image_set_order", shapes.name)
    auditor.store.add_planned(plan)
    assert read_snapshot(auditor.store.conn).models == {"scripted": (0, 2 * 5 * 6)}
    assert order_cells(auditor).unmeasurable("scripted", shapes.name, "image_set_order")
    assert read_snapshot(auditor.store.conn).models == {}  # nothing left to wait for


def test_image_cells_of_a_text_only_model_plan_nothing_from_the_start():
    plan = {
        ("text", "synthetic_shapes", "same_ordering:image_set_order"): 30,
        ("text", "synthetic_mixed", "mixed_modality_order"): 30,
        ("text", "mmlu", "option_order"): 30,
        ("text", "truthfulqa_mc", "T1/greedy"): 25,  # an envelope configuration
        ("vlm", "synthetic_shapes", "image_set_order"): 30,
    }
    kept = without_images(plan, {"text"})
    assert [n for n in kept.values()] == [0, 0, 30, 25, 30]


def test_rate_and_eta_from_planted_snapshots():
    rate = Rate(window=60)
    for t, answered in [(0, 0), (30, 60), (60, 120), (90, 150)]:
        rate.add(t, answered)
    assert rate.per_second() == (150 - 60) / (90 - 30)  # the last 60 s: 1.5 trials/s
    snap = Snapshot({"a": (100, 400), "b": (50, 200)})
    # 450 left at 1.5 trials/s: 300 s
    assert (
        describe(snap, 1.5) == "150/600 trials (25%), 1.5 trials/s, ETA 5:00 · a 100/400 · b 50/200"
    )
    assert describe(snap, None) == "150/600 trials (25%) · a 100/400 · b 50/200"
    assert describe(Snapshot({}), None) == "planning"


def test_lines_mode_prints_a_line_per_interval_and_the_final_state(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    store.add_planned({("m", "d", "option_order"): 10})
    out = io.StringIO()
    ticks = iter([0.0, 10.0, 20.0])  # seconds at each update
    progress = LiveProgress(
        store.path, out, "lines", interval=3600, mid_line=lambda: True, clock=lambda: next(ticks)
    )
    progress.update()  # the first line
    store.set_live("gw0", "m", "option_order/d", 4)
    progress.update()  # within the interval: nothing
    store.set_live("gw0", "m", "option_order/d", None)  # between a call's end and its store
    progress.stop()  # the final line; answered never goes back
    assert out.getvalue().splitlines() == [
        "",
        "flipgate: progress 0/10 trials (0%) · m 0/10",
        "",
        "flipgate: progress 4/10 trials (40%), 0.2 trials/s, ETA 0:30 · m 4/10 (0.2/s)",  # 4/20 s
    ]


def test_the_line_names_each_models_rate_and_the_call_that_holds_the_time(tmp_path):
    """A slow cell is visible before any test finishes: the call in flight that has run longest
    closes the line with its count, time and rate, and each model shows its own trials/s."""
    store = TrialStore(tmp_path / "trials.sqlite")
    store.add_planned({("fast", "mmlu", "option_order"): 600, ("slow", "bbq", "T1/greedy"): 320})
    store.set_live("gw0", "slow", "bbq T1/greedy", 0, 320, started=1000.0)
    store.set_live("gw1", "fast", "option_order/mmlu", 0, 600, started=1100.0)
    out = io.StringIO()
    ticks = iter([0.0, 60.0])
    wall = iter([1010.0, 1130.0])
    progress = LiveProgress(
        store.path,
        out,
        "lines",
        interval=30,
        clock=lambda: next(ticks),
        wall_clock=lambda: next(wall),
    )
    progress.update()
    store.set_live("gw0", "slow", "bbq T1/greedy", 13, 320, started=1000.0)
    store.set_live("gw1", "fast", "option_order/mmlu", 120, 600, started=1100.0)
    progress.update()
    assert out.getvalue().splitlines() == [
        "flipgate: progress 0/920 trials (0%) · fast 0/600 · slow 0/320"
        " · longest call: slow bbq T1/greedy 0/320 in 0:10",
        "flipgate: progress 133/920 trials (14%), 2.2 trials/s, ETA 5:55"
        " · fast 120/600 (2.0/s) · slow 13/320 (0.2/s)"
        " · longest call: slow bbq T1/greedy 13/320 in 2:10 (0.1/s)",
    ]
    snap = read_snapshot(store.conn)
    assert [c.label for c in snap.in_flight] == ["bbq T1/greedy", "option_order/mmlu"]
    store.set_live("gw0", "slow", "bbq T1/greedy", None)  # ended
    assert [c.model_id for c in read_snapshot(store.conn).in_flight] == ["fast"]


@pytest.mark.parametrize("mode", ["lines", "bar"])
def test_the_preamble_comes_once_before_the_first_line(tmp_path, mode):
    """E.g. the dtype ``auto`` chose: printed once the run has a plan (never in a session
    without one, such as the project's own tests), before its first progress line or bar."""
    store = TrialStore(tmp_path / "trials.sqlite")
    out = io.StringIO()
    preamble = ["flipgate: dtype auto is float32 on this CPU without native bf16 (...): m"]
    progress = LiveProgress(store.path, out, mode, interval=0, preamble=preamble)
    progress.update()  # no plan yet: nothing
    assert out.getvalue() == ""
    store.add_planned({("m", "d", "option_order"): 10})
    progress.update()
    progress.update()
    progress.stop()
    text = out.getvalue()
    assert text.count(preamble[0]) == 1 and text.index(preamble[0]) < text.index("0/10 trials")


def test_bar_mode_draws_one_bar(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    store.add_planned({("m", "d", "option_order"): 10})
    store.set_live("gw0", "m", "option_order/d", 10)
    out = io.StringIO()
    progress = LiveProgress(store.path, out, "bar")
    progress.update()
    progress.stop()
    assert "flipgate 100%|" in out.getvalue() and "10/10 trials (100%) · m 10/10" in out.getvalue()


def test_image_sweeps_of_a_text_only_model_plan_nothing_from_the_start(tmp_path):
    """The continuity suite plans its own image sweeps with the context's text-only models."""
    from types import SimpleNamespace

    from flipgate.config import AuditConfig
    from flipgate.continuity.plan import ContinuityPlan
    from flipgate.continuity.suite import SUITE

    plan = ContinuityPlan(("scale", "numeric_comparison"), ("dse",), n_sources=2, samples=4)
    cfg = AuditConfig(tmp_path / "models.yaml", {}, plans={"continuity": plan})
    ctx = SimpleNamespace(
        audit_config=lambda: cfg, items_override=None, text_only_models=lambda: {"text"}
    )
    for model_id, sweep, runs in [
        ("text", "scale", False),
        ("text", "numeric_comparison", True),
        ("vlm", "scale", True),
    ]:
        planned = SUITE.planned(ctx, (model_id, sweep, "dse"))
        assert planned and all((n > 0) == runs for n in planned.values()), (model_id, planned)


def test_a_sequential_cells_plan_is_an_upper_bound_until_it_stops(tmp_path):
    """docs/definitions.md §12: a sequential cell plans its cap, which its stop lowers to the items
    it drew; until then its model's total (and the run's, and the ETA) is shown as "≤ T"."""
    seen = []

    class Watched(ScriptedBackend):
        def complete(self, requests):
            seen.append(read_snapshot(auditor.store.conn))
            return super().complete(requests)

    thresholds = write(
        tmp_path / "thresholds" / "default.yaml",
        "thresholds:\n  - {metric: flip_rate, min: 0.1, rule: lower}\n",
    ).parent
    auditor = make_auditor(tmp_path, Watched())
    auditor.config.items_per_dataset = 12
    auditor.thresholds_dir, auditor.sequential = str(thresholds), SequentialSettings(2, 4)
    cap = cell_plan(auditor.config, None, "scripted", "option_order", "arc_challenge", True)
    auditor.store.add_planned(cap | {("other", "mmlu", "option_order"): 12})
    snap = read_snapshot(auditor.store.conn)
    assert snap.models == {"other": (0, 12), "scripted": (0, 12 * 6)} and snap.at_most == {
        "scripted"
    }
    assert describe(snap, None) == "0/≤84 trials (≥0%) · other 0/12 · scripted 0/≤72"
    _, stop = order_cells(auditor).sequential_trials("scripted", "arc_challenge", "option_order")
    assert stop.n_items == 4 and seen and all(s.at_most == {"scripted"} for s in seen)
    snap = read_snapshot(auditor.store.conn)
    assert snap.models["scripted"] == (4 * 6, 4 * 6) and not snap.bounded
    assert describe(snap, None) == "24/36 trials (67%) · other 0/12 · scripted 24/24"


def test_an_upper_bound_shows_in_the_total_the_share_and_the_eta():
    snap = Snapshot({"a": (100, 400), "b": (50, 200)}, frozenset({"a", "gone"}))
    assert describe(snap, 1.5) == (
        "150/≤600 trials (≥25%), 1.5 trials/s, ETA ≤5:00 · a 100/≤400 · b 50/200"
    )
    assert not Snapshot({"b": (50, 200)}, frozenset({"gone"})).bounded


def test_an_api_models_requests_in_flight_show_summed_over_its_workers(tmp_path):
    """What ``concurrency`` bounds is visible: each worker's call notes the mean number of its
    requests in the air; the line shows the model's sum, and a call's note ends with it."""
    store = TrialStore(tmp_path / "trials.sqlite")
    store.add_planned({("api", "mmlu", "option_order"): 600, ("local", "mmlu", "option_order"): 60})
    store.set_live("gw0", "api", "option_order/mmlu", 48, 300, started=1000.0, in_flight=3.5)
    store.set_live("gw1", "api", "same_ordering:option_order/mmlu", 32, 300, 1000.0, 4.25)
    store.set_live("gw1", "local", "option_order/mmlu", 8, 60, started=1000.0)
    snap = read_snapshot(store.conn)
    assert snap.flying == {"api": 7.75}
    assert describe(snap, None, {"api": 2.0}) == (
        "88/660 trials (13%) · api 80/600 (2.0/s, 7.8 in flight) · local 8/60"
    )
    store.set_live("gw0", "api", "option_order/mmlu", None)
    assert read_snapshot(store.conn).flying == {"api": 4.25}


def test_a_streaming_call_notes_its_requests_in_flight_as_answers_come(tmp_path):
    """calls.Auditor: every NOTE_EVERY answers of a streaming (API) backend, the store gets the
    answers so far and the backend's mean in flight; nothing is left once the call ends."""
    from flipgate.calls import NOTE_EVERY

    seen = []

    class Streaming(ScriptedBackend):
        streams_outputs = True

        def mean_in_flight(self):
            return 6.0

        def complete(self, requests, on_output=None, on_wait=None):
            outs = super().complete(requests)
            for i, out in enumerate(outs):
                on_output(i, out)
                seen.append(read_snapshot(auditor.store.conn).flying.get("scripted"))
            return outs

    auditor = make_auditor(tmp_path, Streaming())
    order_cells(auditor).measured_trials("scripted", "arc_challenge", "option_order")
    assert seen[: NOTE_EVERY - 1] == [None] * (NOTE_EVERY - 1) and seen[NOTE_EVERY - 1] == 6.0
    assert auditor.store.conn.execute("SELECT COUNT(*) FROM flights").fetchone() == (0,)
