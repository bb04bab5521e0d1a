"""How a run discloses its sequential gates (docs/definitions.md §12): the card's ``sequential``
section and its Markdown (the confidence sequence and, labelled apart, the fixed-N bootstrap CI),
the Allure attachment and verdict lines, and the terminal line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
import pytest
from support.auditors import make_auditor
from support.paths import write
from support.scripted import ScriptedBackend
from support.suites import SUITES

import flipgate.registry  # noqa: F401  (the suites read models.yaml through it)
from flipgate.cards import build_card, validate_card
from flipgate.cards.disclosure import (
    BOOTSTRAP_LABEL,
    SEQUENCE_LABEL,
    card_section,
    run_line,
    stop_line,
)
from flipgate.cards.markdown import card_markdown
from flipgate.exports.model_card import grid_section
from flipgate.gate.sequential import SequentialStop, ThresholdDecision
from flipgate.markdown_text import md_escape
from flipgate.metrics.sequential import SequentialSettings
from flipgate.order import allure as order_allure
from flipgate.order.cell import OrderCell
from flipgate.order.measure import order_cells

#: a position-biased model flips on every item, and never on the same ordering: both thresholds
#: are decided at the first look (the second batch of 2 items)
THRESHOLDS = """
version: 1
level: 0.95
thresholds:
  - {metric: flip_rate, facet: option_order, min: 0.1, rule: lower}
  - {metric: flip_rate, facet: same_ordering, max: 0.9, rule: lower}
"""
CELLS = ("option_order", "same_ordering:option_order")


class Recorder:
    """Stands in for the ``allure`` module: keeps the description and the attachments."""

    attachment_type = SimpleNamespace(JSON="json", CSV="csv", PNG="png")

    def __init__(self):
        self.description = ""
        self.attached: dict[str, str | bytes] = {}
        self.dynamic = SimpleNamespace(description=self._describe)

    def _describe(self, text: str) -> None:
        self.description = text

    def attach(self, body, name, attachment_type=None) -> None:
        self.attached[name] = body


@pytest.fixture
def sequential_run(tmp_path, monkeypatch):
    """A sequential facet cell and its control (cap 12 items, batches of 2, from 4), run by their
    suite tests with the Allure calls recorded: (store, {cell: Recorder})."""
    thresholds = write(tmp_path / "thresholds" / "default.yaml", THRESHOLDS).parent
    auditor = make_auditor(tmp_path, ScriptedBackend())
    auditor.config.items_per_dataset = 12
    auditor.thresholds_dir = str(thresholds)
    auditor.sequential = SequentialSettings(batch_items=2, min_items=4)
    auditor.store.add_model(
        "scripted",
        {"backend": "scripted", "weights_sha256": "abc", "source": None},
        {"readouts": ["letter_logprob", "regex"], "primary_readout": "regex"},
    )
    reports = {}
    for cell in CELLS:
        reports[cell] = Recorder()
        monkeypatch.setattr(order_allure, "label_test", lambda *a, r=reports[cell]: r)
        OrderCell(auditor, str(thresholds), cell, "scripted", "arc_challenge").run()
    return auditor.store, reports


def test_the_stops_are_stored(sequential_run):
    store, _ = sequential_run
    facet, control = store.records(SequentialStop, "scripted")
    assert (facet.cell, facet.n_items, facet.cap, facet.batches, facet.reason) == (
        "option_order",
        4,
        12,
        2,
        "decided",
    )
    assert (facet.calls_used, facet.calls_saved) == (4 * 6, 8 * 6)
    # a control draws from the items its facet used: its cap
    assert (control.cap, control.cap_from, control.n_items, control.calls_saved) == (
        4,
        "option_order",
        4,
        0,
    )


def test_card_section_is_typed_and_schema_valid(sequential_run):
    store, _ = sequential_run
    card = build_card(store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES).to_data()
    validate_card(card)
    section = card["sequential"]
    assert set(section) == set(CELLS)
    facet = section["option_order"]
    assert {k: facet[k] for k in facet if k != "thresholds"} == {
        "cap": 12,
        "n_items": 4,
        "min_items": 4,
        "batch_items": 2,
        "batches": 2,
        "reason": "decided",
        "decided_by": ["flip_rate[facet=option_order] >= 0.1 (lower)"],
        "calls_used": 24,
        "calls_saved": 48,
        "bootstrap_level": 0.95,
    }
    assert facet["thresholds"] == [
        {
            "threshold": "flip_rate[facet=option_order] >= 0.1 (lower)",
            "metric": "flip_rate",
            "readout": "regex",
            "decision": "pass",
            "decided_at": 4,
            "holds": True,
            "note": None,
            "test": facet["thresholds"][0]["test"],
            "futile": False,
        }
    ]
    # 4 flips of 4 against a rate of at most 0.1: the group-sequential binomial test's e-value
    assert facet["thresholds"][0]["test"].startswith("group-sequential binomial e = ")
    assert section["same_ordering:option_order"]["cap_from"] == "option_order"
    # the cell's metrics are those of the items it used
    assert card["order_robustness"]["option_order"]["regex"]["n_items"] == 4
    undecided = json.loads(json.dumps(card))
    undecided["sequential"]["option_order"]["thresholds"][0] |= {
        "decision": None,
        "decided_at": None,
    }
    validate_card(undecided)
    bad = json.loads(json.dumps(card))
    bad["sequential"]["option_order"]["reason"] = "tired"
    with pytest.raises(jsonschema.ValidationError):
        validate_card(bad)


def test_a_fixed_n_card_has_no_sequential_section(tmp_path):
    auditor = make_auditor(tmp_path, ScriptedBackend())
    order_cells(auditor).trials("scripted", "arc_challenge", "option_order")
    card = build_card(
        auditor.store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES
    ).to_data()
    assert "sequential" not in card and "## Sequential gates" not in card_markdown(card, SUITES)


def test_markdown_labels_the_sequence_and_the_bootstrap_ci_apart(sequential_run):
    store, _ = sequential_run
    card = build_card(store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES).to_data()
    md = card_markdown(card, SUITES)
    (verdict,) = [v for v in card["thresholds"] if v["facet"] == "option_order"]
    assert verdict["interval"] == "confidence_sequence"
    lo, hi = verdict["ci"]
    b_lo, b_hi = card["order_robustness"]["option_order"]["regex"]["flip_rate"]["ci"]
    (row,) = [line for line in md.splitlines() if line.startswith("| option_order | flip_rate")]
    assert f"{SEQUENCE_LABEL} 95% [{lo:.3f}, {hi:.3f}]" in row
    assert f"{BOOTSTRAP_LABEL} 95% [{b_lo:.3f}, {b_hi:.3f}]" in row
    assert (lo, hi) != (b_lo, b_hi)  # two intervals, not one shown twice
    lines = md.split("## Sequential gates", 1)[1].splitlines()
    threshold = md_escape(verdict["threshold"])
    assert (
        "- option_order: 4/12 items used, stopping batch 2 (2 items a batch, from 4); decided by "
        f"{threshold} ({md_escape(verdict['test'])}); 48 model calls saved (24 used)"
    ) in lines
    assert any(
        line.startswith(
            "- same_ordering:option_order: 4/4 items used (the cap: the items option_order used)"
        )
        for line in lines
    )


def test_allure_attaches_the_stop_and_labels_the_intervals(sequential_run):
    store, reports = sequential_run
    report = reports["option_order"]
    attached = json.loads(report.attached["sequential stop.json"])
    stop = store.records(SequentialStop, "scripted")[0]
    assert attached == stop.model_dump(mode="json") | {"calls_used": 24, "calls_saved": 48}
    (verdict,) = [v for v in stop.thresholds if v.metric == "flip_rate"]
    assert (
        f"flip_rate[facet=option_order] >= 0.1 (lower): pass by {verdict.test} "
        f"({SEQUENCE_LABEL} 95% ["
    ) in report.description
    assert f"; {BOOTSTRAP_LABEL} 95% [" in report.description
    assert "sequential: option_order: 4/12 items used" in report.description


def test_stop_line_says_why_a_cell_ran_to_its_cap():
    decided = ThresholdDecision(
        threshold="a", metric="flip_rate", readout="regex", rule="lower", decision="pass"
    )
    open_ = ThresholdDecision(threshold="b", metric="flip_rate", readout="regex", rule="upper")
    stop = SequentialStop(
        model_id="m",
        dataset="d",
        cell="option_order",
        cap=40,
        min_items=16,
        batch_items=8,
        n_items=40,
        batches=5,
        reason="cap",
        decided_by=[],
        thresholds=[decided, open_],
        calls_per_item=6,
    )
    assert stop_line("option_order", card_section(stop, 0.95)) == (
        "option_order: 40/40 items used, stopping batch 5 (8 items a batch, from 16); at the cap, "
        "undecided: b; 0 model calls saved (240 used)"
    )
    nothing = stop.model_copy(update={"reason": "nothing to decide", "thresholds": []})
    assert stop_line("option_order", card_section(nothing, 0.95)).endswith(
        "at the cap: no threshold its one-sided tests decide; 0 model calls saved (240 used)"
    )


def test_terminal_line_counts_the_cells_stopped_early_and_the_calls_saved(sequential_run):
    store, _ = sequential_run
    assert run_line(store.records(SequentialStop)) == (
        "flipgate: sequential gates: 1 of 2 cells stopped before their cap, 48 model calls saved "
        "(cap: 96)"
    )
    assert run_line([]) is None


def test_the_model_card_section_labels_the_sequence_too(sequential_run, tmp_path):
    store, _ = sequential_run
    card = build_card(store, "scripted", "arc_challenge", "r1", n_boot=200, suites=SUITES).to_data()
    (row,) = [
        line
        for line in grid_section("scripted", [card], tmp_path).splitlines()
        if line.startswith("| arc_challenge | option_order | flip_rate")
    ]
    assert f"| {SEQUENCE_LABEL} 95% [" in row and f"; {BOOTSTRAP_LABEL} 95% [" in row
