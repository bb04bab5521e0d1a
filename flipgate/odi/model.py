"""The ODI model (docs/definitions.md §4; Facet-Probe App. B): a 2PL item-response model whose logit
α_i(θ_m − β_i − δ[f,d,o] − γ[i,o]) separates per-item ordering noise γ (scale σ_π,i, pooled
within facet) from per-(facet, dataset, ordering) offsets δ. Every hierarchy is non-centred.

Fitted to one model's trials (a *per-model* fit, what gates that model), θ is fixed at 0 (μ_β
absorbs it) and γ is left out: with one trial per (model, item, ordering), an item × ordering
effect is identified only through its sharing across models, so σ_π is a panel quantity."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from flipgate.odi.data import ODIData

#: the likelihood runs on the dense model × item × ordering grid when it has at most DENSE_GRID
#: cells or at least DENSE_MIN of them have trials, per trial otherwise. Up to a few thousand
#: cells a gradient costs no more on the dense grid than per trial (25-50% density); on 12k-25k
#: cells at 10-25% density it costs 1.2-2× (benchmarks/odi_likelihood.py). Below DENSE_GRID a
#: fit's program depends on its sizes only, not on its trial count, so more fits share one
DENSE_GRID = 8192
DENSE_MIN = 0.5


def sum_zero_basis(n: int) -> np.ndarray:
    """(n, n-1) orthonormal basis Q of the sum-zero vectors: θ = Q z with z ~ N(0, I) has exactly
    the law of θ_raw ~ N(0, I) centred to mean 0, N(0, I - 11ᵀ/n), without θ_raw's unidentified
    mean, which only the prior informs and which would stretch NUTS trajectories."""
    return np.linalg.qr(np.eye(n)[:, : n - 1] - 1.0 / n)[0]


#: sample sites by the axis they have of the items, cells or facets (their first event dimension):
#: a padded fit's draws are cut back to the real ones (:func:`unpad`)
ITEM_SITES = ("z_beta", "alpha", "z_pi", "z_gamma")
CELL_SITES = ("mu_beta", "sigma_beta", "z_delta")
FACET_SITES = ("sigma_delta", "mu_pi", "tau_pi")
#: the least size a padded fit's items, cells, facets and trials (per-trial likelihood) have
PAD_LEAST = {"items": 256, "cells": 8, "facets": 4, "trials": 256}


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["item_cell", "cell_facet", "y", "mask", "model", "item", "order"],
    meta_fields=["n_models", "n_items", "n_cells", "n_facets", "k", "dense"],
)
@dataclass(frozen=True)
class ModelInputs:
    """What :func:`odi_model` reads of an :class:`ODIData`: its sizes (static: a compiled program
    is specific to them) and its arrays (traced: one compiled program serves every fit of the same
    sizes, :mod:`flipgate.odi.fit`). ``dense``: ``y``/``mask`` on the (model, item, ordering)
    grid; otherwise per trial, with ``model``/``item``/``order`` (empty when dense). ``mask`` is
    False where there is no trial (dense) or a trial is padding (per trial)."""

    item_cell: np.ndarray
    cell_facet: np.ndarray
    y: np.ndarray
    mask: np.ndarray
    model: np.ndarray
    item: np.ndarray
    order: np.ndarray
    n_models: int
    n_items: int
    n_cells: int
    n_facets: int
    k: int
    dense: bool


def padded_size(n: int, least: int) -> int:
    """The size an axis of ``n`` is padded to: ``least``, or past it the next multiple of an
    eighth of ``n``'s power of two (256, 320, 384, 448, 512, 640, …: at most 25% padding), so fits
    of nearby sizes share one compiled program; it depends on ``n`` alone, so what a fit pads to
    never depends on another fit."""
    if n <= least:
        return least
    step = max(1, 1 << ((n - 1).bit_length() - 3))
    return -(-n // step) * step


def model_inputs(data: ODIData, sample_y: bool = False, pad: bool = False) -> ModelInputs:
    """``data`` as :class:`ModelInputs`: on the dense grid when it has at most :data:`DENSE_GRID`
    cells or at least :data:`DENSE_MIN` of them have trials (and not ``sample_y``, which draws y
    per trial in trial order), per trial otherwise.
    ``pad``: items, cells and facets (and trials, per trial) grown to :func:`padded_size` with
    :data:`PAD_LEAST`: items without trials (in cell 0), cells without items (in facet 0), facets
    without cells and masked trials. Their sites are prior only, so the posterior of the real ones
    is unchanged; an own fit of a few items costs a few more leapfrog-step flops, and every own
    fit of the audit shares one program."""
    n_i, n_c, n_f = len(data.items), len(data.cells), len(data.facets)
    size = padded_size if pad else (lambda n, least: n)
    items, cells = size(n_i, PAD_LEAST["items"]), size(n_c, PAD_LEAST["cells"])
    item_cell, cell_facet = np.zeros(items, np.int32), np.zeros(cells, np.int32)
    item_cell[:n_i], cell_facet[:n_c] = data.item_cell, data.cell_facet
    cells_in_grid = len(data.models) * items * data.k
    dense = not sample_y and (cells_in_grid <= DENSE_GRID or data.density >= DENSE_MIN)
    none = np.zeros(0, np.int32)
    y: np.ndarray
    mask: np.ndarray
    if dense:
        shape = (len(data.models), items, data.k)
        y, mask = np.zeros(shape), np.zeros(shape, dtype=bool)
        y[:, :n_i], mask[:, :n_i] = data.grid
        model = item = order = none
    else:
        n = size(data.n, PAD_LEAST["trials"])
        y, mask = np.zeros(n), np.zeros(n, dtype=bool)
        y[: data.n], mask[: data.n] = data.y, True
        model, item, order = (np.zeros(n, np.int32) for _ in range(3))
        model[: data.n], item[: data.n], order[: data.n] = data.model, data.item, data.order
    return ModelInputs(
        item_cell,
        cell_facet,
        y,
        mask,
        model,
        item,
        order,
        len(data.models),
        items,
        cells,
        size(n_f, PAD_LEAST["facets"]),
        data.k,
        dense,
    )


def unpad(draws: dict, data: ODIData) -> dict:
    """``draws`` (leaves (chain, draw, …)) of a padded fit of ``data`` as an unpadded fit's: the
    :data:`ITEM_SITES`, :data:`CELL_SITES` and :data:`FACET_SITES` cut to its items, cells and
    facets."""
    keep = {
        **dict.fromkeys(ITEM_SITES, len(data.items)),
        **dict.fromkeys(CELL_SITES, len(data.cells)),
        **dict.fromkeys(FACET_SITES, len(data.facets)),
    }
    return {k: v[:, :, : keep[k]] if k in keep else v for k, v in draws.items()}


def odi_model(data: ODIData | ModelInputs, sample_y: bool = False) -> None:
    """NumPyro model of ``data``'s trials (``sample_y``: draw y instead, in trial order); with one
    model, no θ and no γ (:func:`has_item_noise`). Observed, the likelihood runs on the dense
    model × item × ordering grid, masked where a trial is missing, when the grid is small or mostly
    has trials (:func:`model_inputs`, :data:`DENSE_GRID`), per trial otherwise (gathering per trial
    and scattering the gradient back costs more than broadcasting over a full grid)."""
    x = data if isinstance(data, ModelInputs) else model_inputs(data, sample_y)
    n_m, n_i, n_c, n_f, k = x.n_models, x.n_items, x.n_cells, x.n_facets, x.k
    item_cell, cell_facet = jnp.asarray(x.item_cell), jnp.asarray(x.cell_facet)
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
    if has_item_noise(x):
        mu_pi = numpyro.sample("mu_pi", dist.Normal(-1.2, 0.5).expand([n_f]).to_event(1))
        tau_pi = numpyro.sample("tau_pi", dist.HalfNormal(0.1).expand([n_f]).to_event(1))
        z_pi = numpyro.sample("z_pi", std.expand([n_i]).to_event(1))
        sigma_pi = jnp.exp(log_sigma_pi(mu_pi, tau_pi, z_pi, cell_facet[item_cell]))
        z_gamma = numpyro.sample("z_gamma", std.expand([n_i, k]).to_event(2))
        offset = offset + sigma_pi[:, None] * z_gamma
    if x.dense:
        eta = alpha[:, None] * (theta[:, None, None] - offset)  # (M, I, K)
        numpyro.sample(
            "y", dist.Bernoulli(logits=eta).mask(jnp.asarray(x.mask)).to_event(3), obs=x.y
        )
        return
    i = jnp.asarray(x.item)
    eta = alpha[i] * (theta[jnp.asarray(x.model)] - offset[i, jnp.asarray(x.order)])
    if sample_y:
        numpyro.sample("y", dist.Bernoulli(logits=eta).to_event(1))
    else:
        numpyro.sample(
            "y", dist.Bernoulli(logits=eta).mask(jnp.asarray(x.mask)).to_event(1), obs=x.y
        )


def has_item_noise(data: ODIData | ModelInputs) -> bool:
    """Whether the fit has the per-item ordering noise γ (σ_π): only a panel of ≥ 2 models
    identifies it (module docstring)."""
    return data.n_models > 1


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
