"""Item-clustered percentile bootstrap (docs/definitions.md §3 ``bootstrap_ci``; Facet-Probe
App. D)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Estimate = tuple[float, float, float]


def bootstrap_draws(
    values: npt.ArrayLike, cluster: npt.ArrayLike | None = None, n: int = 1000, seed: int = 42
) -> npt.NDArray[np.float64]:
    """Resampled means: whole clusters (items) drawn with replacement, NaNs dropped first.
    The resampled mean weights clusters by their size. Empty input gives no draws."""
    arr = np.asarray(values, dtype=float)
    keep = ~np.isnan(arr)
    arr = arr[keep]
    if arr.size == 0:
        return np.empty(0)
    sums: npt.NDArray[np.float64]
    counts: npt.NDArray[np.float64]
    if cluster is None:
        sums, counts = arr, np.ones_like(arr)
    else:
        _, codes = np.unique(np.asarray(cluster)[keep], return_inverse=True)
        # float64 already (weighted); asarray only tells the stubs, which say intp
        sums = np.asarray(np.bincount(codes, weights=arr), dtype=float)
        counts = np.bincount(codes).astype(float)
    idx = np.random.default_rng(seed).integers(0, sums.size, size=(n, sums.size))
    out: npt.NDArray[np.float64] = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    return out


def paired_bootstrap_draws(
    a: npt.ArrayLike, b: npt.ArrayLike, n: int = 1000, seed: int = 42
) -> npt.NDArray[np.float64]:
    """Resampled mean(a) − mean(b), the same items drawn for both arms; items where either
    arm is NaN are dropped."""
    pa, pb = _paired(a, b)
    if pa.size == 0:
        return np.empty(0)
    idx = np.random.default_rng(seed).integers(0, pa.size, size=(n, pa.size))
    out: npt.NDArray[np.float64] = pa[idx].mean(axis=1) - pb[idx].mean(axis=1)
    return out


def _paired(
    a: npt.ArrayLike, b: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError(f"paired arms differ in length: {xa.shape} vs {xb.shape}")
    keep = ~(np.isnan(xa) | np.isnan(xb))
    return xa[keep], xb[keep]


def _interval(estimate: float, draws: npt.NDArray[np.float64], level: float) -> Estimate:
    if draws.size == 0:
        return float("nan"), float("nan"), float("nan")
    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return float(estimate), float(lo), float(hi)


def bootstrap_ci(
    values: npt.ArrayLike,
    cluster: npt.ArrayLike | None = None,
    n: int = 1000,
    level: float = 0.95,
    seed: int = 42,
) -> Estimate:
    """Percentile bootstrap of the mean over clusters (items). Returns (estimate, lo, hi)."""
    arr = np.asarray(values, dtype=float)
    estimate = float(np.nanmean(arr)) if np.any(~np.isnan(arr)) else float("nan")
    return _interval(estimate, bootstrap_draws(values, cluster, n, seed), level)


def paired_bootstrap_ci(
    a: npt.ArrayLike, b: npt.ArrayLike, n: int = 1000, level: float = 0.95, seed: int = 42
) -> Estimate:
    """Bootstrap CI of mean(a) − mean(b), resampling the same items for both arms."""
    pa, pb = _paired(a, b)
    estimate = float(pa.mean() - pb.mean()) if pa.size else float("nan")
    return _interval(estimate, paired_bootstrap_draws(a, b, n, seed), level)
