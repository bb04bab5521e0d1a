"""ODI (docs/definitions.md §4): outcomes from a hand-built trials table, input errors, and
parameter recovery of the fast profile on data simulated from the model with known truth."""

import dataclasses
import json
import math

import jax
import numpy as np
import pandas as pd
import pytest
from numpyro.infer.util import potential_energy

from flipgate import FlipgateError
from flipgate.odi import build, diagnostics, fit, model, odi, outcomes, simulate, summarize

A, B, C = "Paris", "Lyon", "Nice"  # mapped answers are option contents, not labels


def _rows(model, item, answers, gold, unknown=()):
    """One trial per ordering; ``unknown`` orderings have correctness None (e.g. no gold match)."""
    return [
        {
            "model_id": model,
            "facet": "option_order",
            "dataset": "mmlu",
            "item_id": item,
            "condition": o,
            "mapped": {"regex": a},
            "correct": {"regex": None if a is None or o in unknown else a == gold},
        }
        for o, a in enumerate(answers)
    ]


@pytest.fixture
def trials():
    return pd.DataFrame(
        _rows("m1", "q1", [A, A, A, B, B, None], gold=A)  # parse failure dropped; mode A (3 vs 2)
        + _rows("m1", "q2", [A, A, B, B, C, C], gold=C)  # 2-2-2 tie: no modal answer
        + _rows("m2", "q1", [B] * 6, gold=A)  # m2's own mode B, though m1's is A
        + _rows("m2", "q2", [C, C, C, C, C, A], gold=C, unknown={5})
    )


def _by(table, model, item, col):
    return (
        table[(table.model_id == model) & (table.item_id == item)]
        .sort_values("condition")[col]
        .tolist()
    )


def test_outcomes_hand_computed(trials):
    t = outcomes(trials, "regex")
    assert len(t) == 23
    assert _by(t, "m1", "q1", "modal") == [1, 1, 1, 0, 0]
    assert all(math.isnan(v) for v in _by(t, "m1", "q2", "modal"))
    assert _by(t, "m2", "q1", "modal") == [1] * 6
    assert _by(t, "m2", "q2", "modal") == [1, 1, 1, 1, 1, 0]
    assert _by(t, "m1", "q1", "correct") == [1, 1, 1, 0, 0]
    assert _by(t, "m1", "q2", "correct") == [0, 0, 0, 0, 1, 1]
    assert _by(t, "m2", "q1", "correct") == [0] * 6
    assert _by(t, "m2", "q2", "correct")[:5] == [1] * 5 and math.isnan(
        _by(t, "m2", "q2", "correct")[5]
    )


def test_build_excludes_tied_items_and_indexes(trials):
    t = outcomes(trials, "regex")
    modal, correct = build(t, "modal"), build(t, "correct")
    assert modal.sizes() == {"trials": 17, "models": 2, "items": 2, "cells": 1, "facets": 1, "k": 6}
    assert correct.n == 22
    assert modal.models == ["m1", "m2"] and modal.cells == [("option_order", "mmlu")]
    assert ("m1", "q2") not in {
        (modal.models[m], modal.items[i][2]) for m, i in zip(modal.model, modal.item)
    }
    assert modal.y.sum() == 3 + 6 + 5


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda t: t.iloc[:0], "empty"),
        (lambda t: t[t.model_id == "m1"], "at least 2 models"),
        (lambda t: t.drop(columns=["mapped"]), "mapped"),
        (lambda t: pd.concat([t, t.iloc[:1]]), "repeat ordering"),
        (lambda t: t.assign(condition="first"), "ordering index"),
        (lambda t: t.assign(mapped=[{"regex": None}] * len(t)), "parse failure"),
    ],
)
def test_bad_input_is_a_flipgate_error(trials, mutate, message):
    with pytest.raises(FlipgateError, match=message):
        build(outcomes(mutate(trials), "regex"), "modal")


def test_unknown_readout_outcome_and_profile(trials):
    with pytest.raises(FlipgateError, match="'logprob'"):
        outcomes(trials, "logprob")
    with pytest.raises(FlipgateError, match="outcome 'flip'"):
        build(outcomes(trials, "regex"), "flip")
    with pytest.raises(FlipgateError, match="unknown ODI profile"):
        fit(build(outcomes(trials, "regex"), "correct"), "slow")


# Recovery: 4 models, 2 facets x 1 dataset x 40 items, K=6 (1,920 trials), σ_π 0.3 vs 1.0.
@pytest.fixture(scope="module")
def recovered():
    data, truth = simulate(
        n_models=4, sigma_pi={"low": 0.3, "high": 1.0}, items_per_cell=40, seed=3
    )
    result = fit(data, "fast", seed=0)
    return result, summarize(result), truth


def test_fast_fit_passes_its_diagnostics(recovered):
    _, summary, _ = recovered
    d = summary["diagnostics"]
    assert d["passed"], d
    assert d["rhat_max"] <= 1.01 and d["ess_bulk_min"] >= 400 and d["divergences"] == 0


def test_sigma_pi_recovered_and_ordered(recovered):
    result, summary, truth = recovered
    est = {f: summary["facets"][f]["sigma_pi"] for f in ("low", "high")}
    for j, f in enumerate(result.data.facets):
        assert abs(math.log(est[f]["median"] / truth["sigma_pi"][j])) < 0.4, (
            f,
            est[f],
            truth["sigma_pi"][j],
        )
    assert (
        est["high"]["hdi"][0] > est["low"]["hdi"][1]
    )  # 89% HDIs separate: the noisier facet is larger


def test_theta_recovered(recovered):
    result, summary, truth = recovered
    est = np.array([summary["models"][m]["theta"]["median"] for m in result.data.models])
    assert np.abs(est - truth["theta"]).max() < 0.3, (est, truth["theta"])
    assert (np.argsort(est) == np.argsort(truth["theta"])).all()
    inside = [
        lo <= t <= hi
        for t, (lo, hi) in zip(
            truth["theta"], (summary["models"][m]["theta"]["hdi"] for m in result.data.models)
        )
    ]
    assert sum(inside) >= 3


def test_failing_thresholds_are_reported_as_failed(recovered):
    result, _, _ = recovered
    strict = diagnostics(result, ess_min=1e6)
    assert not strict["passed"] and strict["thresholds"]["ess_min"] == 1e6
    assert diagnostics(result, rhat_max=math.inf, ess_min=0, scope="all")["passed"]


def test_odi_end_to_end_is_json_and_flags_short_runs(trials):
    report = odi(trials, "regex", num_warmup=30, num_samples=30, svi_steps=100, ess_target=0)
    json.dumps(report)
    assert set(report["facets"]) == {"option_order"} and set(report["models"]) == {"m1", "m2"}
    assert set(report["cells"]) == {"option_order/mmlu"}
    assert report["sizes"]["modal"]["trials"] == 17 and report["sizes"]["correct"]["trials"] == 22
    assert report["passed"] is False  # 60 draws cannot reach ESS 400
    assert report["diagnostics"]["correct"]["ess_bulk_min"] < 400


def test_short_runs_are_extended_to_the_ess_target():
    """The fast profile keeps drawing from each chain's last state until the reported quantities
    reach the ESS target, and stops at max_samples."""
    data, _ = simulate(n_models=3, items_per_cell=12, seed=2)
    extended = fit(data, "fast", num_samples=100, ess_target=400, max_samples=4000)
    d = diagnostics(extended)
    assert 100 < extended.draws_per_chain <= 4000 and d["passed"], (extended.draws_per_chain, d)
    assert extended.draws["theta_z"].shape[:2] == (4, extended.draws_per_chain)  # 4 chains
    capped = fit(data, "fast", num_samples=100, ess_target=1e6, max_samples=250)
    assert capped.draws_per_chain == 250


def test_dense_and_per_trial_likelihoods_agree(monkeypatch):
    """The dense-grid likelihood (used when most of the grid has trials) equals the per-trial one
    on data with missing trials."""
    data, truth = simulate(n_models=3, items_per_cell=5, seed=1)
    keep = np.random.default_rng(0).random(data.n) > 0.2
    per_trial = ("model", "item", "order", "cell", "facet", "y")
    data = dataclasses.replace(data, **{k: getattr(data, k)[keep] for k in per_trial})
    assert model.DENSE_MIN < data.density < 1

    def energy():  # a fresh jit each call, so the model is traced under the current DENSE_MIN
        return float(
            jax.jit(lambda z: potential_energy(model.odi_model, (data,), {}, z))(truth["latent"])
        )

    dense = energy()
    monkeypatch.setattr(model, "DENSE_MIN", 2.0)
    assert energy() == pytest.approx(dense, rel=1e-5)
