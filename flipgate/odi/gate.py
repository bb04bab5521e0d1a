"""ODI thresholds (``facet: odi``, docs/definitions.md §4–§5): one verdict per facet, cell or
outcome a threshold covers, decided on the posterior median and an HDI at the thresholds file's
level; the fit's diagnostics are always gated, at docs/definitions.md §4's bounds unless the file
declares its own.

A model is gated on its *own* fit only (its σ_δ, mean |δ| and diagnostics: :func:`gate`), so
another model's answers cannot move its verdicts. σ_π and the pooled fits' diagnostics are
*panel checks* (:func:`panel_checks`): reported, labelled ``panel``, and gating no model."""

from __future__ import annotations

from flipgate.config import Threshold, ThresholdSet
from flipgate.gate.rules import evaluate
from flipgate.odi.names import ODI_CELL
from flipgate.results import Direction, Verdict, estimates

#: diagnostic metric -> (direction, docs/definitions.md §4 default bound)
DIAGNOSTICS: dict[str, tuple[Direction, float]] = {
    "rhat_max": ("max", 1.01),
    "ess_bulk_min": ("min", 400.0),
    "ess_tail_min": ("min", 400.0),
    "divergences": ("max", 0.0),
}
#: metrics only the panel's pooled fit has (σ_π is identified only through its sharing across
#: models: docs/suites/odi.md), so they are panel checks
PANEL_METRICS = frozenset({"sigma_pi"})
#: the ``model`` a panel check's verdict names
PANEL = "panel"


def is_panel_metric(metric: str) -> bool:
    """Whether ``metric`` (``sigma_pi@option_order`` by its base name) is a panel check."""
    return metric.partition("@")[0] in PANEL_METRICS


def odi_thresholds(ts: ThresholdSet) -> list[Threshold]:
    """The file's ``facet: odi`` thresholds, plus the default diagnostic ones it does not
    declare."""
    declared = [t for t in ts.thresholds if t.facet == ODI_CELL]
    named = {t.metric for t in declared}
    return declared + [
        Threshold(
            m,
            bound,
            direction,
            "point",
            ODI_CELL,
            source="docs/definitions.md §4 default",
            level=ts.level,
        )
        for m, (direction, bound) in DIAGNOSTICS.items()
        if m not in named
    ]


def diagnostic_bounds(threshold_sets) -> dict:
    """:func:`flipgate.odi.diagnostics` keyword bounds: the strictest any of ``threshold_sets``
    gates."""
    bounds = {
        m: [t.bound for ts in threshold_sets for t in odi_thresholds(ts) if t.metric == m]
        for m in DIAGNOSTICS
    }
    return {
        "rhat_max": min(bounds["rhat_max"]),
        "ess_min": max(bounds["ess_bulk_min"] + bounds["ess_tail_min"]),
        "max_divergences": int(min(bounds["divergences"])),
    }


def targets(fit: dict, t: Threshold) -> dict[str, dict]:
    """``{target: {"estimate", "ci"}}`` of threshold ``t`` in a fit summary: the panel's
    (a :func:`flipgate.odi.odi` result) or a model's own (its ``models[m]["own"]``): facets for σ_π
    / σ_δ, (facet/dataset) cells for mean |δ| (narrowed by ``@facet`` and the threshold's
    ``dataset``), outcomes for diagnostics. A facet or cell the fit lacks is not a target."""
    metric, _, only = t.metric.partition("@")
    if metric in DIAGNOSTICS:
        return {o: {"estimate": d[metric]} for o, d in fit.get("diagnostics", {}).items()}
    if metric == "mean_abs_delta":
        return {
            c: {
                "estimate": v["mean_abs_delta"]["estimate"],
                "ci": _ci(v["mean_abs_delta"], t.level),
            }
            for c, v in fit.get("cells", {}).items()
            if only in ("", v["facet"]) and t.dataset in (None, v["dataset"])
        }
    return {
        f: {"estimate": v[metric]["median"], "ci": _ci(v[metric], t.level)}
        for f, v in fit.get("facets", {}).items()
        if only in ("", f) and metric in v
    }


def _ci(interval: dict, level: float) -> list[float] | None:
    """The HDI at the threshold's ``level`` (``cis``), else the summary's gate HDI."""
    return (interval.get("cis") or {}).get(f"{level:g}", interval.get("ci"))


def gate_levels(threshold_sets) -> list[float]:
    """Every CI level an ODI threshold of ``threshold_sets`` is decided at."""
    return sorted({t.level for ts in threshold_sets for t in odi_thresholds(ts)})


def _verdicts(fit: dict, t: Threshold, on_inconclusive: str, readout: str, **context) -> list:
    """One verdict per target of ``t`` in ``fit``; ``missing`` when it covers nothing there."""
    out = []
    covered = targets(fit, t) or {"(not in the fit)": {"estimate": None}}
    for target, est in covered.items():
        (v,) = evaluate(
            [t],
            {"odi": estimates({t.metric: est})},
            "odi",
            on_inconclusive,
            n_items=fit_items(fit),
        )
        out.append(
            v.with_context(
                threshold=f"{t.label} · {target}",
                target=target,
                facet=ODI_CELL,
                readout=readout,
                **context,
            )
        )
    return out


def fit_items(fit: dict) -> int | None:
    """The items a fit summary's HDIs rest on: a model's own fit, or the panel's modal fit."""
    sizes = fit.get("sizes") or {}
    return sizes.get("items") or (sizes.get("modal") or {}).get("items")


def gate(analysis: dict, ts: ThresholdSet, model_id: str) -> list[Verdict]:
    """Verdicts of ``ts``'s per-model ODI thresholds on ``model_id``'s own fit in ``analysis``
    (panel metrics are left to :func:`panel_checks`); a threshold that covers nothing in that fit
    (e.g. ``sigma_delta@image_set_order`` for a text-only model, or a model without an own fit)
    is ``missing``."""
    own = (analysis["models"].get(model_id) or {}).get("own") or {}
    return [
        v
        for t in odi_thresholds(ts)
        if not is_panel_metric(t.metric)
        for v in _verdicts(own, t, ts.on_inconclusive, analysis["readout"], model=model_id)
    ]


def panel_checks(analysis: dict, threshold_sets) -> list[Verdict]:
    """Panel-level checks on the pooled fits: every distinct σ_π threshold and the pooled fits'
    diagnostic bounds of ``threshold_sets`` (the roster's files), each once, their verdicts naming
    model ``panel`` and threshold ``panel · …``. They gate no model."""
    seen: dict[str, tuple[Threshold, str]] = {}
    for ts in threshold_sets:
        for t in odi_thresholds(ts):
            if is_panel_metric(t.metric) or t.metric in DIAGNOSTICS:
                seen.setdefault(t.label, (t, ts.on_inconclusive))
    return [
        v.with_context(threshold=f"{PANEL} · {v.threshold}")
        for t, on_inconclusive in seen.values()
        for v in _verdicts(analysis, t, on_inconclusive, analysis["readout"], model=PANEL)
    ]
