"""Per-run summaries in the store and a cell's metric trend across runs."""

import io
import math
import sqlite3

import pandas as pd
import pytest
from support.auditors import make_auditor
from support.scripted import ScriptedBackend

from flipgate.order.cell import OrderCell
from flipgate.results import CellSummary, MetricEstimate
from flipgate.store import TrialStore
from flipgate.trend import TrendPoint, metric_trend, short_run_id, trend_plot

RUNS = ["20261120T090000Z-aaaaaa", "20261121T090000Z-bbbbbb", "20261122T090000Z-cccccc"]
CELL = ("scripted", "arc_challenge", "option_order")


def _cell(n: int, **metrics: MetricEstimate) -> CellSummary:
    return CellSummary(metrics=metrics, n_items=n, n_items_insufficient=0, k=6, n_trials=6 * n)


def planted(flip: float, n: int = 5) -> dict[str, CellSummary]:
    return {
        "regex": _cell(
            n,
            flip_rate=MetricEstimate(estimate=flip, ci=(flip - 0.1, flip + 0.1)),
            acc_swing=MetricEstimate(estimate=0.2),
        ),
        "letter_logprob": _cell(
            n, flip_rate=MetricEstimate(estimate=float("nan"), ci=(float("nan"), float("nan")))
        ),
    }


@pytest.fixture
def runs_dir(tmp_path):
    runs = tmp_path / "runs"
    for i, run_id in enumerate(RUNS):  # written out of order: the trend orders by run id
        store = TrialStore(runs / run_id / "trials.sqlite")
        store.add_summaries(*CELL, planted(0.3 + 0.2 * i, n=5 + i))
        store.add_summaries("other", "arc_challenge", "option_order", planted(0.9))
        store.conn.close()
    (runs / "20261121T120000Z-badbad").mkdir()
    (runs / "20261121T120000Z-badbad" / "trials.sqlite").write_bytes(b"not a database at all" * 100)
    (runs / "20261119T090000Z-old000").mkdir()  # a store from before the summaries table
    old = sqlite3.connect(runs / "20261119T090000Z-old000" / "trials.sqlite")
    old.execute("CREATE TABLE trials (run_id TEXT)")
    old.close()
    (runs / "20261123T090000Z-empty0").mkdir()  # a run dir without a store
    return runs


def test_add_summaries_round_trip(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    store.add_summaries(*CELL, planted(0.5))
    got = store.summaries(*CELL)
    assert got["regex"]["flip_rate"] == {"estimate": 0.5, "ci": [0.4, 0.6]}
    assert got["regex"]["acc_swing"] == {"estimate": 0.2, "ci": None}
    assert (
        got["regex"]["n_items"] == 5
        and "k" not in got["regex"]
        and "k_ablation" not in got["regex"]
    )
    assert got["letter_logprob"]["flip_rate"] == {
        "estimate": None,
        "ci": None,
    }  # NaN reads back as None
    assert store.summaries("scripted", "arc_challenge", "nope") == {}


def test_metric_trend_in_run_order_skipping_bad_stores(runs_dir):
    points = metric_trend(runs_dir, *CELL, "regex", "flip_rate")
    assert [p.run_id for p in points] == RUNS
    assert [p.estimate for p in points] == pytest.approx([0.3, 0.5, 0.7])
    assert points[1] == TrendPoint(RUNS[1], 0.5, pytest.approx(0.4), pytest.approx(0.6), 6)
    assert [p.run_id for p in metric_trend(runs_dir, *CELL, "regex", "flip_rate", limit=2)] == RUNS[
        1:
    ]
    assert metric_trend(runs_dir, *CELL, "regex", "no_such_metric") == []
    assert metric_trend(runs_dir / "missing", *CELL, "regex", "flip_rate") == []
    nan_points = metric_trend(runs_dir, *CELL, "letter_logprob", "flip_rate")
    assert len(nan_points) == 3 and nan_points[0].estimate is None and nan_points[0].lo is None


def test_trend_plot_is_png(runs_dir):
    points = metric_trend(runs_dir, *CELL, "regex", "flip_rate")
    png = trend_plot(points, "flip rate over runs")
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    with_gaps = points + [TrendPoint("r9", None, None, None, None)]  # a NaN estimate still plots
    assert trend_plot(with_gaps, "gaps").startswith(b"\x89PNG")
    assert short_run_id(RUNS[0]) == "2026-11-20 09:00:00" and short_run_id("r1") == "r1"


class FakeAllure:
    """Records what report_cell attaches (allure-pytest only reports with --alluredir)."""

    class attachment_type:
        PNG, CSV, JSON = "image/png", "text/csv", "application/json"

    class dynamic:
        def __getattr__(self, name):
            return lambda *a, **k: None

    dynamic = dynamic()

    def __init__(self):
        self.attached = {}

    def attach(self, body, name, attachment_type=None, extension=None):
        self.attached[name] = body


def test_report_cell_attaches_trend_from_two_runs(runs_dir, monkeypatch):
    from flipgate.order.allure import report_cell

    fake = FakeAllure()
    monkeypatch.setattr("flipgate.report.allure_module", lambda: fake)
    points = metric_trend(runs_dir, *CELL, "regex", "flip_rate")
    shown = ("flip_rate", "pairwise_disagreement", "parse_rate", "accuracy")
    summaries = {
        "regex": _cell(5, **{m: MetricEstimate(estimate=0.7, ci=(0.6, 0.8)) for m in shown})
    }
    args = (
        "option_order",
        "arc_challenge",
        "scripted",
        summaries,
        pd.DataFrame({"item_id": ["a"]}),
        [],
        {"primary_readout": "regex"},
    )
    report_cell(*args, points[:1])
    assert "flip rate trend.png" not in fake.attached and "flip rate.png" in fake.attached
    report_cell(*args, points)
    assert fake.attached["flip rate trend.png"].startswith(b"\x89PNG")
    csv = pd.read_csv(io.StringIO(fake.attached["flip rate trend.csv"]))
    assert (
        list(csv.columns) == ["run_id", "estimate", "lo", "hi", "n_items"]
        and list(csv["run_id"]) == RUNS
    )


def test_flip_cell_records_summaries_and_trend(tmp_path, monkeypatch):
    (tmp_path / "thr").mkdir()
    (tmp_path / "thr" / "default.yaml").write_text(
        "thresholds:\n  - {metric: flip_rate, max: 1.0, rule: point}\n"
        "  - {metric: flip_rate, facet: same_ordering, max: 1.0, rule: point}\n"
    )
    captured = []
    monkeypatch.setattr("flipgate.order.cell.report_cell", lambda *args, **_: captured.append(args))
    backend = ScriptedBackend()
    for run_id in RUNS[:2]:
        auditor = make_auditor(tmp_path, backend, run_id=run_id)
        OrderCell(auditor, str(tmp_path / "thr"), "option_order", "scripted", "arc_challenge").run()
    stored = auditor.store.summaries(*CELL)
    summaries, items = captured[-1][3], captured[-1][4]
    table = auditor.store.item_table(*CELL)  # the per-item table Allure attached, stored once
    assert table.to_csv(index=False) == items.to_csv(index=False) and len(table) == 5
    assert set(stored) == set(summaries) == {"letter_logprob", "regex"}
    assert (
        stored["regex"]["flip_rate"]
        == summaries["regex"].metrics["flip_rate"].model_dump(mode="json")
        == {"estimate": 1.0, "ci": [1.0, 1.0]}
    )
    assert stored["regex"]["n_items"] == 5 and "delta_order" not in stored["regex"]
    trend = captured[-1][-1]  # the primary readout's flip rate, both runs, this one last
    assert [(p.run_id, p.estimate, p.n_items) for p in trend] == [
        (RUNS[0], 1.0, 5),
        (RUNS[1], 1.0, 5),
    ]
    assert len(captured[0][-1]) == 1

    OrderCell(
        auditor, str(tmp_path / "thr"), "same_ordering:option_order", "scripted", "arc_challenge"
    ).run()
    control = auditor.store.summaries("scripted", "arc_challenge", "same_ordering:option_order")[
        "regex"
    ]
    assert control["flip_rate"]["estimate"] == 0.0 and control["delta_order"]["estimate"] == 1.0
    assert math.isclose(control["ordering_excess_share"]["estimate"], 1.0)
