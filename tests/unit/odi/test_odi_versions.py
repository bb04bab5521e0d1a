"""ODI across model versions (docs/definitions.md §11): Δθ = θ_candidate − θ_baseline from the
correct-outcome fit, recovered on simulated data with a planted difference; pairs with a model
outside the fit; the GRID card's ODI section and Markdown."""

import copy
import importlib
import json
from dataclasses import replace

import jsonschema
import numpy as np
import pandas as pd
import pytest
from jax import random
from numpyro import handlers

from flipgate.cards.build import SCHEMA_PATH
from flipgate.odi import odi, summarize
from flipgate.odi.card import odi_markdown, odi_section
from flipgate.odi.fit import fit
from flipgate.odi.model import odi_model, sum_zero_basis
from flipgate.odi.simulate import simulate

#: every test here runs audits, servers or fits (the fast tier leaves it out: make test-fast)
pytestmark = pytest.mark.slow

#: planted θ (sum zero): m1 is m0 + 1.0, m2 sits between them
THETA = np.array([-0.5, 0.5, 0.0])
TRUE_DELTA = float(THETA[1] - THETA[0])
#: the module (the package exports its function ``fit`` under the same name)
fit_module = importlib.import_module("flipgate.odi.fit")


def planted(theta: np.ndarray, seed: int = 5, **kwargs):
    """:func:`simulate`'s design and latent values with y redrawn at the given (sum-zero) θ, as the
    correct outcome (θ is ability on it)."""
    data, truth = simulate(n_models=len(theta), seed=seed, **kwargs)
    latent = {**truth["latent"], "theta_z": sum_zero_basis(len(theta)).T @ theta}
    model = handlers.seed(handlers.condition(odi_model, latent), random.PRNGKey(seed))
    y = np.asarray(
        handlers.trace(model).get_trace(data, sample_y=True)["y"]["value"], dtype=np.float64
    )
    return replace(data, y=y, outcome="correct")


@pytest.fixture(scope="module")
def versions_fit():
    # 3 models, 2 facets x 1 dataset x 40 items, K=6 (1,440 trials);
    # the fast profile as tests/unit/odi/test_odi.py
    data = planted(THETA, sigma_pi={"low": 0.3, "high": 1.0}, items_per_cell=40)
    result = fit(data, "fast", seed=0)
    return result, summarize(result, versions=[("m1", "m0"), ("m2", "m0"), ("m1", "old")])


def test_planted_theta_difference_is_recovered(versions_fit):
    result, summary = versions_fit
    assert summary["diagnostics"]["passed"], summary["diagnostics"]
    v = summary["versions"][0]
    assert (v["candidate"], v["baseline"]) == ("m1", "m0")
    d = v["delta_theta"]
    print(f"Δθ(m1 − m0): median {d['median']:.3f}, 89% HDI {d['hdi']}, truth {TRUE_DELTA}")
    assert d["hdi"][0] <= TRUE_DELTA <= d["hdi"][1], d
    assert d["hdi"][0] > 0, d  # the HDI excludes "no change"
    assert abs(d["median"] - TRUE_DELTA) < 0.35, d
    # draw-wise difference, not a difference of summaries: its median matches the θ draws'
    theta = summary["models"]
    assert d["median"] == pytest.approx(
        theta["m1"]["theta"]["median"] - theta["m0"]["theta"]["median"], abs=0.1
    )
    json.dumps(summary)


def test_pair_with_a_model_outside_the_fit_is_listed_missing(versions_fit):
    _, summary = versions_fit
    gone = summary["versions"][2]
    assert gone == {
        "candidate": "m1",
        "baseline": "old",
        "missing": "old not in the correct-outcome fit (no usable trials)",
    }
    assert summarize(versions_fit[0])["versions"] == []


def _rows(model, item, answers, gold):
    return [
        {
            "model_id": model,
            "facet": "option_order",
            "dataset": "mmlu",
            "item_id": item,
            "condition": o,
            "mapped": {"regex": a},
            "correct": {"regex": a == gold},
        }
        for o, a in enumerate(answers)
    ]


def test_odi_takes_delta_theta_from_the_two_versions_alone(versions_fit, monkeypatch):
    """odi() fits each model alone (modal), the panel (both outcomes) and, per version pair, the
    correct outcome of the two versions alone, reusing the panel's fit when the pair is the whole
    panel; the NUTS fits are stood in for by the module's fit (models m0, m1, m2)."""
    seen = []

    def stand_in(data, *args, **kwargs):
        seen.append((data.outcome, data.models))
        return replace(versions_fit[0], data=replace(versions_fit[0].data, outcome=data.outcome))

    monkeypatch.setattr(fit_module, "fit", stand_in)
    A, B = "Paris", "Lyon"
    trials = pd.DataFrame(
        _rows("m1", "q1", [A, A, A, B, B, A], A)
        + _rows("m2", "q1", [B] * 6, A)
        + _rows("m0", "q1", [A] * 5 + [B], A)
    )
    report = odi(trials, "regex", versions=[("m1", "m0"), ("m3", "m0"), ("m3", "m4")])
    json.dumps(report)
    assert seen == [
        ("modal", ["m0", "m1", "m2"]),
        ("correct", ["m0", "m1", "m2"]),
        ("modal", ["m0"]),
        ("modal", ["m1"]),
        ("modal", ["m2"]),
        ("correct", ["m0", "m1"]),  # the pair alone
    ]
    ok, one, two = report["versions"]
    assert (ok["candidate"], ok["baseline"]) == ("m1", "m0") and "missing" not in ok
    assert ok["delta_theta"] == versions_fit[1]["versions"][0]["delta_theta"]
    assert ok["passed"] is versions_fit[1]["diagnostics"]["passed"]
    assert one == {
        "candidate": "m3",
        "baseline": "m0",
        "missing": "m3 not in the correct-outcome fit (no usable trials)",
    }
    assert two["missing"] == "m3 and m4 not in the correct-outcome fit (no usable trials)"
    seen.clear()
    pair = trials[trials.model_id != "m2"]
    assert odi(pair, "regex", versions=[("m1", "m0")])["versions"][0]["delta_theta"]
    assert seen.count(("correct", ["m0", "m1"])) == 1  # the pair is the panel: one fit
    assert odi(trials, "regex")["versions"] == []


def _interval(median, lo, hi):
    return {
        "median": median,
        "hdi": [lo, hi],
        "ci": [lo - 0.1, hi + 0.1],
        "cis": {"0.95": [lo - 0.1, hi + 0.1]},
    }


@pytest.fixture
def analysis():
    diag = {
        "rhat_max": 1.002,
        "ess_bulk_min": 900.0,
        "ess_tail_min": 800.0,
        "divergences": 0,
        "passed": True,
    }
    out = {
        "profile": "fast",
        "roster": ["base", "quant", "other"],
        "hdi_prob": 0.89,
        "ci_level": 0.95,
        "readouts": {"quant": {"option_order": "primary"}},
        "sizes": {},
        "draws_per_chain": {"modal": 1500},
        "facets": {
            "option_order": {
                "sigma_pi": _interval(0.3, 0.2, 0.4),
                "sigma_delta": _interval(0.1, 0.0, 0.2),
            }
        },
        "cells": {
            "option_order/mmlu": {
                "facet": "option_order",
                "dataset": "mmlu",
                "mean_abs_delta": {"estimate": 0.05, "hdi": [0.01, 0.1]},
            }
        },
        "models": {
            m: {"theta": _interval(t, t - 0.2, t + 0.2)}
            for m, t in (("base", 0.4), ("quant", -0.3), ("other", -0.1))
        },
        "versions": [
            {
                "candidate": "quant",
                "baseline": "base",
                "delta_theta": _interval(-0.7, -1.02, -0.41),
            },
            {
                "candidate": "quant",
                "baseline": "gone",
                "missing": "gone not in the correct-outcome fit",
            },
            {"candidate": "other", "baseline": "base", "delta_theta": _interval(-0.5, -0.8, -0.2)},
        ],
        "diagnostics": {"modal": diag, "correct": diag},
        "passed": True,
        "unmeasured": [],
    }
    out["models"]["quant"]["own"] = {
        "facets": {"option_order": {"sigma_delta": _interval(0.2, 0.1, 0.3)}},
        "cells": out["cells"],
        "sizes": {"trials": 60, "models": 1, "items": 10, "cells": 1, "facets": 1, "k": 6},
        "draws_per_chain": 1500,
        "diagnostics": {"modal": diag},
        "passed": True,
    }
    return out


def test_card_odi_section_and_markdown_show_delta_theta(analysis):
    card_schema = json.loads(SCHEMA_PATH.read_text())
    schema = {**card_schema["properties"]["odi"], "$defs": card_schema["$defs"]}
    section = odi_section(analysis, "quant", "mmlu", []).model_dump(mode="json")
    jsonschema.Draft202012Validator(schema).validate(section)
    assert [(v["candidate"], v["baseline"]) for v in section["versions"]] == [
        ("quant", "base"),
        ("quant", "gone"),
    ]
    md = "\n".join(odi_markdown(section))
    pair = "(correct outcome, the two versions' own fit)"
    assert f"Δθ vs base {pair}: median -0.700, 89% HDI [-1.020, -0.410]." in md
    assert f"Δθ vs gone {pair}: not estimated: gone not in the correct-outcome fit." in md
    assert "Own fit (this model's trials alone; its ODI verdicts are decided on it)" in md
    assert "| option_order | 0.200 [0.100, 0.300] |" in md and "gates no model" in md
    base = odi_section(analysis, "base", "mmlu", []).model_dump(mode="json")
    assert "Δθ vs" not in "\n".join(odi_markdown(base))
    bad = copy.deepcopy(section)
    del bad["versions"][0]["delta_theta"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)
