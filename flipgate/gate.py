"""Threshold decision rules (SPEC §5).

``point``: pass iff the estimate is within the bound. ``upper`` (conformance must be proven):
pass iff the whole CI is within the bound. ``lower`` (violation must be proven, default): fail iff
the whole CI is outside the bound. Anything else is "inconclusive". ``warn`` never fails.
"""
from __future__ import annotations

import math

from flipgate.config import Threshold
from flipgate.metrics import bootstrap_p_value


def _within(value: float, t: Threshold) -> bool:
    return value <= t.bound if t.direction == "max" else value >= t.bound


def decide(t: Threshold, estimate: float, lo: float | None = None, hi: float | None = None) -> str:
    """'pass', 'fail', 'inconclusive', 'warn' (a warn-rule violation) or 'missing' (no estimate)."""
    if estimate is None or math.isnan(estimate):
        return "missing"
    if t.rule == "warn":
        return "pass" if _within(estimate, t) else "warn"
    if t.rule == "point" or lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return "pass" if _within(estimate, t) else "fail"
    inside = _within(lo, t) and _within(hi, t)
    outside = not _within(lo, t) and not _within(hi, t)
    if t.rule == "upper":
        return "pass" if inside else ("fail" if outside else "inconclusive")
    return "fail" if outside else ("pass" if inside else "inconclusive")  # lower


def evaluate(thresholds: list[Threshold], metrics: dict[str, dict], readout: str) -> list[dict]:
    """Apply each threshold to a summary ``{readout: {metric: {estimate, ci}}}``. Where the
    summary kept bootstrap draws, the verdict carries the one-sided bootstrap p-value of a
    violation (for Benjamini–Hochberg across cells)."""
    results = []
    for t in thresholds:
        block = metrics.get(t.readout or readout, {})
        m = block.get(t.metric)
        est, lo, hi = (None, None, None) if m is None else (m["estimate"], *(m.get("ci") or (None, None)))
        draws = getattr(block, "draws", {}).get(t.metric)
        p_value = bootstrap_p_value(draws, t.bound, t.direction) if draws is not None else None
        results.append({"threshold": t.label, "metric": t.metric, "bound": t.bound, "direction": t.direction,
                        "rule": t.rule, "readout": t.readout or readout, "estimate": est,
                        "ci": [lo, hi] if lo is not None else None, "verdict": decide(t, est, lo, hi),
                        "p_value": None if p_value is None or math.isnan(p_value) else p_value,
                        "source": t.source})
    return results
