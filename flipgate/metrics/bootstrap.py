"""Item-clustered percentile bootstrap (docs/definitions.md §3 ``bootstrap_ci``; Facet-Probe
App. D)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

Estimate = tuple[float, float, float]


def bootstrap_draws(
    values: Sequence[float], cluster: Sequence | None = None, n: int = 1000, seed: int = 42
) -> np.ndarray:
    """Resampled means: whole clusters (items) drawn with replacement, NaNs dropped first.
    The resampled mean weights clusters by their size. Empty input gives no draws."""
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    values = values[keep]
    if values.size == 0:
        return np.empty(0)
    if cluster is None:
        sums, counts = values, np.ones_like(values)
    else:
        _, codes = np.unique(np.asarray(cluster)[keep], return_inverse=True)
        sums = np.bincount(codes, weights=values)
        counts = np.bincount(codes).astype(float)
    idx = np.random.default_rng(seed).integers(0, sums.size, size=(n, sums.size))
    return sums[idx].sum(axis=1) / counts[idx].sum(axis=1)


def paired_bootstrap_draws(
    a: Sequence[float], b: Sequence[float], n: int = 1000, seed: int = 42
) -> np.ndarray:
    """Resampled mean(a) − mean(b), the same items drawn for both arms; items where either
    arm is NaN are dropped."""
    a, b = _paired(a, b)
    if a.size == 0:
        return np.empty(0)
    idx = np.random.default_rng(seed).integers(0, a.size, size=(n, a.size))
    return a[idx].mean(axis=1) - b[idx].mean(axis=1)


def _paired(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired arms differ in length: {a.shape} vs {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    return a[keep], b[keep]


def _interval(estimate: float, draws: np.ndarray, level: float) -> Estimate:
    if draws.size == 0:
        return float("nan"), float("nan"), float("nan")
    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return float(estimate), float(lo), float(hi)


def bootstrap_ci(
    values: Sequence[float],
    cluster: Sequence | None = None,
    n: int = 1000,
    level: float = 0.95,
    seed: int = 42,
) -> Estimate:
    """Percentile bootstrap of the mean over clusters (items). Returns (estimate, lo, hi)."""
    arr = np.asarray(values, dtype=float)
    estimate = float(np.nanmean(arr)) if np.any(~np.isnan(arr)) else float("nan")
    return _interval(estimate, bootstrap_draws(values, cluster, n, seed), level)


def paired_bootstrap_ci(
    a: Sequence[float], b: Sequence[float], n: int = 1000, level: float = 0.95, seed: int = 42
) -> Estimate:
    """Bootstrap CI of mean(a) − mean(b), resampling the same items for both arms."""
    pa, pb = _paired(a, b)
    estimate = float(pa.mean() - pb.mean()) if pa.size else float("nan")
    return _interval(estimate, paired_bootstrap_draws(a, b, n, seed), level)
