"""Cell summaries: every metric of one (model, dataset, facet) with item-clustered CIs."""

from __future__ import annotations

import numpy as np
import pandas as pd

from flipgate import metrics as M


def answers_frame(trials: pd.DataFrame, readout: str) -> pd.DataFrame:
    """Trial table whose ``answer`` (content label) and ``correct`` columns are ``readout``'s."""
    answer = pd.Series([m.get(readout) for m in trials["mapped"]], index=trials.index, dtype=object)
    correct = pd.Series(
        [c.get(readout) for c in trials["correct"]], index=trials.index, dtype=object
    )
    return trials.assign(answer=answer, correct=correct)


class Summary(dict):
    """A cell's metrics ``{metric: {estimate, ci}}``; ``draws`` keeps each metric's bootstrap
    draws (for threshold p-values) without putting them in the JSON."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.draws: dict[str, np.ndarray] = {}

    def add(self, metric: str, estimate: float, draws: np.ndarray, level: float) -> None:
        self.draws[metric] = draws
        if draws.size:
            lo, hi = np.quantile(draws, [(1 - level) / 2, 1 - (1 - level) / 2])
            self[metric] = {"estimate": float(estimate), "ci": [float(lo), float(hi)]}
        else:
            self[metric] = {"estimate": float("nan"), "ci": [float("nan"), float("nan")]}

    def add_mean(
        self, metric: str, values, n_boot: int, level: float, seed: int, cluster=None
    ) -> None:
        values = np.asarray(values, dtype=float)
        estimate = float(np.nanmean(values)) if np.any(~np.isnan(values)) else float("nan")
        self.add(metric, estimate, M.bootstrap_draws(values, cluster, n_boot, seed), level)


def facet_summary(
    trials: pd.DataFrame,
    readout: str,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
    judgements: dict[str, str] | None = None,
) -> tuple[Summary, pd.DataFrame]:
    """Metrics of one cell under one readout, and the per-item table behind them. With judge
    ``judgements`` (item -> verdict) also the sem-flip rate (docs/definitions.md §3.5)."""
    df = answers_frame(trials, readout)
    items = M.item_table(df)
    if judgements is not None:
        from flipgate.judge import UNPARSABLE, is_sem_flip

        items["judge_verdict"] = items["item_id"].map(lambda i: judgements.get(i, UNPARSABLE))
        items["sem_flip"] = items["judge_verdict"].map(is_sem_flip)
    correct = df["correct"].map(lambda c: np.nan if c is None else float(c))
    summary = Summary()
    summary.add_mean("flip_rate", items["any_flip"].astype(float), n_boot, level, seed)
    summary.add_mean("osi", items["osi"].astype(float), n_boot, level, seed)
    summary.add_mean(
        "pairwise_disagreement", items["pairwise_disagreement"].astype(float), n_boot, level, seed
    )
    summary.add_mean(
        "parse_rate", df["answer"].notna().astype(float), n_boot, level, seed, cluster=df["item_id"]
    )
    summary.add_mean("accuracy", correct, n_boot, level, seed, cluster=df["item_id"])
    if judgements is not None:
        summary.add_mean("sem_flip_rate", items["sem_flip"], n_boot, level, seed)
        summary.add_mean(
            "judge_parse_rate", items["sem_flip"].notna().astype(float), n_boot, level, seed
        )
    summary.update(
        {
            "acc_swing": {"estimate": M.acc_swing(df), "ci": None},
            "n_items": int(len(items)),
            "n_items_insufficient": int(items["any_flip"].isna().sum()),
            "k": int(df.groupby("item_id").size().max()) if len(df) else 0,
            "n_trials": int(len(df)),
            "k_policies": M.k_policies(df),
            "k2_screen_recall": M.k2_screen_recall(df),
            "k_ablation": {str(k): v for k, v in M.k_ablation(df).items()},
        }
    )
    return summary, items


def control_summary(
    perm: pd.DataFrame,
    same: pd.DataFrame,
    readout: str,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
) -> tuple[Summary, pd.DataFrame]:
    """Same-ordering control (docs/definitions.md §3.6): flip_rate_same, Δ_order with a paired CI,
    excess share."""
    same_summary, same_items = facet_summary(same, readout, n_boot, level, seed)
    perm_items = M.item_table(answers_frame(perm, readout))
    joined = same_items[["item_id", "any_flip"]].merge(
        perm_items[["item_id", "any_flip"]], on="item_id", suffixes=("_same", "_perm")
    )
    a = joined["any_flip_perm"].astype(float).to_numpy()
    b = joined["any_flip_same"].astype(float).to_numpy()
    fr_perm = float(np.nanmean(a)) if len(a) else float("nan")
    fr_same = float(np.nanmean(b)) if len(b) else float("nan")
    summary = same_summary
    for key in ("k_policies", "k2_screen_recall", "k_ablation"):  # K-policies are a facet analysis
        summary.pop(key)
    summary["flip_rate_same"] = same_summary["flip_rate"]
    summary.draws["flip_rate_same"] = same_summary.draws["flip_rate"]
    summary["flip_rate_perm"] = {"estimate": fr_perm, "ci": None}
    both = ~(np.isnan(a) | np.isnan(b))  # Δ_order over the items both arms could score
    summary.add(
        "delta_order",
        float(a[both].mean() - b[both].mean()) if both.any() else float("nan"),
        M.paired_bootstrap_draws(a, b, n_boot, seed),
        level,
    )
    summary["ordering_excess_share"] = {
        "estimate": M.ordering_excess_share(fr_perm, fr_same),
        "ci": None,
    }
    return summary, joined
