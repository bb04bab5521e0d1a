"""Seconds per gradient of the ODI potential (flipgate.odi.model) on the dense model × item ×
ordering grid beside per trial, side by side on the same data, across grid sizes and densities:
what :data:`flipgate.odi.model.DENSE_GRID` and ``DENSE_MIN`` rest on.

    python benchmarks/odi_likelihood.py [--repeats 2000]

Each row simulates M models × a panel of 5 cells (flipgate.odi.simulate), keeps a share of the
trials at random, pads as a fit does (``model_inputs(pad=True)``) and times the jitted gradient at
the prior means; it prints µs per gradient for each path and their ratio, then the machine load.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import time

import jax
import numpy as np
from numpyro.infer.util import potential_energy

from flipgate.odi import model
from flipgate.odi.fit import _prior_means
from flipgate.odi.simulate import simulate

#: (models, items per cell, share of trials kept)
ROWS = [(2, 44, 0.5), (2, 44, 0.3), (4, 44, 0.25), (4, 100, 0.25), (4, 200, 0.25), (4, 200, 0.1)]
PER_TRIAL = {"model", "item", "order", "cell", "facet", "y"}


def microseconds(data, dense: bool, repeats: int) -> float:
    """µs per jitted gradient of ``data``'s padded potential on one path."""
    saved = model.DENSE_MIN, model.DENSE_GRID
    model.DENSE_MIN, model.DENSE_GRID = (0.0, saved[1]) if dense else (2.0, 0)
    try:
        inputs = model.model_inputs(data, pad=True)
    finally:
        model.DENSE_MIN, model.DENSE_GRID = saved
    assert inputs.dense is dense
    z = _prior_means(inputs)
    grad = jax.jit(jax.grad(lambda z, x: potential_energy(model.odi_model, (x,), {}, z)))
    jax.block_until_ready(grad(z, inputs))
    t0 = time.perf_counter()
    for _ in range(repeats):
        out = grad(z, inputs)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / repeats * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=2000)
    args = ap.parse_args()
    facets = {"a": 0.3, "b": 0.5, "c": 0.4}
    for m, per_cell, share in ROWS:
        data, _ = simulate(m, facets, datasets=(2, 1, 2), items_per_cell=per_cell, seed=1)
        keep = np.random.default_rng(0).random(data.n) < share
        data = dataclasses.replace(data, **{k: getattr(data, k)[keep] for k in PER_TRIAL})
        grid = m * model.padded_size(len(data.items), model.PAD_LEAST["items"]) * data.k
        dense, per_trial = (microseconds(data, d, args.repeats) for d in (True, False))
        print(
            f"M={m} items={len(data.items)} trials={data.n} density={data.density:.2f} "
            f"padded grid={grid}: dense {dense:.1f} µs, per trial {per_trial:.1f} µs, "
            f"dense/per-trial {dense / per_trial:.2f}",
            flush=True,
        )
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
