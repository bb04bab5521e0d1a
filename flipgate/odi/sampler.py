"""NUTS chains of one ODI fit as one compiled program (docs/definitions.md §4): every chain's
warm-up, draws and any extension run through the same jitted chunk of NumPyro NUTS transitions.

NumPyro's ``MCMC`` traces and compiles its sampler anew for each ``run`` (a fresh ``pmap`` of a
fresh ``partial``): a fit of 4 chains on 2 cores compiled it twice, and once more per extension.
On the audit's small fits compiling, not sampling, took most of the time
(``benchmarks/odi_fits.py``). Here the chains are laid out (devices, chains per device): ``pmap``
over the devices, ``vmap`` over each device's chains, and a ``lax.scan`` of :data:`CHUNK` NUTS
transitions whose first ``n`` are taken (``lax.cond``; ``n`` is traced, so any count reuses the
program). The potential's data are an argument of the programs (NumPyro's functional ``hmc`` with
``potential_fn_gen``), so a later fit of the same sizes and settings reuses them too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, random
from numpyro.infer.hmc import hmc

#: NUTS transitions per call of the compiled chunk
CHUNK = 250


def device_layout(num_chains: int, devices: int) -> tuple[int, int]:
    """(devices used, chains per device): the most devices, up to ``devices``, that divide
    ``num_chains`` evenly (4 chains on 2 cores: 2 × 2; 3 chains on 2 cores: 1 × 3)."""
    used = max(d for d in range(1, min(devices, num_chains) + 1) if num_chains % d == 0)
    return used, num_chains // used


@dataclass(frozen=True)
class Kernel:
    """NUTS settings a compiled chunk is specific to."""

    num_warmup: int
    target_accept: float = 0.8
    adapt_mass: bool = True
    dense_mass: bool = False
    max_tree_depth: int = 10


@lru_cache(maxsize=32)
def _programs(
    potential_of: Callable[..., Any], kernel: Kernel, layout: tuple[int, int], chunk: int, x64: bool
):
    """The compiled start and chunk of NUTS chains on ``potential_of(*args)``, with ``args`` an
    argument of both (traced): every fit of the same sizes and settings reuses them (``x64``:
    JAX's precision, which they are compiled for)."""
    init_kernel, sample_kernel = hmc(potential_fn_gen=potential_of, algo="NUTS")

    def start(key, z, mass, args):
        key = random.split(key)[0]  # as NumPyro's NUTS.init
        return init_kernel(
            z,
            num_warmup=kernel.num_warmup,
            inverse_mass_matrix=mass,
            adapt_mass_matrix=kernel.adapt_mass,
            dense_mass=kernel.dense_mass,
            target_accept_prob=kernel.target_accept,
            max_tree_depth=kernel.max_tree_depth,
            trajectory_length=None,  # as NUTS: its trees are not of a fixed length
            model_args=args,
            rng_key=key,
        )

    def transitions(state, n, args):
        def step(s, k):
            s = lax.cond(k < n, lambda s: sample_kernel(s, args), lambda s: s, s)
            return s, (s.z, s.diverging, s.num_steps)

        return lax.scan(step, state, jnp.arange(chunk))

    shared = (None, None)  # the inverse mass matrix and args: the same for every chain
    return (
        jax.pmap(jax.vmap(start, in_axes=(0, 0, *shared)), in_axes=(0, 0, *shared)),
        jax.pmap(jax.vmap(transitions, in_axes=(0, *shared)), in_axes=(0, *shared)),
    )


class Chains:
    """``num_chains`` NUTS chains on ``potential_of(*args)`` (unconstrained latent dict → negative
    log joint), started at ``init`` (each leaf with a leading chain axis) with ``kernel``'s
    ``num_warmup`` adaptation transitions, ``chunk`` transitions per call of the compiled program;
    :meth:`advance` runs them on and returns what they drew. ``potential_of`` should be one
    module-level function: its compiled programs are kept per (``potential_of``, ``kernel``,
    device layout, ``chunk``) and ``args``' shapes, and reused by every later :class:`Chains`."""

    def __init__(
        self,
        potential_of: Callable[..., Any],
        init: dict,
        key: jax.Array,
        kernel: Kernel,
        inverse_mass: jax.Array | None = None,
        args: tuple = (),
        chunk: int = CHUNK,
    ) -> None:
        self.num_chains = int(jax.tree.leaves(init)[0].shape[0])
        self.chunk = chunk
        self.layout = device_layout(self.num_chains, jax.local_device_count())
        self._args = args
        x64 = bool(jax.config.read("jax_enable_x64"))
        start, self._chunk = _programs(potential_of, kernel, self.layout, chunk, x64)
        self._state = start(
            self._split(random.split(key, self.num_chains)),
            jax.tree.map(self._split, init),
            inverse_mass,
            args,
        )

    def _split(self, x):
        return jnp.reshape(x, self.layout + tuple(x.shape[1:]))

    def _merge(self, x):
        x = np.asarray(x)
        return x.reshape((self.num_chains,) + x.shape[2:])

    def advance(
        self, n: int, keep: bool = True, transform: Callable[[Any], Any] | None = None
    ) -> list[tuple[dict, dict]]:
        """Run every chain ``n`` transitions on from where it stands; with ``keep``, return the
        draws in pieces of at most ``chunk`` (:data:`CHUNK`) per chain: (latent dict, {"diverging",
        "num_steps"}), each leaf (chain, draw, …). ``transform`` maps each piece's latent dict
        (leaves (chain, ``chunk``, …): always the same shapes) before it is cut to its
        draws."""
        pieces = []
        while n > 0:
            m = min(n, self.chunk)
            self._state, (z, diverging, steps) = self._chunk(self._state, m, self._args)
            n -= m
            if keep:
                z = jax.tree.map(self._merge, z)
                z = transform(z) if transform is not None else z
                cut = jax.tree.map(lambda x: np.asarray(x)[:, :m], z)
                extra = {
                    "diverging": self._merge(diverging)[:, :m],
                    "num_steps": self._merge(steps)[:, :m],
                }
                pieces.append((cut, extra))
        return pieces
