"""Cell summaries: every metric of one (model, dataset, facet) with item-clustered CIs."""
from __future__ import annotations

import numpy as np
import pandas as pd

from flipgate import metrics as M


def answers_frame(trials: pd.DataFrame, readout: str) -> pd.DataFrame:
    """Trial table whose ``answer`` (content label) and ``correct`` columns are ``readout``'s."""
    answer = pd.Series([m.get(readout) for m in trials["mapped"]], index=trials.index, dtype=object)
    correct = pd.Series([c.get(readout) for c in trials["correct"]], index=trials.index, dtype=object)
    return trials.assign(answer=answer, correct=correct)


def _ci(values, n_boot: int, level: float, seed: int, cluster=None) -> dict:
    est, lo, hi = M.bootstrap_ci(values, cluster=cluster, n=n_boot, level=level, seed=seed)
    return {"estimate": est, "ci": [lo, hi]}


def facet_summary(trials: pd.DataFrame, readout: str, n_boot: int = 1000, level: float = 0.95,
                  seed: int = 42) -> tuple[dict, pd.DataFrame]:
    """Metrics of one cell under one readout, and the per-item table behind them."""
    df = answers_frame(trials, readout)
    items = M.item_table(df)
    flips = items["any_flip"].astype(float)
    parsed = df["answer"].notna().astype(float)
    correct = df["correct"].map(lambda c: np.nan if c is None else float(c))
    summary = {
        "flip_rate": _ci(flips, n_boot, level, seed),
        "osi": _ci(items["osi"].astype(float), n_boot, level, seed),
        "pairwise_disagreement": _ci(items["pairwise_disagreement"].astype(float), n_boot, level, seed),
        "parse_rate": _ci(parsed, n_boot, level, seed, cluster=df["item_id"]),
        "accuracy": _ci(correct, n_boot, level, seed, cluster=df["item_id"]),
        "acc_swing": {"estimate": M.acc_swing(df), "ci": None},
        "n_items": int(len(items)),
        "n_items_insufficient": int(items["any_flip"].isna().sum()),
        "k": int(df.groupby("item_id").size().max()) if len(df) else 0,
        "n_trials": int(len(df)),
    }
    return summary, items


def control_summary(perm: pd.DataFrame, same: pd.DataFrame, readout: str, n_boot: int = 1000,
                    level: float = 0.95, seed: int = 42) -> tuple[dict, pd.DataFrame]:
    """Same-ordering control (SPEC §3.6): flip_rate_same, Δ_order with a paired CI, excess share."""
    same_summary, same_items = facet_summary(same, readout, n_boot, level, seed)
    perm_items = M.item_table(answers_frame(perm, readout))
    joined = same_items[["item_id", "any_flip"]].merge(perm_items[["item_id", "any_flip"]], on="item_id",
                                                       suffixes=("_same", "_perm"))
    a = joined["any_flip_perm"].astype(float).to_numpy()
    b = joined["any_flip_same"].astype(float).to_numpy()
    est, lo, hi = M.paired_bootstrap_ci(a, b, n=n_boot, level=level, seed=seed)
    fr_perm = float(np.nanmean(a)) if len(a) else float("nan")
    fr_same = float(np.nanmean(b)) if len(b) else float("nan")
    summary = dict(same_summary)
    summary["flip_rate_same"] = same_summary["flip_rate"]
    summary["flip_rate_perm"] = {"estimate": fr_perm, "ci": None}
    summary["delta_order"] = {"estimate": est, "ci": [lo, hi]}
    summary["ordering_excess_share"] = {"estimate": M.ordering_excess_share(fr_perm, fr_same), "ci": None}
    return summary, joined
