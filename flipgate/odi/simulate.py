"""Simulated ODI data with known truth, drawn from :func:`flipgate.odi.model.odi_model` itself."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
from jax import random
from numpyro import handlers

from flipgate import FlipgateError
from flipgate.odi.data import ODIData
from flipgate.odi.model import odi_model, reported

#: (models, facets, datasets per facet, items per cell) of the benchmark scales; "paper" is
#: Facet-Probe's panel: 18 models, 5 facets, 12 cells, ~3,600 items, K=6 (~390k trials)
SCALES: dict[str, tuple[int, int, int | tuple[int, ...], int]] = {
    "small": (4, 2, 1, 40),
    "medium": (8, 3, 2, 100),
    "paper": (18, 5, (2, 2, 2, 3, 3), 300),
}


def full_design(
    n_models: int, cells: list[tuple[str, str]], items_per_cell: int, k: int = 6
) -> ODIData:
    """A complete model × item × ordering design (y all zero) over ``cells``."""
    facets = sorted({f for f, _ in cells})
    items = [(f, d, f"{f}/{d}/{j}") for f, d in cells for j in range(items_per_cell)]
    m, i, o = (
        a.ravel().astype(np.int32)
        for a in np.meshgrid(
            np.arange(n_models), np.arange(len(items)), np.arange(k), indexing="ij"
        )
    )
    item_cell = np.repeat(np.arange(len(cells), dtype=np.int32), items_per_cell)
    cell_facet = np.array([facets.index(f) for f, _ in cells], dtype=np.int32)
    return ODIData(
        model=m,
        item=i,
        order=o,
        cell=item_cell[i],
        facet=cell_facet[item_cell[i]],
        y=np.zeros(m.size),
        item_cell=item_cell,
        cell_facet=cell_facet,
        models=[f"m{j}" for j in range(n_models)],
        items=items,
        cells=list(cells),
        facets=facets,
        k=k,
    )


def simulate(
    n_models: int = 4,
    sigma_pi: dict[str, float] | None = None,
    datasets: int | tuple = 1,
    items_per_cell: int = 40,
    k: int = 6,
    tau_pi: float = 0.05,
    sigma_delta: float = 0.2,
    seed: int = 0,
) -> tuple[ODIData, dict]:
    """Simulate one outcome from the ODI model. ``sigma_pi`` maps facet -> exp(μ_f), the facet's
    typical σ_π,i (default two facets, 0.3 and 1.0); ``datasets`` is the number of datasets per
    facet (or one count per facet). θ, β, α and δ's z-scores are drawn from their priors. Returns
    the data and its truth: the latent values (``latent``) and :func:`reported` of them."""
    sigma_pi = sigma_pi or {"low": 0.3, "high": 1.0}
    counts = (datasets,) * len(sigma_pi) if isinstance(datasets, int) else tuple(datasets)
    if len(counts) != len(sigma_pi) or n_models < 2 or items_per_cell < 1 or k < 2:
        raise FlipgateError(
            f"simulate needs ≥2 models, ≥1 item per cell, K ≥ 2 and one dataset count per "
            f"facet; got {n_models} models, {items_per_cell} items, K={k}, datasets={datasets}"
        )
    cells = [(f, f"d{j}") for f, n in zip(sigma_pi, counts) for j in range(n)]
    data = full_design(n_models, cells, items_per_cell, k)
    rng = np.random.default_rng(seed)
    n_i, n_c = len(data.items), len(data.cells)
    latent = {
        "theta_z": rng.normal(size=n_models - 1),
        "mu_beta": rng.normal(size=n_c),
        "sigma_beta": np.abs(rng.normal(0, 0.5, n_c)),
        "z_beta": rng.normal(size=n_i),
        "alpha": rng.lognormal(0, 0.3, n_i),
        "sigma_delta": np.full(len(data.facets), sigma_delta),
        "z_delta": rng.normal(size=(n_c, k)),
        "mu_pi": np.log([sigma_pi[f] for f in data.facets]),
        "tau_pi": np.full(len(data.facets), tau_pi),
        "z_pi": rng.normal(size=n_i),
        "z_gamma": rng.normal(size=(n_i, k)),
    }
    model = handlers.seed(handlers.condition(odi_model, latent), random.PRNGKey(seed))
    y = np.asarray(
        handlers.trace(model).get_trace(data, sample_y=True)["y"]["value"], dtype=np.float64
    )
    data = replace(data, y=y)
    return data, {"latent": latent, **reported(latent, data)}


def simulate_scale(scale: str, seed: int = 0, **kwargs) -> tuple[ODIData, dict]:
    """:func:`simulate` at a named :data:`SCALES` size, facets' σ_π spread over 0.15…0.6."""
    if scale not in SCALES:
        raise FlipgateError(f"unknown ODI scale {scale!r}; choose from {list(SCALES)}")
    n_models, n_facets, datasets, items = SCALES[scale]
    sigma_pi = {f"f{j}": float(s) for j, s in enumerate(np.geomspace(0.15, 0.6, n_facets))}
    return simulate(n_models, sigma_pi, datasets, items, seed=seed, **kwargs)


def one_model(data: ODIData, model: int) -> ODIData:
    """``data``'s trials of its ``model``-th model alone (what that model's own fit sees)."""
    keep = data.model == model
    per_trial = {k: getattr(data, k)[keep] for k in ("item", "order", "cell", "facet", "y")}
    return replace(
        data, model=np.zeros(int(keep.sum()), np.int32), models=[data.models[model]], **per_trial
    )


def to_trials(data: ODIData, readout: str = "sim") -> pd.DataFrame:
    """``data`` as a trials table (:data:`flipgate.odi.data.TRIAL_COLUMNS`): y = 1 answers "A"
    (gold), y = 0 a wrong answer of its own per ordering, so the modal outcome recomputed from the
    answers is y wherever "A" is the item's untied mode."""
    return pd.DataFrame(
        {
            "model_id": [data.models[m] for m in data.model],
            "facet": [data.items[i][0] for i in data.item],
            "dataset": [data.items[i][1] for i in data.item],
            "item_id": [data.items[i][2] for i in data.item],
            "condition": data.order,
            "mapped": [{readout: "A" if y else f"B{o}"} for y, o in zip(data.y, data.order)],
            "correct": [{readout: bool(y)} for y in data.y],
        }
    )
