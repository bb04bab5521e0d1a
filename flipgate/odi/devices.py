"""NUTS chains on parallel CPU devices: XLA is asked for one host device per core before JAX
starts its backend, without importing JAX (most flipgate processes never fit ODI)."""

from __future__ import annotations

import os
import sys

#: XLA's flag for the number of CPU devices (what ``numpyro.set_host_device_count`` sets)
FLAG = "--xla_force_host_platform_device_count"


def expose_host_cores(n: int | None = None) -> bool:
    """Set ``XLA_FLAGS`` so JAX offers ``n`` (default: all) CPU cores as devices, keeping the other
    flags. Effective only before JAX starts its backend; returns False (and changes nothing) once it
    has."""
    if "jax" in sys.modules:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            return False
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(FLAG + "=")]
    os.environ["XLA_FLAGS"] = " ".join([f"{FLAG}={n or os.cpu_count() or 1}", *kept])
    return True
