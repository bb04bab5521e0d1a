"""Typed results (flipgate.results): a verdict validates what it is given, reads a NaN as missing,
round-trips through the run store's JSON and keeps gate-specific context out of other verdicts."""

from __future__ import annotations

import json
import math

import numpy as np
import pydantic
import pytest

from flipgate.backends.base import Output, Request, prompt_sha256
from flipgate.config import Threshold
from flipgate.gate.rules import evaluate, verdict
from flipgate.results import (
    TRIAL_COLUMNS,
    CellSummary,
    MetricEstimate,
    Trial,
    Verdict,
    trials_frame,
)
from flipgate.store import TrialStore

FLIP = Threshold("flip_rate", 0.2, "max", "lower", source="default.yaml#1")


def test_nan_estimate_and_ci_are_missing_and_serialise_as_null():
    v = verdict(FLIP, float("nan"), (float("nan"), float("nan")))
    assert v.estimate is None and v.ci == (None, None)
    assert (v.verdict, v.outcome) == ("missing", "fail")
    data = json.loads(v.to_json())
    assert data["estimate"] is None and data["ci"] == [None, None]
    assert "NaN" not in v.to_json()


def test_round_trip_through_json_keeps_context_given_even_as_none():
    (v,) = evaluate(
        [FLIP],
        {"regex": {"flip_rate": MetricEstimate(estimate=0.3, ci=(0.25, 0.35))}},
        "regex",
        facet="option_order",
    )
    gated = v.with_context(mcnemar=None)
    back = Verdict.from_json(gated.to_json())
    assert back == gated and back.facet == "option_order" and back.verdict == "fail"
    assert "mcnemar" in json.loads(back.to_json())  # given (as None): disclosed
    plain = json.loads(v.to_json())
    assert {"mcnemar", "model", "target", "q_value"}.isdisjoint(plain)  # never given: absent


def test_invalid_verdicts_are_rejected():
    (v,) = evaluate(
        [FLIP], {"regex": {"flip_rate": MetricEstimate(estimate=0.1, ci=(0.05, 0.15))}}, "regex"
    )
    with pytest.raises(pydantic.ValidationError):
        v.with_context(verdict="maybe")
    with pytest.raises(pydantic.ValidationError):
        v.with_context(colour="red")  # extra fields are errors, not silently kept
    with pytest.raises(pydantic.ValidationError):
        v.facet = "x"  # frozen


def test_describe_reads_like_the_terminal_line():
    v = verdict(FLIP, 0.3, (0.25, 0.35), facet="option_order")
    assert (
        v.describe()
        == "flip_rate <= 0.2 (lower) [default.yaml#1]: 0.300 95% CI [0.250, 0.350] -> fail"
    )
    upper = Threshold("parse_rate", 0.9, "min", "upper", source="t.yaml#2")
    assert verdict(upper, 0.95, (0.85, 0.99)).describe().endswith("-> inconclusive (not proven)")


def test_q_values_are_computed_once_and_stored_in_each_verdict(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    p_values = {"a": 0.01, "b": 0.04, "c": 0.03}
    for name, p in p_values.items():
        t = Threshold("flip_rate", 0.2, "max", "lower", source=f"{name}.yaml")
        store.add_verdicts("m", "d", name, [verdict(t, 0.3, (0.25, 0.35), p_value=p, facet=name)])
    t = Threshold("accuracy", 0.5, "min", "point")
    store.add_verdicts("m", "d", "none", [verdict(t, 0.6, None, facet="none")])
    q = store.adjust_q_values()
    # Benjamini–Hochberg by hand: sorted p 0.01, 0.03, 0.04 (m = 3) -> 0.03, 0.04, 0.04
    assert sorted(q) == pytest.approx([0.03, 0.04, 0.04])
    stored = {v.facet: v.q_value for v in store.verdicts("m", "d")}
    assert stored["a"] == pytest.approx(0.03) and stored["none"] is None
    assert math.isclose(stored["c"], 0.04) and math.isclose(stored["b"], 0.04)


TRIAL_FIELDS = dict(
    run_id="r1",
    model_id="m",
    model_fingerprint="f",
    dataset="d",
    item_id="i1",
    facet="option_order",
    condition=1,
    permutation=(1, 0),
    sample=0,
    readouts={"regex": "B"},
    mapped={"regex": 0},
    correct={"regex": True},
    gold="0",
    n_classes=2,
)


def test_trial_takes_hash_output_and_cache_flag_from_the_call():
    request = Request((("user", "<image> Q?"),), images=(b"png-1",))
    output = Output(" B", {"A": -2.0, "B": -0.1}, 12, 1, 0.25, 0.001)
    trial = Trial.of(request, output, True, **TRIAL_FIELDS)
    assert trial.permutation == [1, 0] and trial.from_cache == 1
    assert (trial.tokens_in, trial.tokens_out, trial.latency_s, trial.cost_usd) == (
        12,
        1,
        0.25,
        0.001,
    )
    assert json.loads(trial.raw_output)["label_logprobs"] == {"A": -2.0, "B": -0.1}
    # what the model was shown, images included: another image is another prompt
    other = Request((("user", "<image> Q?"),), images=(b"png-2",))
    assert trial.prompt_sha256 == prompt_sha256(request) != prompt_sha256(other)
    assert list(trials_frame([trial]).columns) == TRIAL_COLUMNS
    with pytest.raises(pydantic.ValidationError):
        Trial.of(request, output, False, **{**TRIAL_FIELDS, "condition": "first"})


def test_store_round_trips_trials(tmp_path):
    store = TrialStore(tmp_path / "trials.sqlite")
    trial = Trial.of(Request((("user", "Q?"),)), Output(" B"), False, **TRIAL_FIELDS)
    store.add_trials([trial])
    (row,) = store.trials(model_id="m").to_dict("records")
    assert Trial(**row) == trial


def test_envelope_variants_leave_the_roster_unchanged(tmp_path):
    from support.auditors import make_auditor
    from support.scripted import ScriptedBackend

    auditor = make_auditor(tmp_path, ScriptedBackend())
    roster = dict(auditor.config.models)
    auditor.add_variant("scripted@nf4", {**auditor.model("scripted"), "variant_of": "scripted"})
    assert auditor.config.models == roster and "scripted@nf4" not in auditor.config.models
    assert auditor.model("scripted@nf4")["variant_of"] == "scripted"


def test_metric_estimate_from_draws_plants_the_interval_and_keeps_draws_out_of_json():
    draws = np.linspace(0.0, 1.0, 1001)  # quantiles are the levels themselves
    m = MetricEstimate.from_draws(0.5, draws, 0.9, n_items=7)
    assert m.ci == pytest.approx((0.05, 0.95)) and m.level == 0.9 and m.draws is draws
    assert json.loads(m.model_dump_json()) == {"estimate": 0.5, "ci": list(m.ci), "n_items": 7}
    empty = MetricEstimate.from_draws(0.5, np.array([]), 0.95)  # nothing to resample
    assert empty.estimate is None and empty.ci == (None, None)
    assert json.loads(empty.model_dump_json()) == {"estimate": None, "ci": [None, None]}
    assert MetricEstimate(estimate=float("nan")).model_dump() == {"estimate": None, "ci": None}


def _summary(**extra) -> CellSummary:
    flip = MetricEstimate.from_draws(0.25, np.array([0.0, 0.25, 0.5]), 0.95)
    return CellSummary(
        metrics={"flip_rate": flip, "acc_swing": MetricEstimate(estimate=0.1)},
        n_items=4,
        n_items_insufficient=1,
        k=6,
        n_trials=24,
        **extra,
    )


def test_cell_summary_json_is_flat_and_reads_back():
    facet = _summary(k_policies=[{"policy": "P1", "k": 1}], k2_screen_recall=float("nan"))
    data = json.loads(facet.to_json())
    assert data["flip_rate"] == {"estimate": 0.25, "ci": pytest.approx([0.0125, 0.4875])}
    assert data["acc_swing"] == {"estimate": 0.1, "ci": None}
    assert (data["n_items"], data["k"], data["k2_screen_recall"]) == (4, 6, None)
    assert "metrics" not in data and "k_ablation" in data  # a facet discloses its K analyses
    back = CellSummary.from_json(facet.to_json())
    assert back.metrics["flip_rate"].ci == pytest.approx((0.0125, 0.4875))
    assert back.metrics["flip_rate"].draws is None  # draws never travel
    assert back.model_dump(mode="json") == data
    control = json.loads(_summary().to_json())  # no K analyses: none of their keys
    assert {"k_policies", "k2_screen_recall", "k_ablation"}.isdisjoint(control)
    with pytest.raises(pydantic.ValidationError):
        CellSummary.model_validate({"flip_rate": {"estimate": 0.1, "ci": None}})  # no sizes
