"""Cell summaries: every metric of one (model, dataset, facet) with item-clustered CIs."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd

from flipgate import metrics as M
from flipgate.metrics.sequential import ItemValues, ValueKind
from flipgate.results import K_FIELDS, CellSummary, MetricEstimate


def answers_frame(trials: pd.DataFrame, readout: str) -> pd.DataFrame:
    """Trial table whose ``answer`` (content label) and ``correct`` columns are ``readout``'s."""
    answer = pd.Series([m.get(readout) for m in trials["mapped"]], index=trials.index, dtype=object)
    correct = pd.Series(
        [c.get(readout) for c in trials["correct"]], index=trials.index, dtype=object
    )
    return trials.assign(answer=answer, correct=correct)


def mean_estimate(
    values: Any, n_boot: int, level: float, seed: int, cluster: Any = None
) -> MetricEstimate:
    """The mean of ``values`` (NaN = not scorable) with its bootstrap interval, resampling items
    (``cluster``) when several values belong to one item."""
    values = np.asarray(values, dtype=float)
    draws = M.bootstrap_draws(values, cluster, n_boot, seed)
    estimate = MetricEstimate.from_draws(_nanmean(values), draws, level)
    scored = ~np.isnan(values)
    if scored.any() and values[scored].min() >= 0 and values[scored].max() <= 1:
        units = np.unique(np.asarray(cluster)[scored]).size if cluster is not None else scored.sum()
        estimate = estimate.model_copy(update={"n_units": int(units)})
    return estimate


def _nanmean(values: np.ndarray) -> float:
    """Mean over the scorable values; NaN (without a warning) when there are none."""
    return float(np.nanmean(values)) if np.any(~np.isnan(values)) else float("nan")


def point(estimate: float) -> MetricEstimate:
    """A metric reported without an interval."""
    return MetricEstimate(estimate=estimate)


def facet_summary(
    trials: pd.DataFrame,
    readout: str,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
    judgements: dict[str, str] | None = None,
) -> tuple[CellSummary, pd.DataFrame]:
    """Metrics of one cell under one readout, and the per-item table behind them. With judge
    ``judgements`` (item -> verdict) also the sem-flip rate (docs/definitions.md §3.5)."""
    df = answers_frame(trials, readout)
    items = M.item_table(df)
    if judgements is not None:
        from flipgate.judging import UNPARSABLE, is_sem_flip

        items["judge_verdict"] = items["item_id"].map(lambda i: judgements.get(i, UNPARSABLE))
        items["sem_flip"] = items["judge_verdict"].map(is_sem_flip)
    correct = df["correct"].map(lambda c: np.nan if c is None else float(c))

    def mean(values: Any, cluster: Any = None) -> MetricEstimate:
        return mean_estimate(values, n_boot, level, seed, cluster)

    metrics = {
        "flip_rate": mean(items["any_flip"].astype(float)),
        "osi": mean(items["osi"].astype(float)),
        "pairwise_disagreement": mean(items["pairwise_disagreement"].astype(float)),
        "parse_rate": mean(df["answer"].notna().astype(float), cluster=df["item_id"]),
        "accuracy": mean(correct, cluster=df["item_id"]),
    }
    if judgements is not None:
        metrics["sem_flip_rate"] = mean(items["sem_flip"])
        metrics["judge_parse_rate"] = mean(items["sem_flip"].notna().astype(float))
    metrics["acc_swing"] = point(M.acc_swing(df))
    summary = CellSummary(
        metrics=metrics,
        n_items=int(len(items)),
        n_items_insufficient=int(items["any_flip"].isna().sum()),
        k=int(df.groupby("item_id").size().max()) if len(df) else 0,
        n_trials=int(len(df)),
        k_policies=M.k_policies(df),
        k2_screen_recall=M.k2_screen_recall(df),
        k_ablation={str(k): v for k, v in M.k_ablation(df).items()},
    )
    return summary, items


def control_summary(
    perm: pd.DataFrame,
    same: pd.DataFrame,
    readout: str,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
) -> tuple[CellSummary, pd.DataFrame]:
    """Same-ordering control (docs/definitions.md §3.6): flip_rate_same, Δ_order with a paired CI,
    excess share."""
    same_summary, same_items = facet_summary(same, readout, n_boot, level, seed)
    perm_items = M.item_table(answers_frame(perm, readout))
    joined = same_items[["item_id", "any_flip"]].merge(
        perm_items[["item_id", "any_flip"]], on="item_id", suffixes=("_same", "_perm")
    )
    a = joined["any_flip_perm"].astype(float).to_numpy()
    b = joined["any_flip_same"].astype(float).to_numpy()
    fr_perm, fr_same = _nanmean(a), _nanmean(b)
    both = ~(np.isnan(a) | np.isnan(b))  # Δ_order over the items both arms could score
    metrics = {
        **same_summary.metrics,
        "flip_rate_same": same_summary.metrics["flip_rate"],
        "flip_rate_perm": point(fr_perm),
        "delta_order": MetricEstimate.from_draws(
            float(a[both].mean() - b[both].mean()) if both.any() else float("nan"),
            M.paired_bootstrap_draws(a, b, n_boot, seed),
            level,
        ),
        "ordering_excess_share": point(M.ordering_excess_share(fr_perm, fr_same)),
    }
    # K-policies are a facet analysis, not a control's
    no_k = {key: None for key in K_FIELDS}
    return same_summary.model_copy(update={"metrics": metrics, **no_k}), joined


def item_values(
    trials: pd.DataFrame, readouts: list[str], perm: pd.DataFrame | None = None
) -> dict[tuple[str, str], ItemValues]:
    """The per-item values behind a cell's mean metrics, per readout, in the order its items were
    drawn (docs/definitions.md §12): the rates of :func:`facet_summary` (``flip_rate``, ``osi``,
    ``pairwise_disagreement``, ``parse_rate``, ``accuracy``) and, for a control (``perm``: its
    facet's trials), ``flip_rate_same`` and ``delta_order`` (per item flip_perm − flip_same, in
    [−1, 1])."""
    order = list(dict.fromkeys(trials["item_id"]))
    out: dict[tuple[str, str], ItemValues] = {}
    for r in readouts:
        df = answers_frame(trials, r)
        items = M.item_table(df).set_index("item_id").reindex(order)
        correct = df["correct"].map(lambda c: np.nan if c is None else float(c))
        per_item_correct = correct.groupby(df["item_id"]).mean().reindex(order)
        flips = items["any_flip"].astype(float)
        for metric, values, kind in (
            ("flip_rate", flips, "binary"),
            ("osi", items["osi"].astype(float), "bounded"),
            ("pairwise_disagreement", items["pairwise_disagreement"].astype(float), "bounded"),
            ("parse_rate", items["parse_rate"].astype(float), "share"),
            ("accuracy", per_item_correct, "bounded"),
        ):
            out[r, metric] = ItemValues.of(values.to_numpy(), kind=cast(ValueKind, kind))
        if perm is not None:
            out[r, "flip_rate_same"] = out[r, "flip_rate"]
            perm_flips = (
                M.item_table(answers_frame(perm, r)).set_index("item_id")["any_flip"].astype(float)
            )
            out[r, "delta_order"] = ItemValues.of(
                (perm_flips.reindex(order) - flips).to_numpy(), -1.0, 1.0, "paired"
            )
    return out
