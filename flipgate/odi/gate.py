"""ODI thresholds (``facet: odi``, docs/definitions.md §4–§5): one verdict per facet, cell or
outcome a threshold covers, decided on the posterior median and an HDI at the thresholds file's
level; the fit's diagnostics are always gated, at docs/definitions.md §4's bounds unless the file
declares its own."""

from __future__ import annotations

from flipgate.config import Threshold, ThresholdSet
from flipgate.gate import evaluate
from flipgate.odi.suite import ODI_CELL
from flipgate.results import Direction, Verdict, estimates

#: diagnostic metric -> (direction, docs/definitions.md §4 default bound)
DIAGNOSTICS: dict[str, tuple[Direction, float]] = {
    "rhat_max": ("max", 1.01),
    "ess_bulk_min": ("min", 400.0),
    "ess_tail_min": ("min", 400.0),
    "divergences": ("max", 0.0),
}


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


def targets(analysis: dict, t: Threshold) -> dict[str, dict]:
    """``{target: {"estimate", "ci"}}`` of threshold ``t`` in an :func:`flipgate.odi.odi` result:
    facets for σ_π / σ_δ, (facet/dataset) cells for mean |δ| (narrowed by ``@facet`` and the
    threshold's ``dataset``), outcomes for diagnostics."""
    metric, _, only = t.metric.partition("@")
    if metric in DIAGNOSTICS:
        return {o: {"estimate": d[metric]} for o, d in analysis["diagnostics"].items()}
    if metric == "mean_abs_delta":
        return {
            c: {
                "estimate": v["mean_abs_delta"]["estimate"],
                "ci": _ci(v["mean_abs_delta"], t.level),
            }
            for c, v in analysis["cells"].items()
            if only in ("", v["facet"]) and t.dataset in (None, v["dataset"])
        }
    return {
        f: {"estimate": v[metric]["median"], "ci": _ci(v[metric], t.level)}
        for f, v in analysis["facets"].items()
        if only in ("", f)
    }


def _ci(interval: dict, level: float) -> list[float] | None:
    """The HDI at the threshold's ``level`` (``cis``), else the summary's gate HDI."""
    return (interval.get("cis") or {}).get(f"{level:g}", interval.get("ci"))


def gate_levels(threshold_sets) -> list[float]:
    """Every CI level an ODI threshold of ``threshold_sets`` is decided at."""
    return sorted({t.level for ts in threshold_sets for t in odi_thresholds(ts)})


def gate(analysis: dict, ts: ThresholdSet, model_id: str | None = None) -> list[Verdict]:
    """Verdicts of every ODI threshold in ``ts`` on ``analysis``; a threshold that covers nothing in
    the fit (e.g. ``sigma_pi@image_set_order`` when no model took images) is ``missing``."""
    verdicts = []
    for t in odi_thresholds(ts):
        covered = targets(analysis, t) or {"(not in the fit)": {"estimate": None}}
        for target, est in covered.items():
            (v,) = evaluate([t], {"odi": estimates({t.metric: est})}, "odi", ts.on_inconclusive)
            context = {"model": model_id} if model_id is not None else {}
            v = v.with_context(
                threshold=f"{t.label} · {target}",
                target=target,
                facet=ODI_CELL,
                readout=analysis["readout"],
                **context,
            )
            verdicts.append(v)
    return verdicts
