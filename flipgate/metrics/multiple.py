"""Multiple-testing control when many cells are gated at once (Benjamini–Hochberg)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def bootstrap_p_value(draws: Sequence[float], bound: float, direction: str) -> float:
    """One-sided bootstrap p-value that the metric violates ``bound`` (H0: within bound).

    ``direction`` "max": violation means metric > bound; "min": metric < bound.
    """
    draws = np.asarray(draws, dtype=float)
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return float("nan")
    within = np.sum(draws <= bound) if direction == "max" else np.sum(draws >= bound)
    return float((within + 1) / (draws.size + 1))


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """BH step-up adjusted p-values (q-values), same order as given; NaN stays NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    idx = np.flatnonzero(~np.isnan(p))
    if idx.size == 0:
        return out.tolist()
    order = idx[np.argsort(p[idx])]
    m = idx.size
    ranked = p[order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]
    out[order] = np.minimum(adjusted, 1.0)
    return out.tolist()
