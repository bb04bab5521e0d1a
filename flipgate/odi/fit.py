"""ODI inference profiles (NUTS, optionally started from an SVI fit), posterior summaries with
89% HDIs, and the convergence diagnostics that decide whether a fit is reportable."""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, random
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer.util import constrain_fn, potential_energy
from numpyro.optim import Adam

from flipgate import FlipgateError
from flipgate.odi.data import ODIData, build, outcomes
from flipgate.odi.model import (
    ModelInputs,
    has_item_noise,
    model_inputs,
    odi_model,
    reported,
    unpad,
)
from flipgate.odi.sampler import Chains, Kernel


@dataclass(frozen=True)
class Profile:
    """NUTS settings. Chains start at draws of a mean-field SVI fit (``svi_steps`` Adam steps from
    the prior means; 0 steps: jittered prior means) and, with ``svi_mass``, the diagonal inverse
    mass matrix starts at the SVI variances instead of the identity (then adapts if ``adapt_mass``).
    Chains run as many at a time as JAX has devices (:mod:`flipgate.odi.sampler`).
    ``own_samples`` (0: ``num_samples``; at most ``num_samples``) is the draws per chain that
    :func:`odi`'s own (one model's trials) and version-pair fits start with; they are extended to
    ``ess_target`` like any fit."""

    name: str
    num_chains: int
    num_warmup: int
    num_samples: int
    target_accept: float = 0.8
    svi_steps: int = 2000
    svi_lr: float = 0.02
    svi_mass: bool = True
    adapt_mass: bool = True
    dense_mass: bool = False
    max_tree_depth: int = 10
    x64: bool = False
    #: keep drawing (from each chain's last state, same adapted kernel) until the reported
    #: quantities' bulk and tail ESS reach ``ess_target`` and their R̂ is at most ``rhat_target``,
    #: at most ``max_samples`` draws per chain; ess_target 0: off
    ess_target: float = 0.0
    rhat_target: float = 1.01
    max_samples: int = 0
    own_samples: int = 0


PROFILES = {
    # Facet-Probe App. B: 4 chains x (3000 warmup + 1500 draws), target-accept 0.99, fp64
    "full": Profile(
        "full", num_chains=4, num_warmup=3000, num_samples=1500, target_accept=0.99, x64=True
    ),
    # SVI-started NUTS with an SVI-seeded mass matrix, short warmup, fp32; 4 chains (2 at a time on
    # 2 cores), as rank-normalised R̂ <= 1.01 presumes (Vehtari et al. 2021). Every fit starts at
    # 500 draws per chain and is drawn on until ESS >= 440 and R̂ <= 1.01: the targets, not the
    # start, decide how many draws a fit takes (measurements: benchmarks/odi_scaling.py,
    # benchmarks/odi_fits.py; docs/suites/odi.md)
    "fast": Profile(
        "fast",
        num_chains=4,
        num_warmup=300,
        num_samples=500,
        target_accept=0.9,
        ess_target=440,
        max_samples=4000,
    ),
}


@dataclass
class ODIFit:
    """A finished fit: posterior ``draws`` of every sample site as (chain, draw, …) arrays, and the
    mean leapfrog steps (gradient evaluations) per NUTS draw after warmup."""

    data: ODIData
    profile: Profile
    draws: dict[str, np.ndarray]
    divergences: int
    timings: dict[str, float] = field(default_factory=dict)
    mean_steps: float = float("nan")
    draws_per_chain: int = 0


def _profile(profile: str | Profile, overrides: dict) -> Profile:
    if isinstance(profile, str):
        if profile not in PROFILES:
            raise FlipgateError(f"unknown ODI profile {profile!r}; choose from {list(PROFILES)}")
        profile = PROFILES[profile]
    try:
        return replace(profile, **overrides)
    except TypeError as e:
        raise FlipgateError(f"bad ODI profile override {sorted(overrides)}: {e}") from None


def _potential(inputs: ModelInputs):
    """Potential energy (negative log joint) of unconstrained latent values given ``inputs``."""
    return partial(potential_energy, odi_model, (inputs,), {})


def _prior_means(inputs: ModelInputs) -> dict:
    """Unconstrained prior means of the latent sites (where chains would start with
    init_to_mean)."""
    trace = handlers.trace(handlers.seed(odi_model, 0)).get_trace(inputs)
    return {
        k: biject_to(v["fn"].support).inv(v["fn"].mean)
        for k, v in trace.items()
        if v["type"] == "sample" and not v["is_observed"]
    }


@partial(jax.jit, static_argnames=("steps", "lr", "num_chains"))
def _svi_start(key, inputs: ModelInputs, steps: int, lr: float, num_chains: int):
    """Mean-field Gaussian VI on the unconstrained posterior (ADVI, what AutoNormal fits) from the
    prior means, as one compiled program with one RNG draw per step (NumPyro's SVI set-up compiles
    several times longer), taking the data as an argument: every fit of the same sizes and
    settings reuses it. Returns per-chain starting points drawn from the fit, and its
    variances."""
    opt = Adam(lr)
    potential = _potential(inputs)
    loc, unravel = ravel_pytree(_prior_means(inputs))

    def neg_elbo(params, key):
        m, log_s = params
        return (
            potential(unravel(m + jnp.exp(log_s) * random.normal(key, m.shape, m.dtype)))
            - log_s.sum()
        )

    def step(state, key):
        return opt.update(jax.grad(neg_elbo)(opt.get_params(state), key), state), None

    k_fit, k_init = random.split(key)
    start = opt.init((loc, jnp.full_like(loc, jnp.log(0.1))))
    state, _ = lax.scan(step, start, random.split(k_fit, steps))
    loc, log_scale = opt.get_params(state)
    draws = loc + jnp.exp(log_scale) * random.normal(k_init, (num_chains, loc.size), loc.dtype)
    return jax.vmap(unravel)(draws), unravel(jnp.exp(2 * log_scale))


@jax.jit
def _constrain(z, inputs: ModelInputs):
    """Unconstrained draws (leaves (chain, draw, …)) → the model's sites, compiled once per data
    sizes (the data an argument)."""
    return constrain_fn(odi_model, (inputs,), {}, z, batch_ndims=2)


def _concat(pieces: list, axis: int):
    """Concatenate matching pytrees of arrays along ``axis``."""
    return jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs], axis), *pieces)


def _more_draws(result: "ODIFit", prof: Profile) -> int:
    """Draws per chain to add so the reported quantities reach ``prof.ess_target`` and
    ``prof.rhat_target``, within ``prof.max_samples``; 0 when done. Once chains mix, ESS grows
    about linearly with the draws and R̂ − 1 falls about as their inverse (its between-chain part
    is the variance of the chains' means), so each asks for the draws that would bring it to its
    target, with a 10% margin and at least 100; a fit still short is asked again."""
    room = prof.max_samples - result.draws_per_chain
    if not prof.ess_target or room <= 0:
        return 0
    d = diagnostics(result, rhat_max=prof.rhat_target, ess_min=prof.ess_target)
    ess = min(d["ess_bulk_min"], d["ess_tail_min"])
    short = []  # the factor by which the draws fall short of each target
    if ess < prof.ess_target:
        short.append(math.inf if ess <= 0 else prof.ess_target / ess)
    if d["rhat_max"] > prof.rhat_target:
        short.append((d["rhat_max"] - 1) / (prof.rhat_target - 1))
    if not short:
        return 0
    factor = max(short)
    if math.isinf(factor):
        return room
    want = math.ceil(round(1.1 * result.draws_per_chain * (factor - 1), 6))  # 1650.0000000002: 1650
    return min(room, max(100, want))


def fit(
    data: ODIData,
    profile: str | Profile = "fast",
    seed: int = 0,
    **overrides,
) -> ODIFit:
    """Fit ODI to ``data`` under a :data:`PROFILES` name (or a :class:`Profile`), with ``overrides``
    of its fields: SVI for starting points and a mass matrix, then NUTS on the model's potential
    (each one compiled program, :mod:`flipgate.odi.sampler`; NumPyro's eager model set-up would
    cost more than a small fit), extended past ``num_samples`` while the ESS or R̂ misses
    ``ess_target`` / ``rhat_target``. The data are padded (:func:`model_inputs`) and passed to the
    programs as arguments, so a fit of the same padded sizes reuses an earlier fit's programs; the
    draws are cut back to ``data``'s own items, cells and facets. ``timings``: SVI, NUTS and total
    seconds, compiling included."""
    prof = _profile(profile, overrides)
    key_svi, key_mcmc = random.split(random.PRNGKey(seed))
    timings = {}
    with jax.enable_x64(prof.x64):
        inputs = model_inputs(data, pad=True)
        t0 = time.perf_counter()
        init, variances = jax.block_until_ready(
            _svi_start(key_svi, inputs, prof.svi_steps, prof.svi_lr, prof.num_chains)
        )
        timings["svi_s"] = time.perf_counter() - t0
        mass = ravel_pytree(variances)[0] if prof.svi_mass else None
        t1 = time.perf_counter()
        kernel = Kernel(
            prof.num_warmup,
            prof.target_accept,
            prof.adapt_mass,
            prof.dense_mass,
            prof.max_tree_depth,
        )
        chains = Chains(_potential, init, key_mcmc, kernel, inverse_mass=mass, args=(inputs,))
        chains.advance(prof.num_warmup, keep=False)
        more = prof.num_samples
        pieces: list = []
        while more:
            pieces += chains.advance(more, transform=lambda z: _constrain(z, inputs))
            draws, extra = _concat(pieces, 1)
            result = ODIFit(
                data,
                prof,
                unpad(draws, data),
                int(np.sum(extra["diverging"])),
                timings,
                float(np.mean(extra["num_steps"])),
                int(extra["diverging"].shape[1]),
            )
            more = _more_draws(result, prof)
        timings["mcmc_s"] = time.perf_counter() - t1
    timings["total_s"] = timings["svi_s"] + timings["mcmc_s"]
    return result


def _hdi(x: np.ndarray, prob: float) -> list[float]:
    """Narrowest interval holding ``prob`` of the draws ``x`` (any shape, flattened)."""
    x = np.sort(np.ravel(x))
    n = max(1, min(x.size, math.ceil(prob * x.size)))
    widths = x[n - 1 :] - x[: x.size - n + 1]
    lo = int(np.argmin(widths))
    return [float(x[lo]), float(x[lo + n - 1])]


def _interval(x: np.ndarray, prob: float, ci_level: float | None = None, gate_levels=()) -> dict:
    """Posterior median and ``prob`` HDI; with ``ci_level``, also ``ci``: the HDI at that level,
    and ``cis``: the HDI at each of ``gate_levels`` (keyed ``f"{level:g}"``), what thresholds with
    their own level are decided on (docs/thresholds.md)."""
    out = {"median": float(np.median(x)), "hdi": _hdi(x, prob)}
    if ci_level is not None:
        out["ci"] = _hdi(x, ci_level)
    if gate_levels:
        out["cis"] = {f"{level:g}": _hdi(x, level) for level in gate_levels}
    return out


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


def diagnostics(
    fit: ODIFit,
    rhat_max: float = 1.01,
    ess_min: float = 400,
    max_divergences: int = 0,
    scope: str = "reported",
) -> dict:
    """R̂ max, bulk/tail ESS min and divergences over the reported quantities (``scope="reported"``:
    θ, per-facet σ_π median, σ_δ, centred δ, mean |δ|, μ_π, τ_π; a per-model fit has no θ, σ_π,
    μ_π, τ_π) or every sample site (``"all"``), and whether they pass the thresholds. ``worst``
    names the quantity behind each extreme."""
    quantities: dict[str, np.ndarray]
    if scope == "reported":
        quantities = {
            **reported(fit.draws, fit.data),
            **{k: fit.draws[k] for k in ("mu_pi", "tau_pi") if k in fit.draws},
        }
    elif scope == "all":
        quantities = fit.draws
    else:
        raise FlipgateError(f"ODI diagnostics scope must be 'reported' or 'all', got {scope!r}")
    az = _arviz()
    idata = az.from_dict(
        posterior={k: np.asarray(v, dtype=np.float64) for k, v in quantities.items()}
    )
    stats = {
        "rhat": az.rhat(idata),
        "ess_bulk": az.ess(idata, method="bulk"),
        "ess_tail": az.ess(idata, method="tail"),
    }
    out, worst = {}, {}
    for stat, ds in stats.items():  # NaN (undefined) counts as failing: R̂ inf, ESS 0
        rhat = stat == "rhat"
        values = {
            k: float(
                np.max(np.nan_to_num(ds[k].values, nan=np.inf))
                if rhat
                else np.min(np.nan_to_num(ds[k].values, nan=0.0))
            )
            for k in ds
        }
        name = (max if rhat else min)(values, key=values.__getitem__)
        out["rhat_max" if rhat else f"{stat}_min"], worst[stat] = values[name], name
    passed = (
        out["rhat_max"] <= rhat_max
        and out["ess_bulk_min"] >= ess_min
        and out["ess_tail_min"] >= ess_min
        and fit.divergences <= max_divergences
    )
    return {
        **out,
        "divergences": fit.divergences,
        "passed": bool(passed),
        "scope": scope,
        "worst": worst,
        "thresholds": {
            "rhat_max": rhat_max,
            "ess_min": ess_min,
            "max_divergences": max_divergences,
        },
    }


def summarize(
    fit: ODIFit,
    hdi_prob: float = 0.89,
    ci_level: float | None = None,
    gate_levels=(),
    versions=(),
    **thresholds,
) -> dict:
    """JSON-ready posterior summary: per facet σ_π (draw-wise median over its items; panel fits
    only) and σ_δ, per (facet, dataset) cell mean |δ| (estimate: mean |posterior-mean δ| with δ
    centred in its cell; HDI: of the draw-wise mean |δ|), per model θ (panel fits only; a
    per-model fit has ``models: {}``), per (candidate, baseline) pair of ``versions``
    Δθ = θ_candidate − θ_baseline draw-wise (docs/definitions.md §11; ``missing`` instead when
    either is not in the fit), each with ``hdi_prob`` HDIs (and, with ``ci_level``, a ``ci`` HDI at
    that level), and :func:`diagnostics` (``thresholds`` go to it)."""
    q = reported(fit.draws, fit.data)
    d = fit.data
    interval = partial(_interval, prob=hdi_prob, ci_level=ci_level, gate_levels=tuple(gate_levels))
    index = {m: j for j, m in enumerate(d.models)}

    def version(c: str, b: str) -> dict:
        gone = [m for m in (c, b) if m not in index]
        if gone:
            return {
                "candidate": c,
                "baseline": b,
                "missing": f"{' and '.join(gone)} not in the {d.outcome}-outcome fit "
                "(no usable trials)",
            }
        return {
            "candidate": c,
            "baseline": b,
            "delta_theta": interval(q["theta"][..., index[c]] - q["theta"][..., index[b]]),
        }

    def abs_delta(c: int) -> dict:  # estimate from the posterior-mean δ; intervals from the draws
        hdis = {k: v for k, v in interval(q["mean_abs_delta"][..., c]).items() if k != "median"}
        return {"estimate": float(np.abs(q["delta"][..., c, :].mean((0, 1))).mean()), **hdis}

    return {
        "outcome": d.outcome,
        "profile": fit.profile.name,
        "hdi_prob": hdi_prob,
        "sizes": d.sizes(),
        "facets": {
            f: {
                **({"sigma_pi": interval(q["sigma_pi"][..., j])} if "sigma_pi" in q else {}),
                "sigma_delta": interval(q["sigma_delta"][..., j]),
            }
            for j, f in enumerate(d.facets)
        },
        "cells": {
            f"{f}/{ds}": {"facet": f, "dataset": ds, "mean_abs_delta": abs_delta(c)}
            for c, (f, ds) in enumerate(d.cells)
        },
        "models": {
            m: {"theta": interval(q["theta"][..., j])}
            for j, m in enumerate(d.models)
            if has_item_noise(d)
        },
        "versions": [version(c, b) for c, b in versions],
        "diagnostics": diagnostics(fit, **thresholds),
        "draws_per_chain": fit.draws_per_chain,
        "num_chains": fit.profile.num_chains,
        "timings": {k: round(v, 2) for k, v in fit.timings.items()},
    }


def odi(
    trials,
    readout: str,
    profile: str | Profile = "fast",
    seed: int = 0,
    hdi_prob: float = 0.89,
    thresholds: dict | None = None,
    ci_level: float | None = None,
    gate_levels=(),
    versions=(),
    **overrides,
) -> dict:
    """The ODI fits of a trials table (docs/definitions.md §4, docs/suites/odi.md):

    * per model, its *own* modal-outcome fit on its trials alone (``models[m]["own"]``: σ_δ per
      facet it ran, mean |δ| per cell it ran, diagnostics); what gates the model, so another
      model's answers cannot move it;
    * the *panel* fits of every model together (top-level ``facets`` with the pooled σ_π / σ_δ,
      ``cells``, ``diagnostics``, ``passed``; ``models[m]["theta"]`` centred over the panel):
      panel-level quantities that gate no single model;
    * per (candidate, baseline) pair of ``versions``, Δθ from a correct-outcome fit of the two
      versions alone (docs/definitions.md §11).

    ``thresholds`` go to :func:`diagnostics`, ``ci_level`` / ``gate_levels`` add gate intervals
    (:func:`summarize`). Every fit uses ``seed``, so a model's own fit is the same whatever the
    panel. Own and pair fits start with ``own_samples`` draws per chain (at most
    ``num_samples``; the panel fits with ``num_samples``), each drawn on to the profile's ESS and
    R̂ targets."""
    table = outcomes(trials, readout)
    prof = _profile(profile, overrides)
    fits: dict[tuple, ODIFit] = {}  # a pair that is the whole panel reuses the panel's fit

    def summary(data: ODIData, pairs=(), small: bool = False) -> dict:
        """``small``: an own or pair fit, started with ``prof.own_samples`` draws per chain."""
        key = (data.outcome, tuple(data.models), data.n)
        if key not in fits:
            start = min(prof.own_samples or prof.num_samples, prof.num_samples)
            start = start if small else prof.num_samples
            fits[key] = fit(data, prof, seed, num_samples=start)
        return summarize(
            fits[key],
            hdi_prob,
            ci_level,
            gate_levels,
            pairs,
            **(thresholds or {}),
        )

    panel = {o: summary(build(table, o)) for o in ("modal", "correct")}
    small = partial(summary, small=True)
    models = {
        m: {**v, "own": own_fit(table, m, small)} for m, v in panel["correct"]["models"].items()
    }
    for m in sorted(set(table["model_id"].astype(str)) - set(models)):
        models[m] = {"theta": None, "own": own_fit(table, m, small)}
    return {
        "readout": readout,
        "profile": panel["modal"]["profile"],
        "hdi_prob": hdi_prob,
        "facets": panel["modal"]["facets"],
        "cells": panel["modal"]["cells"],
        "models": models,
        "versions": [version_fit(table, c, b, small) for c, b in versions],
        "diagnostics": {o: s["diagnostics"] for o, s in panel.items()},
        "sizes": {o: s["sizes"] for o, s in panel.items()},
        "draws_per_chain": {o: s["draws_per_chain"] for o, s in panel.items()},
        "timings": {o: s["timings"] for o, s in panel.items()},
        "passed": all(s["diagnostics"]["passed"] for s in panel.values()),
    }


def own_fit(table, model_id: str, summary) -> dict:
    """``model_id``'s own modal-outcome fit (its rows of the :func:`outcomes` ``table`` only):
    σ_δ per facet and mean |δ| per cell it ran, diagnostics (keyed ``modal``), sizes; ``missing``
    instead when none of its trials enter the modal outcome."""
    mine = table[table["model_id"].astype(str) == model_id]
    try:
        data = build(mine, "modal", min_models=1)
    except FlipgateError as exc:
        return {"missing": f"{model_id}: {exc}", "passed": False}
    s = summary(data)
    return {
        **{k: s[k] for k in ("facets", "cells", "sizes", "draws_per_chain")},
        "diagnostics": {"modal": s["diagnostics"]},
        "passed": s["diagnostics"]["passed"],
    }


def version_fit(table, candidate: str, baseline: str, summary) -> dict:
    """Δθ of ``candidate`` against ``baseline`` from a correct-outcome fit of the two alone
    (``missing`` when either has no usable trials); ``passed``: whether that fit passed its
    diagnostics."""
    pair = table[table["model_id"].astype(str).isin([candidate, baseline])]
    present = set(pair.loc[pair["correct"].notna(), "model_id"].astype(str))
    gone = [m for m in (candidate, baseline) if m not in present]
    if gone:
        return {
            "candidate": candidate,
            "baseline": baseline,
            "missing": f"{' and '.join(gone)} not in the correct-outcome fit (no usable trials)",
        }
    s = summary(build(pair, "correct"), [(candidate, baseline)])
    return {**s["versions"][0], "passed": s["diagnostics"]["passed"]}
