"""ODI, Ordering-Decomposed IRT (docs/definitions.md §4): a Bayesian 2PL decomposition of a trials
table into per-facet ordering noise σ_π, per-cell systematic offsets |δ| and per-model ability θ.

Importing the package is cheap: every flipgate process imports it (the suite registry loads
:mod:`flipgate.odi.suite`), and JAX and NumPyro load only with the first name that needs them.
``fit`` and ``simulate`` are the submodules; their functions are ``flipgate.odi.fit.fit`` and
``flipgate.odi.simulate.simulate``."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flipgate.odi.devices import expose_host_cores

expose_host_cores()  # before anything starts JAX, so NUTS chains can run on parallel CPU devices

if TYPE_CHECKING:  # the names of _HOME, for type checkers
    from flipgate.odi.data import ODIData, build, from_trials, outcomes  # noqa: F401
    from flipgate.odi.fit import (  # noqa: F401
        PROFILES,
        ODIFit,
        Profile,
        diagnostics,
        odi,
        summarize,
    )
    from flipgate.odi.model import odi_model, reported  # noqa: F401
    from flipgate.odi.simulate import SCALES, simulate_scale  # noqa: F401

#: public name -> the submodule that defines it (loaded on first use)
_HOME = {
    **dict.fromkeys(("ODIData", "build", "from_trials", "outcomes"), "data"),
    **dict.fromkeys(("PROFILES", "ODIFit", "Profile", "diagnostics", "odi", "summarize"), "fit"),
    **dict.fromkeys(("odi_model", "reported"), "model"),
    **dict.fromkeys(("SCALES", "simulate_scale"), "simulate"),
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
