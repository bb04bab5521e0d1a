"""One benchmark's envelope analysis over the roster (docs/definitions.md §6–§7): what the GRID
card discloses and what the thresholds gate.

Input: seed-averaged configuration scores (:func:`flipgate.envelope.run.config_scores`) of every
roster model on one benchmark. Output: a JSON-able dict with per-model score neighbourhood (min /
mean / max, SDI and CFR_θ with configuration-bootstrap ranges), pairwise ρ_flip, roster ranking
stability (τ_R with its range, total-order mismatch, orderings reached), the ANOVA variance shares,
parse-clean recomputation, scoring-path strata and the core-tier ablation; with (candidate,
baseline) pairs, per-configuration score deltas and ρ_flip between model versions
(docs/definitions.md §11).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import numpy as np
import numpy.typing as npt
import pandas as pd

from flipgate import FlipgateError
from flipgate import metrics as M

NOT_VARIED = [
    "other models, sizes and checkpoints than the roster",
    "item subset (one seed-42 sample)",
    "seed count beyond the declared stochastic seeds",
    "label set (A, B, C, ...)",
    "system prompt, moderation, routing, API version, region (deployment layer)",
]


def _est(value: float, lo: float | None = None, hi: float | None = None) -> dict:
    clean = lambda x: None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)  # noqa: E731
    return {"estimate": clean(value), "ci": None if lo is None else [clean(lo), clean(hi)]}


def _boot(values, stat, n_boot: int, seed: int, level: float) -> dict:
    try:
        return _est(*M.config_bootstrap(values, stat, n=n_boot, seed=seed, level=level))
    except FlipgateError:
        return _est(float("nan"))


def model_neighbourhood(
    scores: pd.DataFrame, anchor: str, thetas: list[float], n_boot: int, seed: int, level: float
) -> dict:
    """Per model: point score at the anchor configuration, min/mean/max, SDI and CFR_θ with
    ranges."""
    out = {}
    for model, part in scores.groupby("model", sort=True):
        s = part["score"].to_numpy(float)
        at_anchor = part.loc[part["config"] == anchor, "score"]
        block = {
            "point_score": float(at_anchor.iloc[0]) if len(at_anchor) else None,
            "n_configs": int(len(s)),
            "min": float(s.min()),
            "mean": float(s.mean()),
            "max": float(s.max()),
            "parse_rate_mean": float(part["parse_rate"].mean()),
            "sdi": _boot(s, M.sdi, n_boot, seed, level) if s.mean() > 0 else _est(float("nan")),
        }
        for theta in thetas:
            block[f"cfr@{theta:g}"] = (
                _boot(s, lambda x, t=theta: M.cfr(x, t), n_boot, seed, level)
                if len(s) >= 2
                else _est(float("nan"))
            )
        out[model] = block
    return out


def roster_stability(scores: pd.DataFrame, n_boot: int, seed: int, level: float) -> dict:
    """Pairwise ρ_flip and the roster's ranking stability over configurations every model ran."""
    wide = M.to_score_matrix(scores)
    pairs = M.pair_flips(scores.drop(columns="benchmark", errors="ignore"))
    block = {
        "models": list(map(str, wide.columns)),
        "n_configs": int(len(wide)),
        "pairs": [
            {
                k: (v if not isinstance(v, float) or not math.isnan(v) else None)
                for k, v in row.items()
            }
            for row in pairs.to_dict("records")
        ],
    }
    if wide.shape[1] < 2 or len(wide) < 2:
        block["note"] = "ranking stability needs at least two models and two configurations"
        return block
    block["tau_r"] = _boot(wide.to_numpy(float), M.tau_r, n_boot, seed, level)
    block["total_order_mismatch"] = _est(M.total_order_mismatch(wide))
    block["orderings_reached"] = _est(M.orderings_reached(wide))
    orders = pd.Series([" > ".join(map(str, o)) for o in M.total_orders(wide)]).value_counts()
    block["orders"] = {k: int(v) for k, v in orders.items()}
    return block


def headlines(
    scores: pd.DataFrame, thetas: list[float], n_boot: int, seed: int, level: float
) -> dict:
    """ "Up to X" maxima over the roster with max-statistic intervals (docs/definitions.md §7;
    SafetyRepro App. I): SDI and CFR_θ."""
    wide = M.to_score_matrix(scores)
    if len(wide) < 2:
        return {}
    slices = {str(m): wide[m].to_numpy(float) for m in wide.columns}
    groups = {
        m: "roster" for m in slices
    }  # one benchmark: every model shares the configuration draws
    stats: dict[str, Callable[[npt.NDArray[np.float64]], float]] = {
        "sdi": M.sdi,
        **{f"cfr@{t:g}": partial(M.cfr, theta=t) for t in thetas},
    }
    out: dict[str, dict[str, Any]] = {}
    for name, stat in stats.items():
        try:
            r = M.max_stat_bootstrap(slices, stat, n=n_boot, seed=seed, level=level, groups=groups)
        except FlipgateError as exc:
            out[name] = {"not_estimable": str(exc)}
            continue
        out[name] = {**_est(r.estimate, r.lo, r.hi), "model": r.slice}
    return out


def variance_shares(scores: pd.DataFrame) -> dict:
    """Type-II ANOVA shares over the axes that vary (docs/definitions.md §7; SafetyRepro App. F);
    why not, when not estimable."""
    varying = [a for a in ("model", "template", "decoding", "few_shot") if scores[a].nunique() > 1]
    if "model" not in varying:
        return {"not_estimable": "the ANOVA ρ needs at least two models"}
    terms = varying + [
        f"{a}:{b}"
        for i, a in enumerate(varying)
        for b in varying[i + 1 :]
        if f"{a}:{b}" in M.ANOVA_TERMS
    ]
    try:
        shares = M.anova_shares(
            scores.assign(few_shot=scores["few_shot"].astype(str)),
            terms,
            impl_terms=[t for t in M.IMPL_TERMS if t in varying],
        )
    except FlipgateError as exc:
        return {"not_estimable": str(exc)}
    return shares.as_dict()


def version_deltas(scores: pd.DataFrame, pairs, n_boot: int, seed: int, level: float) -> list[dict]:
    """Regression between model versions over the envelope (docs/definitions.md §11): per
    (candidate, baseline) pair, over the configurations both were scored on, the per-configuration
    score delta (candidate − baseline), its mean with a configuration-bootstrap interval, min / max,
    how many configurations the candidate is worse / better / equal on (exact, strict signs) and
    ρ_flip between the two versions (:func:`flipgate.metrics.rho_flip`) with its ceiling
    ⌊|C|/2⌋/|C|. A pair with a model (or shared configuration) missing is
    ``{candidate, baseline, missing: why}``."""
    present = set(scores["model"].astype(str))
    out = []
    for candidate, baseline in pairs:
        entry: dict[str, Any] = {"candidate": str(candidate), "baseline": str(baseline)}
        absent = [
            f"{role} {name!r} has no configuration score on this benchmark"
            for role, name in (("candidate", candidate), ("baseline", baseline))
            if str(name) not in present
        ]
        if absent:
            out.append({**entry, "missing": "; ".join(absent)})
            continue
        both = scores[scores["model"].astype(str).isin([str(candidate), str(baseline)])]
        wide = M.to_score_matrix(both.assign(model=both["model"].astype(str)))
        if len(wide) == 0:
            out.append({**entry, "missing": "no configuration was scored for both versions"})
            continue
        a, b = wide[str(candidate)].to_numpy(float), wide[str(baseline)].to_numpy(float)
        delta = a - b
        n_better, n_worse, n_equal = M.sign_counts(a, b)  # N+ = candidate > baseline
        entry.update(
            n_configs=int(len(wide)),
            deltas=[
                {"config": str(c), "candidate": float(x), "baseline": float(y), "delta": float(d)}
                for c, x, y, d in zip(wide.index, a, b, delta)
            ],
            mean_delta=_boot(delta, np.mean, n_boot, seed, level)
            if len(delta) >= 2
            else _est(float(delta.mean())),
            min_delta=float(delta.min()),
            max_delta=float(delta.max()),
            n_worse=n_worse,
            n_better=n_better,
            n_equal=n_equal,
            rho_flip=M.rho_flip(a, b),
            ceiling=M.rho_flip_ceiling(len(wide)),
        )
        out.append(entry)
    return out


def analyse(
    scores: pd.DataFrame,
    anchor: str,
    thetas: list[float],
    n_boot: int = 1000,
    seed: int = 42,
    level: float = 0.95,
    min_parse_rate: float = 0.95,
    pairs=(),
) -> dict:
    """The whole disclosure for one benchmark (see module docstring); with ``pairs`` of (candidate,
    baseline) model ids also ``versions`` (:func:`version_deltas`)."""
    full: dict[str, Any] = {
        "models": model_neighbourhood(scores, anchor, thetas, n_boot, seed, level),
        "roster": roster_stability(scores, n_boot, seed, level),
        "variance": variance_shares(scores),
        "headline_max": headlines(scores, thetas, n_boot, seed, level),
    }
    if pairs:
        full["versions"] = version_deltas(scores, pairs, n_boot, seed, level)
    clean = M.parse_clean(scores, min_parse_rate, thetas)
    full["parse_clean"] = {
        "min_parse_rate": min_parse_rate,
        "cells_dropped": int(len(clean.dropped)),
        "cells_kept": int(len(clean.frame)),
        "models": model_neighbourhood(clean.frame, anchor, thetas, n_boot, seed, level)
        if len(clean.frame)
        else {},
        "roster": roster_stability(clean.complete, n_boot, seed, level)
        if len(clean.complete)
        else {},
    }
    full["by_scoring_path"] = {
        path: model_neighbourhood(part, anchor, thetas, n_boot, seed, level)
        for path, part in scores.groupby("scoring")
    }
    if (scores["tier"] == "stress").any() and (scores["tier"] == "core").any():
        core = scores[scores["tier"] == "core"]
        full["core_tier"] = {
            "models": model_neighbourhood(core, anchor, thetas, n_boot, seed, level),
            "roster": roster_stability(core, n_boot, seed, level),
        }
    return full


def gate_analysis(
    scores: pd.DataFrame, anchor: str, thetas: list[float], n_boot: int, seed: int, level: float
) -> dict:
    """The part of :func:`analyse` that :func:`gate_metrics` reads, at another CI ``level``."""
    return {
        "models": model_neighbourhood(scores, anchor, thetas, n_boot, seed, level),
        "roster": roster_stability(scores, n_boot, seed, level),
    }


def gate_metrics(analysis: dict, model: str) -> dict:
    """``{metric: {estimate, ci}}`` for one model, the block the thresholds of
    ``facet: envelope`` read."""
    mine = analysis["models"][model]
    roster = analysis["roster"]
    pairs = [p for p in roster["pairs"] if model in (p["model_a"], p["model_b"])]
    out = {k: v for k, v in mine.items() if isinstance(v, dict)}
    out.update(
        score_min=_est(mine["min"]),
        score_mean=_est(mine["mean"]),
        score_max=_est(mine["max"]),
        rho_flip_max=_est(max((p["rho_flip"] for p in pairs), default=float("nan"))),
        strict_disagreement_max=_est(
            max((p["strict_disagreement"] or 0 for p in pairs), default=float("nan"))
        ),
    )
    for key in ("tau_r", "total_order_mismatch", "orderings_reached"):
        if key in roster:
            out[key] = roster[key]
    return out
