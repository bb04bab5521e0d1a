"""ODI (docs/definitions.md §4): outcomes from a hand-built trials table, input errors, and
parameter recovery of the fast profile on data simulated from the model with known truth."""

import dataclasses
import importlib
import importlib.util
import json
import logging
import math

import jax
import numpy as np
import pandas as pd
import pytest
from numpyro.infer.util import potential_energy
from support.odi_fits import SHORT_FIT
from support.paths import REPO, write

from flipgate import FlipgateError
from flipgate.config import load_thresholds
from flipgate.odi import build, diagnostics, model, odi, outcomes, sampler, summarize
from flipgate.odi.card import odi_section
from flipgate.odi.fit import fit
from flipgate.odi.gate import gate, panel_checks
from flipgate.odi.simulate import one_model, simulate, to_trials

#: every test here runs audits, servers or fits (the fast tier leaves it out: make test-fast)
pytestmark = pytest.mark.slow

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
    report = odi(
        trials,
        "regex",
        num_samples=30,
        own_samples=20,
        ess_target=0,
        versions=[("m2", "m1")],
    )
    json.dumps(report)
    assert set(report["facets"]) == {"option_order"} and set(report["models"]) == {"m1", "m2"}
    assert set(report["cells"]) == {"option_order/mmlu"}
    assert report["sizes"]["modal"]["trials"] == 17 and report["sizes"]["correct"]["trials"] == 22
    assert report["passed"] is False  # 60 draws cannot reach ESS 400
    assert report["diagnostics"]["correct"]["ess_bulk_min"] < 400
    # the panel fits draw num_samples, the own fits own_samples; a pair that is the whole panel
    # reuses the panel's correct fit
    assert report["draws_per_chain"] == {"modal": 30, "correct": 30}
    assert {m: v["own"]["draws_per_chain"] for m, v in report["models"].items()} == {
        "m1": 20,
        "m2": 20,
    }
    assert "delta_theta" in report["versions"][0]


def test_chains_drawn_in_pieces_equal_chains_drawn_at_once():
    """The compiled NUTS chunk (flipgate.odi.sampler) takes any number of transitions: 130 then
    70 (an extension, across a chunk boundary) are the same 200 draws, bit for bit, as 200 at
    once; 4 chains on this machine's devices, each with its own draws."""
    init = {"z": jax.numpy.zeros((4, 3))}

    def potential(p):  # a standard normal in 3 dimensions
        return 0.5 * (p["z"] ** 2).sum()

    once, twice = (
        sampler.Chains(
            lambda: potential, init, jax.random.PRNGKey(0), sampler.Kernel(50), chunk=100
        )
        for _ in range(2)
    )
    once.advance(50, keep=False), twice.advance(50, keep=False)
    whole = once.advance(200)
    pieces = twice.advance(130) + twice.advance(70)  # the chunk boundary falls inside both
    assert [p[0]["z"].shape for p in whole] == [(4, 100, 3), (4, 100, 3)]
    assert [p[0]["z"].shape[1] for p in pieces] == [100, 30, 70]
    z = {k: np.concatenate([p[0]["z"] for p in ps], 1) for k, ps in (("a", whole), ("b", pieces))}
    np.testing.assert_array_equal(z["a"], z["b"])
    assert len({float(z["a"][c, -1, 0]) for c in range(4)}) == 4  # the chains differ
    assert abs(z["a"].mean()) < 0.2 and abs(z["a"].std() - 1) < 0.15  # it samples N(0, I)


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


@pytest.mark.parametrize(
    "rhat, ess, more",
    [
        (1.005, 500, 0),  # both met
        (1.012, 500, 330),  # R̂ − 1 at 1.2× its target: 1.1 × 1500 × 0.2
        (1.0101, 500, 100),  # a near miss asks for the least, 100
        (1.005, 220, 1650),  # ESS at half its target: 1.1 × 1500 × 1
        (1.03, 400, 2500),  # R̂ − 1 at 3×: 3300 wanted, 2500 left to max_samples
        (1.005, 0, 2500),  # no ESS: all that is left
    ],
)
def test_draws_added_to_reach_the_targets_hand_computed(monkeypatch, rhat, ess, more):
    """A fit at 1500 draws per chain (max 4000, ESS target 440, R̂ target 1.01) asks for the
    draws that would bring ESS (∝ draws) and R̂ − 1 (∝ 1 / draws) to their targets, +10%."""
    fit_module = importlib.import_module("flipgate.odi.fit")
    prof = fit_module.PROFILES["fast"]
    monkeypatch.setattr(
        fit_module,
        "diagnostics",
        lambda *a, **k: {"rhat_max": rhat, "ess_bulk_min": ess, "ess_tail_min": ess + 100},
    )
    result = fit_module.ODIFit(None, prof, {}, 0, draws_per_chain=1500)  # type: ignore[arg-type]
    assert fit_module._more_draws(result, prof) == more


def test_dense_and_per_trial_likelihoods_agree(monkeypatch):
    """The dense-grid likelihood (used when the grid is small or most of it has trials) equals the
    per-trial one on data with missing trials."""
    data, truth = simulate(n_models=3, items_per_cell=5, seed=1)
    keep = np.random.default_rng(0).random(data.n) > 0.2
    per_trial = ("model", "item", "order", "cell", "facet", "y")
    data = dataclasses.replace(data, **{k: getattr(data, k)[keep] for k in per_trial})
    assert data.density < 1 and model.model_inputs(data).dense

    def energy():  # a fresh jit each call, so the model is traced under the current DENSE_MIN
        return float(
            jax.jit(lambda z: potential_energy(model.odi_model, (data,), {}, z))(truth["latent"])
        )

    dense = energy()
    monkeypatch.setattr(model, "DENSE_MIN", 2.0)
    monkeypatch.setattr(model, "DENSE_GRID", 0)
    assert not model.model_inputs(data).dense
    assert energy() == pytest.approx(dense, rel=1e-5)


# -- issue 42: a model's ODI verdict depends on its own answers only (docs/suites/odi.md) -------
F1, F2 = "option_order", "evidence_chunk_order"  # real facet names, as thresholds need
#: a short fit: these tests check what each fit sees, not convergence
SHORT = dict(SHORT_FIT, num_samples=200)


def _served(name: str, sigma_pi: dict, seed: int, datasets=1):
    """The trials of one served model, drawn from the panel model (γ at ``sigma_pi``)."""
    data, _ = simulate(
        n_models=2, sigma_pi=sigma_pi, datasets=datasets, items_per_cell=15, seed=seed
    )
    return to_trials(one_model(data, 0)).assign(model_id=name)


@pytest.fixture(scope="module")
def rosters(tmp_path_factory):
    """Panels {A, B} and {A, B'}: B' is the same model id behind which a much noisier model is
    served (σ_π 3.0 instead of 0.3); A runs facets F1 and F2, B only F1."""
    a = _served("A", {F1: 0.3, F2: 0.3}, seed=11)
    b = _served("B", {F1: 0.3}, seed=12)
    b_swapped = _served("B", {F1: 3.0}, seed=13)
    ts = load_thresholds(
        write(
            tmp_path_factory.mktemp("thr") / "default.yaml",
            "thresholds:\n"
            "  - {metric: sigma_pi, facet: odi, max: 0.5}\n"
            "  - {metric: sigma_delta, facet: odi, max: 0.5}\n"
            "  - {metric: sigma_delta@evidence_chunk_order, facet: odi, max: 0.5}\n"
            "  - {metric: mean_abs_delta, facet: odi, max: 0.5}\n",
        ).parent,
        "any",
    )
    fits = [odi(pd.concat([a, other]), "sim", **SHORT) for other in (b, b_swapped)]
    return fits, ts


def test_a_roster_change_leaves_an_unchanged_models_verdicts_unchanged(rosters):
    """A's own fit sees A's trials only, under the same seed: equal to the last bit whoever else
    is in the panel, while the pooled σ_π (a panel check) moves with B's answers."""
    (with_b, with_b_swapped), ts = rosters
    assert with_b["models"]["A"]["own"] == with_b_swapped["models"]["A"]["own"]
    verdicts = [[v.model_dump() for v in gate(fit, ts, "A")] for fit in (with_b, with_b_swapped)]
    assert verdicts[0] == verdicts[1] and {v["model"] for v in verdicts[0]} == {"A"}
    assert not any(v["metric"].startswith("sigma_pi") for v in verdicts[0])
    pooled = [f["facets"][F1]["sigma_pi"]["median"] for f in (with_b, with_b_swapped)]
    assert pooled[0] != pooled[1]  # the panel quantity does move: it gates no model
    assert with_b["models"]["B"]["own"] != with_b_swapped["models"]["B"]["own"]


def test_sigma_pi_is_a_panel_check_that_names_no_model(rosters):
    (with_b, _), ts = rosters
    checks = panel_checks(with_b, [ts, ts])  # the same file twice: each check once
    assert {v.model for v in checks} == {"panel"}
    assert sorted(v.target for v in checks if v.metric == "sigma_pi") == sorted([F1, F2])
    assert all(v.threshold.startswith("panel · ") for v in checks)
    assert {v.target for v in checks if v.metric == "rhat_max"} == {"modal", "correct"}


def test_no_per_model_value_for_a_facet_the_model_did_not_run(rosters):
    (with_b, _), ts = rosters
    own = with_b["models"]["B"]["own"]
    assert set(own["facets"]) == {F1} and {c["facet"] for c in own["cells"].values()} == {F1}
    assert "sigma_pi" not in own["facets"][F1]  # σ_π needs a panel
    verdicts = gate(with_b, ts, "B")
    assert all(F2 not in (v.target or "") for v in verdicts if v.verdict != "missing")
    (f2,) = [v for v in verdicts if v.metric == "sigma_delta@evidence_chunk_order"]
    assert f2.verdict == "missing" and f2.target == "(not in the fit)"
    # its card on dataset d0 leaves out the panel's F2/d0 cell and facet F2
    analysis = {
        **with_b,
        "roster": ["A", "B"],
        "readouts": {"A": {F1: "sim", F2: "sim"}, "B": {F1: "sim"}},
        "panel_checks": [v.model_dump(mode="json") for v in panel_checks(with_b, [ts])],
    }
    assert f"{F2}/d0" in analysis["cells"]
    section = odi_section(analysis, "B", "d0", verdicts).model_dump(mode="json")
    assert set(section["facets"]) == {F1} and set(section["cells"]) == {f"{F1}/d0"}
    assert set(section["own"]["facets"]) == {F1} and set(section["own"]["cells"]) == {f"{F1}/d0"}
    assert {v["target"] for v in section["panel_checks"]} == {F1, "modal", "correct"}
    assert all(F2 not in v["threshold"] for v in section["verdicts"] + section["panel_checks"])


# Per-model recovery: each model's own fit, on its trials alone, recovers its own σ_δ and mean |δ|.
@pytest.fixture(scope="module")
def own_fits():
    out = {}
    for sigma_delta, seed in ((0.1, 4), (1.0, 5)):
        data, truth = simulate(
            n_models=2,
            sigma_pi={F1: 0.3},
            datasets=4,
            items_per_cell=20,
            sigma_delta=sigma_delta,
            seed=seed,
        )
        alone = one_model(data, 0)
        out[sigma_delta] = (summarize(fit(alone, "fast", seed=0, **SHORT_FIT)), truth)
    return out


def test_each_models_own_sigma_delta_is_recovered(own_fits):
    (low, _), (high, _) = own_fits[0.1], own_fits[1.0]
    for summary, truth in ((low, 0.1), (high, 1.0)):
        lo, hi = summary["facets"][F1]["sigma_delta"]["hdi"]
        assert lo <= truth <= hi, (truth, summary["facets"][F1])
        assert set(summary["facets"][F1]) == {"sigma_delta"} and summary["models"] == {}
    assert high["facets"][F1]["sigma_delta"]["hdi"][0] > low["facets"][F1]["sigma_delta"]["hdi"][1]
    # per cell, every cell of the model with the larger offsets has the larger mean |δ|
    cells = {
        k: [v["mean_abs_delta"]["estimate"] for v in s["cells"].values()]
        for k, (s, _) in own_fits.items()
    }
    assert min(cells[1.0]) > max(cells[0.1]), cells


# -- compiled programs shared across fits (flipgate.odi.fit, flipgate.odi.model.model_inputs) ----
def test_padded_sizes_hand_computed():
    """At least ``least``, then the next multiple of an eighth of the power of two above: at most
    25% padding, the same size for nearby counts."""
    sizes = {n: model.padded_size(n, 256) for n in (1, 256, 257, 300, 321, 512, 513, 1000)}
    assert sizes == {1: 256, 256: 256, 257: 320, 300: 320, 321: 384, 512: 512, 513: 640, 1000: 1024}
    assert [model.padded_size(n, 4) for n in (1, 3, 4, 5, 9)] == [4, 4, 4, 5, 10]


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "per-trial"])
def test_padding_leaves_the_real_posterior_unchanged(monkeypatch, dense):
    """Padded items have no trials, padded cells no items, padded facets no cells: the potential
    of a padded fit is the unpadded one plus a term of the padded sites alone, so any two values
    of the real latents differ by the same energy (the posterior of the real ones is unchanged),
    on the dense grid and per trial."""
    if not dense:
        monkeypatch.setattr(model, "DENSE_MIN", 2.0)
        monkeypatch.setattr(model, "DENSE_GRID", 0)
    data, truth = simulate(n_models=3, items_per_cell=5, seed=1)
    plain, padded = model.model_inputs(data), model.model_inputs(data, pad=True)
    assert (plain.n_items, plain.n_cells, plain.n_facets) == (10, 2, 2)
    assert (padded.n_items, padded.n_cells, padded.n_facets) == (256, 8, 4)
    assert plain.dense is padded.dense is dense
    rng = np.random.default_rng(0)
    positive = {"sigma_beta", "alpha", "sigma_delta", "tau_pi"}  # unconstrained: their logs
    a = {k: np.log(v) if k in positive else np.asarray(v) for k, v in truth["latent"].items()}
    b = {k: v + rng.normal(0, 0.3, v.shape) for k, v in a.items()}
    grown = {
        **dict.fromkeys(model.ITEM_SITES, 256 - 10),
        **dict.fromkeys(model.CELL_SITES, 8 - 2),
        **dict.fromkeys(model.FACET_SITES, 4 - 2),
    }
    pad = {k: rng.normal(size=(n,) + a[k].shape[1:]) for k, n in grown.items()}

    def energy(inputs, z, padding=None):
        if padding:
            z = {k: np.concatenate([v, padding[k]]) if k in padding else v for k, v in z.items()}
        return float(potential_energy(model.odi_model, (inputs,), {}, z))

    with jax.enable_x64(True):  # energies of ~10³ whose differences are compared to 1e-9
        difference = energy(plain, a) - energy(plain, b)
        padded_difference = energy(padded, a, pad) - energy(padded, b, pad)
        assert padded_difference == pytest.approx(difference, rel=1e-9)
        assert energy(padded, a, pad) != pytest.approx(energy(plain, a))  # the pads count


def test_fits_of_one_panel_size_share_their_compiled_programs():
    """A fit whose items, cells and facets pad to the sizes of an earlier fit's compiles nothing of
    its own (SVI, the NUTS start and chunk, the constrain step are reused): two own fits of 10
    items in 2 cells and of 160 in 4 cells share them; draws are cut back to each fit's own."""
    small, _ = simulate(n_models=2, items_per_cell=5, seed=3)
    large, _ = simulate(n_models=2, sigma_pi={"a": 0.3, "b": 0.5}, datasets=(2, 2), seed=4)
    small, large = one_model(small, 0), one_model(large, 1)
    assert (len(small.items), len(small.cells)) != (len(large.items), len(large.cells))
    short = dict(SHORT_FIT, num_samples=20)
    fit(small, "fast", **short)
    compiled = []
    handler = logging.Handler()
    handler.emit = lambda record: compiled.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("jax")
    logger.addHandler(handler)
    try:
        with jax.log_compiles():
            again = fit(large, "fast", **short)
    finally:
        logger.removeHandler(handler)
    programs = [m for m in compiled if any(f"jit({n})" in m for n in ("run", "_fun", "<lambda>"))]
    assert not programs, programs
    n_i, n_c, n_f = len(large.items), len(large.cells), len(large.facets)
    assert again.draws["z_beta"].shape == (4, 20, n_i)
    assert again.draws["z_delta"].shape == (4, 20, n_c, large.k)
    assert again.draws["sigma_delta"].shape == (4, 20, n_f)


def test_the_scaling_benchmark_reads_profile_overrides():
    """benchmarks/odi_scaling.py's ``--profiles fast,fast:num_samples=1500`` runs the profile
    beside itself with a field changed: ints stay ints, a decimal stays a float."""
    spec = importlib.util.spec_from_file_location(
        "odi_scaling", REPO / "benchmarks" / "odi_scaling.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.parse_profile("fast") == ("fast", {})
    name, overrides = bench.parse_profile("fast:num_samples=1500:target_accept=0.95")
    assert (name, overrides) == ("fast", {"num_samples": 1500, "target_accept": 0.95})
    assert isinstance(overrides["num_samples"], int)
    for bad, says in (
        ("fast:num_sample=1500", "'num_sample' is not a profile field"),
        ("fast:num_samples=many", "num_samples='many' is not a number"),
    ):
        with pytest.raises(ValueError, match=says):
            bench.parse_profile(bad)
