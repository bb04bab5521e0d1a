"""Threshold decision rules (docs/thresholds.md; docs/definitions.md §5).

A verdict has a *label* (what the CI says about the bound) and an *outcome* (what the release
gate does with it). Labels: ``pass``, ``fail``, ``inconclusive`` (the CI straddles the bound),
``warn`` (a ``warn``-rule bound exceeded) or ``missing`` (no estimate). Rules:

- ``point``: pass iff the estimate is within the bound (no CI used);
- ``upper`` — conformance must be proven: pass only when the whole CI is inside the bound; a
  straddling CI is "not proven" (label ``inconclusive``) and **fails**;
- ``lower`` — violation must be proven (the default): fail only when the whole CI is beyond the
  bound; a straddling CI is ``inconclusive`` and **passes with a warning**;
- ``warn``: never fails.

``on_inconclusive`` (thresholds file): ``by_rule`` (default, as above) or ``warn`` / ``xfail`` /
``fail``, which override what a straddling CI does under both rules. Every CI a gate uses is
computed at the threshold's own ``level`` from the bootstrap draws where they were kept; for a
mean of per-item values in [0, 1] it is widened to the Wilson score interval over its items, so
a handful of items can never prove conformance (flipgate.metrics.proportion).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from flipgate.config import Threshold
from flipgate.metrics import bootstrap_p_value
from flipgate.metrics.onesided import Looks
from flipgate.metrics.proportion import small_n_hull
from flipgate.metrics.sequential import ItemValues
from flipgate.metrics.threshold_tests import decide_mean, pending_fixed
from flipgate.metrics.undecided import AFFORDABLE, n_star_by_interval, n_star_by_test, undecided
from flipgate.results import Label, MetricEstimate, Outcome, Verdict

#: what a straddling CI does: ``by_rule`` follows the rule (upper fails, lower warns)
ON_INCONCLUSIVE = ("by_rule", "warn", "xfail", "fail")
#: a verdict's ``interval`` (shown, never deciding: docs/definitions.md §12.6): a sequential
#: cell's confidence sequence, or a fixed-N cell's bootstrap CI
SEQUENCE = "confidence_sequence"
BOOTSTRAP = "bootstrap"
#: gate outcomes, least to most severe
OUTCOMES = ("pass", "warn", "xfail", "fail")


def within(value: float, t: Threshold) -> bool:
    """Whether ``value`` is on the allowed side of ``t``'s bound (the bound included)."""
    return value <= t.bound if t.direction == "max" else value >= t.bound


def _number(x: float | None) -> float | None:
    """``x``, or None when it is missing (None or NaN)."""
    return None if x is None or math.isnan(x) else x


def decide(
    t: Threshold, estimate: float | None, lo: float | None = None, hi: float | None = None
) -> Label:
    """The verdict label: 'pass', 'fail', 'inconclusive', 'warn' or 'missing' (no estimate).
    Without a CI, ``upper`` and ``lower`` fall back to the point rule."""
    estimate, lo, hi = _number(estimate), _number(lo), _number(hi)
    if estimate is None:
        return "missing"
    if t.rule == "warn":
        return "pass" if within(estimate, t) else "warn"
    if t.rule == "point" or lo is None or hi is None:
        return "pass" if within(estimate, t) else "fail"
    inside = within(lo, t) and within(hi, t)
    outside = not within(lo, t) and not within(hi, t)
    return "pass" if inside else ("fail" if outside else "inconclusive")


def outcome(label: Label, rule: str, on_inconclusive: str = "by_rule") -> Outcome:
    """What the gate does with a verdict ``label``: 'pass', 'warn', 'xfail' or 'fail'."""
    if label in ("fail", "missing"):
        return "fail"
    if label == "warn":
        return "warn"
    if label != "inconclusive":
        return "pass"
    if on_inconclusive == "by_rule":
        return "fail" if rule == "upper" else "warn"
    if on_inconclusive not in OUTCOMES:
        raise ValueError(f"on_inconclusive {on_inconclusive!r}: not one of {ON_INCONCLUSIVE}")
    return cast(Outcome, on_inconclusive)


def ci_at(draws: npt.ArrayLike, level: float) -> tuple[float, float] | None:
    """Percentile interval of bootstrap ``draws`` at ``level`` (None without draws)."""
    values = np.asarray(draws, dtype=float)
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    lo, hi = np.quantile(values, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def verdict(
    t: Threshold,
    estimate: float | None,
    ci: Sequence[float | None] | None,
    on_inconclusive: str = "by_rule",
    readout: str | None = None,
    p_value: float | None = None,
    tested: Label | None = None,
    n_items: int | None = None,
    **context: Any,
) -> Verdict:
    """Threshold ``t`` decided on ``estimate`` and its ``ci`` — or, with ``tested``, the label
    its one-sided tests gave (docs/definitions.md §12; the CI is then only shown); ``context``:
    the verdict's ``facet`` (its cell) and, for some gates, ``model``, ``target``, ``mcnemar``,
    ``interval``, ``test`` or ``undecided``. A ``lower``/``upper`` verdict its CI left
    undecided says why from the ``n_items`` units behind the estimate (docs/definitions.md
    §12.8: :func:`~flipgate.metrics.undecided.n_star_by_interval`)."""
    lo, hi = ci if ci else (None, None)
    missing = _number(estimate) is None
    label = decide(t, estimate, lo, hi) if tested is None or missing else tested
    if (
        label == "inconclusive"
        and tested is None  # a tested verdict's reason comes from its tests (tested_verdict)
        and n_items
        and estimate is not None
        and lo is not None
        and hi is not None
    ):
        n_star = n_star_by_interval(float(estimate), (lo, hi), t.bound, n_items)
        context["undecided"] = undecided(n_star, n_items, float(estimate), t.bound, "interval")
    return Verdict(
        threshold=t.label,
        metric=t.metric,
        bound=t.bound,
        direction=t.direction,
        rule=t.rule,
        level=t.level,
        readout=readout or t.readout,
        estimate=estimate,
        ci=(lo, hi) if lo is not None else None,
        verdict=label,
        outcome=outcome(label, t.rule, on_inconclusive),
        p_value=p_value,
        source=t.source,
        why=t.why,
        **context,
    )


def evaluate(
    thresholds: list[Threshold],
    metrics: Mapping[str, Mapping[str, MetricEstimate]],
    readout: str,
    on_inconclusive: str = "by_rule",
    sequences: Mapping[tuple[str, str], ItemValues] | None = None,
    looks: Looks | None = None,
    planned: int | None = None,
    n_items: int | None = None,
    **context: Any,
) -> list[Verdict]:
    """Apply each threshold to the estimates ``{readout: {metric: MetricEstimate}}``. Where an
    estimate kept its bootstrap draws, the CI is recomputed at the threshold's level and the
    verdict carries the one-sided bootstrap p-value of a violation (for Benjamini–Hochberg across
    cells).

    A cell that gives its per-item values as ``sequences`` (``{(readout, metric):
    ItemValues}``) has each ``lower``/``upper`` threshold on one of them decided by two one-sided
    tests (docs/definitions.md §12, :func:`~flipgate.metrics.threshold_tests.decide_mean`): on
    the cell's look grid ``looks`` when it drew sequentially, else as a fixed-N run. The verdict
    names the deciding test (``test``); its interval is shown for reading only (``interval``:
    ``confidence_sequence`` for a sequential cell, else the bootstrap CI). ``planned``: fixed-N
    tests that wait for that many items (a regression case of a sequential candidate:
    flipgate.regression.hold); with fewer the verdict is undecided. ``n_items``: the units behind
    an estimate that does not say (its ``n_units`` or ``n_items``), from which a verdict its CI
    left undecided says why (:func:`verdict`). ``context`` is given to every verdict."""
    results = []
    for t in thresholds:
        r = t.readout or readout
        m = metrics.get(r, {}).get(t.metric)
        draws = None if m is None else m.draws
        p_value = bootstrap_p_value(draws, t.bound, t.direction) if draws is not None else None
        values = (sequences or {}).get((r, t.metric))
        if values is not None and values.drawn and t.rule in ("lower", "upper"):
            results.append(
                tested_verdict(t, values, looks, m, on_inconclusive, r, p_value, planned, **context)
            )
            continue
        est = None if m is None else m.estimate
        ci = ci_at(draws, t.level) if draws is not None else (None if m is None else m.ci)
        lo, hi = ci if ci else (None, None)
        if m and m.n_units and lo is not None and hi is not None and est is not None:
            ci = small_n_hull((lo, hi), float(est), m.n_units, t.level)  # no proof from few items
        n = (m.n_units or m.n_items if m else None) or n_items
        results.append(verdict(t, est, ci, on_inconclusive, r, p_value, n_items=n, **context))
    return results


def tested_verdict(
    t: Threshold,
    values: ItemValues,
    looks: Looks | None,
    shown: MetricEstimate | None,
    on_inconclusive: str,
    readout: str,
    p_value: float | None,
    planned: int | None = None,
    **context: Any,
) -> Verdict:
    """A ``lower``/``upper`` threshold decided by its two one-sided tests on ``values``; the
    label is ``pass`` or ``fail`` when a test rejected, else ``inconclusive`` (the rule decides
    its outcome). The interval shown beside it: the confidence sequence of a sequential cell,
    else the bootstrap CI of ``shown`` at the threshold's level."""
    alpha = 1 - t.level
    decided = (
        decide_mean(values, t.bound, t.direction, alpha, looks)
        if planned is None
        else pending_fixed(values, t.bound, t.direction, alpha, planned)
    )
    label: Label = decided.decision or "inconclusive"
    if label == "inconclusive" and values.n:
        cap = looks.cap if looks is not None else (planned or values.drawn)
        n_star = n_star_by_test(values, t.bound, t.direction, alpha, AFFORDABLE * cap)
        context["undecided"] = undecided(n_star, cap, values.estimate, t.bound, "test")
    if looks is not None:
        ci: tuple[float | None, float | None] | None = values.sequence(t.level)
        extra: dict[str, Any] = {"interval": SEQUENCE}
    else:
        draws = None if shown is None else shown.draws
        ci = ci_at(draws, t.level) if draws is not None else (None if shown is None else shown.ci)
        extra = {"interval": BOOTSTRAP}
    return verdict(
        t,
        _number(values.estimate),
        ci,
        on_inconclusive,
        readout,
        p_value,
        label,
        test=decided.describe(),
        **extra,
        **context,
    )


def decided_line(verdicts: Sequence[Verdict]) -> str | None:
    """The run's decided share in one line: of its ``lower``/``upper`` verdicts with an estimate,
    how many were decided, and why the others were not (docs/definitions.md §12.8); None
    without any."""
    ruled = [v for v in verdicts if v.rule in ("lower", "upper") and v.verdict != "missing"]
    if not ruled:
        return None
    left = [v.undecided for v in ruled if v.verdict == "inconclusive"]
    reasons = [u.reason for u in left if u is not None]
    under = reasons.count("under-powered")
    tail = (
        f"; undecided: {under} under-powered (n* ≤ {AFFORDABLE} × the cap), "
        f"{reasons.count('at its bound')} at their bound"
        if left
        else ""
    )
    unexplained = len(left) - len(reasons)
    tail += f", {unexplained} without a reason" if unexplained else ""
    return f"decided {len(ruled) - len(left)} of {len(ruled)} lower/upper verdicts" + tail
