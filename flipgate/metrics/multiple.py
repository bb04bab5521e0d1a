"""Multiple-testing control when many cells are gated at once (Benjamini–Hochberg)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import numpy.typing as npt


def bootstrap_p_value(draws: npt.ArrayLike, bound: float, direction: str) -> float:
    """One-sided bootstrap p-value that the metric violates ``bound`` (H0: within bound).

    ``direction`` "max": violation means metric > bound; "min": metric < bound.
    """
    arr = np.asarray(draws, dtype=float)
    arr = arr[~np.isnan(arr)]
    if arr.size == 0:
        return float("nan")
    within = np.sum(arr <= bound) if direction == "max" else np.sum(arr >= bound)
    return float((within + 1) / (arr.size + 1))


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """BH step-up adjusted p-values (q-values), same order as given; NaN stays NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    if idx.size == 0:
        empty: list[float] = out.tolist()
        return empty
    order = idx[np.argsort(p[idx])]
    m = idx.size
    ranked = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]
    out[order] = np.minimum(adjusted, 1.0)
    q_values: list[float] = out.tolist()
    return q_values
