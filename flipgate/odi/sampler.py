"""NUTS chains of one ODI fit as one compiled program (docs/definitions.md §4): every chain's
warm-up, draws and any extension run through the same jitted chunk of NumPyro NUTS transitions.

NumPyro's ``MCMC`` traces and compiles its sampler anew for each ``run`` (a fresh ``pmap`` of a
fresh ``partial``): a fit of 4 chains on 2 cores compiled it twice, and once more per extension.
On the audit's small fits compiling, not sampling, took most of the time
(``benchmarks/odi_fits.py``). Here the chains are laid out (devices, chains per device): ``pmap``
over the devices, ``vmap`` over each device's chains, and a ``lax.scan`` of :data:`CHUNK` NUTS
transitions whose first ``n`` are taken (``lax.cond``; ``n`` is traced, so any count reuses the
program)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, random
from numpyro.infer import NUTS

#: NUTS transitions per call of the compiled chunk
CHUNK = 250


def device_layout(num_chains: int, devices: int) -> tuple[int, int]:
    """(devices used, chains per device): the most devices, up to ``devices``, that divide
    ``num_chains`` evenly (4 chains on 2 cores: 2 × 2; 3 chains on 2 cores: 1 × 3)."""
    used = max(d for d in range(1, min(devices, num_chains) + 1) if num_chains % d == 0)
    return used, num_chains // used


class Chains:
    """``num_chains`` NUTS chains on ``potential`` (unconstrained latent dict → negative log
    joint), started at ``init`` (each leaf with a leading chain axis) with ``num_warmup``
    adaptation transitions, ``chunk`` transitions per call of the compiled program; :meth:`advance`
    runs them on and returns what they drew."""

    def __init__(
        self,
        potential: Callable[[Any], Any],
        init: dict,
        key: jax.Array,
        num_warmup: int,
        inverse_mass: jax.Array | None = None,
        target_accept: float = 0.8,
        adapt_mass: bool = True,
        dense_mass: bool = False,
        max_tree_depth: int = 10,
        chunk: int = CHUNK,
    ) -> None:
        kernel = NUTS(
            potential_fn=potential,
            target_accept_prob=target_accept,
            inverse_mass_matrix=inverse_mass,
            adapt_mass_matrix=adapt_mass,
            dense_mass=dense_mass,
            max_tree_depth=max_tree_depth,
        )
        self.num_chains = int(jax.tree.leaves(init)[0].shape[0])
        self.chunk = chunk
        self.layout = device_layout(self.num_chains, jax.local_device_count())

        def start(key, z):
            return kernel.init(key, num_warmup, z, (), {})

        def transitions(state, n):
            def step(s, k):
                s = lax.cond(k < n, lambda s: kernel.sample(s, (), {}), lambda s: s, s)
                return s, (s.z, s.diverging, s.num_steps)

            return lax.scan(step, state, jnp.arange(chunk))

        # init traces kernel.sample's set-up (NumPyro fills it in during init), so it comes first
        self._state = jax.pmap(jax.vmap(start))(
            self._split(random.split(key, self.num_chains)), jax.tree.map(self._split, init)
        )
        self._chunk = jax.pmap(jax.vmap(transitions, in_axes=(0, None)), in_axes=(0, None))

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
            self._state, (z, diverging, steps) = self._chunk(self._state, m)
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
