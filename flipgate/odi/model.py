"""The ODI model (docs/definitions.md §4; Facet-Probe App. B): a 2PL item-response model whose logit
α_i(θ_m − β_i − δ[f,d,o] − γ[i,o]) separates per-item ordering noise γ (scale σ_π,i, pooled
within facet) from per-(facet, dataset, ordering) offsets δ. Every hierarchy is non-centred.

Fitted to one model's trials (a *per-model* fit, what gates that model), θ is fixed at 0 (μ_β
absorbs it) and γ is left out: with one trial per (model, item, ordering), an item × ordering
effect is identified only through its sharing across models, so σ_π is a panel quantity."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from flipgate.odi.data import ODIData

#: least share of the model × item × ordering grid with trials for the dense likelihood
DENSE_MIN = 0.5


def sum_zero_basis(n: int) -> np.ndarray:
    """(n, n-1) orthonormal basis Q of the sum-zero vectors: θ = Q z with z ~ N(0, I) has exactly
    the law of θ_raw ~ N(0, I) centred to mean 0, N(0, I - 11ᵀ/n), without θ_raw's unidentified
    mean, which only the prior informs and which would stretch NUTS trajectories."""
    return np.linalg.qr(np.eye(n)[:, : n - 1] - 1.0 / n)[0]


def odi_model(data: ODIData, sample_y: bool = False) -> None:
    """NumPyro model of ``data``'s trials (``sample_y``: draw y instead, in trial order); with one
    model, no θ and no γ (:func:`has_item_noise`). Observed,
    the likelihood runs on the dense model × item × ordering grid, masked where a trial is missing,
    when at least :data:`DENSE_MIN` of it has trials: broadcasting and reducing there is ~1.7x
    faster per gradient on CPU than gathering per trial and scattering the gradient back."""
    n_m, n_i, n_c, n_f, k = (
        len(data.models),
        len(data.items),
        len(data.cells),
        len(data.facets),
        data.k,
    )
    item_cell, cell_facet = jnp.asarray(data.item_cell), jnp.asarray(data.cell_facet)
    std = dist.Normal(0.0, 1.0)

    theta = jnp.zeros(1)  # one model: μ_β absorbs its ability
    if n_m > 1:
        theta = jnp.asarray(sum_zero_basis(n_m)) @ numpyro.sample(
            "theta_z", std.expand([n_m - 1]).to_event(1)
        )

    mu_beta = numpyro.sample("mu_beta", std.expand([n_c]).to_event(1))
    sigma_beta = numpyro.sample("sigma_beta", dist.HalfNormal(0.5).expand([n_c]).to_event(1))
    z_beta = numpyro.sample("z_beta", std.expand([n_i]).to_event(1))
    beta = mu_beta[item_cell] + sigma_beta[item_cell] * z_beta
    alpha = numpyro.sample("alpha", dist.LogNormal(0.0, 0.3).expand([n_i]).to_event(1))

    sigma_delta = numpyro.sample("sigma_delta", dist.HalfNormal(0.3).expand([n_f]).to_event(1))
    z_delta = numpyro.sample("z_delta", std.expand([n_c, k]).to_event(2))
    delta = ordering_offsets(sigma_delta, z_delta, cell_facet)

    offset = beta[:, None] + delta[item_cell]  # (I, K): β_i + δ[f,d,o] (+ γ[i,o] below)
    if has_item_noise(data):
        mu_pi = numpyro.sample("mu_pi", dist.Normal(-1.2, 0.5).expand([n_f]).to_event(1))
        tau_pi = numpyro.sample("tau_pi", dist.HalfNormal(0.1).expand([n_f]).to_event(1))
        z_pi = numpyro.sample("z_pi", std.expand([n_i]).to_event(1))
        sigma_pi = jnp.exp(log_sigma_pi(mu_pi, tau_pi, z_pi, cell_facet[item_cell]))
        z_gamma = numpyro.sample("z_gamma", std.expand([n_i, k]).to_event(2))
        offset = offset + sigma_pi[:, None] * z_gamma
    if sample_y or data.density < DENSE_MIN:
        i = jnp.asarray(data.item)
        eta = alpha[i] * (theta[jnp.asarray(data.model)] - offset[i, jnp.asarray(data.order)])
        numpyro.sample(
            "y",
            dist.Bernoulli(logits=eta).to_event(1),
            obs=None if sample_y else jnp.asarray(data.y),
        )
    else:
        y, mask = data.grid
        eta = alpha[:, None] * (theta[:, None, None] - offset)  # (M, I, K)
        numpyro.sample(
            "y", dist.Bernoulli(logits=eta).mask(jnp.asarray(mask)).to_event(3), obs=jnp.asarray(y)
        )


def has_item_noise(data: ODIData) -> bool:
    """Whether the fit has the per-item ordering noise γ (σ_π): only a panel of ≥ 2 models
    identifies it (module docstring)."""
    return len(data.models) > 1


def ordering_offsets(sigma_delta, z_delta, cell_facet):
    """δ[f,d,o] = σ_δ,f z[f,d,o]: ``sigma_delta`` (…, F), ``z_delta`` (…, C, K) → (…, C, K)."""
    return sigma_delta[..., cell_facet, None] * z_delta


def log_sigma_pi(mu_pi, tau_pi, z_pi, item_facet):
    """log σ_π,i = μ_f + τ_f z_i: ``mu_pi``/``tau_pi`` (…, F), ``z_pi`` (…, I) → (…, I)."""
    return mu_pi[..., item_facet] + tau_pi[..., item_facet] * z_pi


def reported(draws: dict, data: ODIData) -> dict[str, np.ndarray]:
    """The quantities ODI reports, per draw (any leading draw dims on ``draws``' sample sites):
    ``sigma_delta`` (…, F); ``delta`` (…, C, K) centred within its cell, since a cell's mean offset
    is confounded with μ_β; ``mean_abs_delta`` (…, C) the mean of its absolute values; and, for a
    panel of ≥ 2 models only, ``theta`` (…, M) and ``sigma_pi`` (…, F) the median of σ_π,i over
    each facet's items."""
    delta = ordering_offsets(
        np.asarray(draws["sigma_delta"]), np.asarray(draws["z_delta"]), data.cell_facet
    )
    delta = delta - delta.mean(-1, keepdims=True)
    out = {
        "sigma_delta": np.asarray(draws["sigma_delta"]),
        "delta": delta,
        "mean_abs_delta": np.abs(delta).mean(-1),
    }
    if not has_item_noise(data):
        return out
    item_facet = data.cell_facet[data.item_cell]
    mu_pi, tau_pi, z_pi = (np.asarray(draws[k]) for k in ("mu_pi", "tau_pi", "z_pi"))
    sigma_pi = np.exp(log_sigma_pi(mu_pi, tau_pi, z_pi, item_facet))
    return {
        "theta": np.asarray(draws["theta_z"]) @ sum_zero_basis(len(data.models)).T,
        "sigma_pi": np.stack(
            [np.median(sigma_pi[..., item_facet == f], -1) for f in range(len(data.facets))], -1
        ),
        **out,
    }
