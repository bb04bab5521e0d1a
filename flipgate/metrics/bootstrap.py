"""Item-clustered percentile bootstrap (SPEC §3 ``bootstrap_ci``; FP App. D)."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def bootstrap_ci(values: Sequence[float], cluster: Sequence | None = None, n: int = 1000,
                 level: float = 0.95, seed: int = 42) -> tuple[float, float, float]:
    """Percentile bootstrap of the mean over clusters (items). Returns (estimate, lo, hi).

    ``values`` are per-trial or per-item numbers; with ``cluster`` each resample draws whole
    clusters with replacement (the resampled mean weights clusters by their size). NaNs are
    dropped first.
    """
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    values = values[keep]
    if values.size == 0:
        return float("nan"), float("nan"), float("nan")
    if cluster is None:
        sums, counts = values, np.ones_like(values)
    else:
        _, codes = np.unique(np.asarray(cluster)[keep], return_inverse=True)
        sums = np.bincount(codes, weights=values)
        counts = np.bincount(codes).astype(float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, sums.size, size=(n, sums.size))
    stats = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(values.mean()), float(lo), float(hi)


def paired_bootstrap_ci(a: Sequence[float], b: Sequence[float], n: int = 1000, level: float = 0.95,
                        seed: int = 42) -> tuple[float, float, float]:
    """Bootstrap CI of mean(a) − mean(b), resampling the same items for both arms.

    ``a[i]`` and ``b[i]`` belong to item i; items where either is NaN are dropped.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired arms differ in length: {a.shape} vs {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    a, b = a[keep], b[keep]
    if a.size == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(n, a.size))
    diffs = a[idx].mean(axis=1) - b[idx].mean(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(diffs, [alpha, 1 - alpha])
    return float(a.mean() - b.mean()), float(lo), float(hi)
