"""ODI, Ordering-Decomposed IRT (docs/definitions.md §4): a Bayesian 2PL decomposition of a trials
table into per-facet ordering noise σ_π, per-cell systematic offsets |δ| and per-model ability θ."""

from flipgate.odi.fit import use_host_devices

use_host_devices()  # before anything starts JAX, so NUTS chains can run on parallel CPU devices

from flipgate.odi.data import ODIData, build, from_trials, outcomes  # noqa: E402
from flipgate.odi.fit import PROFILES, ODIFit, Profile, diagnostics, fit, odi, summarize  # noqa: E402
from flipgate.odi.model import odi_model, reported  # noqa: E402
from flipgate.odi.simulate import SCALES, simulate, simulate_scale  # noqa: E402

__all__ = [
    "PROFILES",
    "SCALES",
    "ODIData",
    "ODIFit",
    "Profile",
    "build",
    "diagnostics",
    "fit",
    "from_trials",
    "odi",
    "odi_model",
    "outcomes",
    "reported",
    "simulate",
    "simulate_scale",
    "summarize",
    "use_host_devices",
]
