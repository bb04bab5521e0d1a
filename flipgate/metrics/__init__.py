"""Public metrics API (SPEC §3). Every function cites the section that defines it."""
from flipgate.metrics.order import (
    acc_swing,
    accuracy,
    answer_entropy,
    any_flip,
    delta_order,
    flip_rate,
    item_table,
    ordering_excess_share,
    osi,
    pairwise_disagreement,
    parse_rate,
)
from flipgate.metrics.bootstrap import bootstrap_ci, bootstrap_draws, paired_bootstrap_ci, paired_bootstrap_draws
from flipgate.metrics.envelope import (
    ANOVA_TERMS, IMPL_TERMS, AnovaShares, MaxStatInterval, ParseClean, anova_shares, cfr, config_bootstrap,
    config_bootstrap_draws, kendall_tau_matrix, max_stat_bootstrap, ordering_metrics, orderings_reached,
    pair_flips, parse_clean, rho_flip, rho_flip_ceiling, sdi, sign_counts, slice_metrics, strict_disagreement,
    tau_r, to_score_matrix, total_order_mismatch, total_orders,
)
from flipgate.metrics.multiple import benjamini_hochberg, bootstrap_p_value
from flipgate.metrics.paired import McNemar, mcnemar
from flipgate.metrics.policies import k2_screen_recall, k_ablation, k_policies

__all__ = [
    "acc_swing", "accuracy", "answer_entropy", "any_flip", "benjamini_hochberg", "bootstrap_ci", "bootstrap_draws",
    "bootstrap_p_value", "delta_order", "flip_rate", "item_table", "k2_screen_recall", "k_ablation",
    "k_policies", "ordering_excess_share", "osi", "paired_bootstrap_ci", "paired_bootstrap_draws",
    "pairwise_disagreement",
    "parse_rate",
    # SPEC §11 paired regression
    "McNemar", "mcnemar",
    # SPEC §7 configuration envelope
    "ANOVA_TERMS", "IMPL_TERMS", "AnovaShares", "MaxStatInterval", "ParseClean", "anova_shares", "cfr",
    "config_bootstrap", "config_bootstrap_draws", "kendall_tau_matrix", "max_stat_bootstrap", "ordering_metrics",
    "orderings_reached", "pair_flips", "parse_clean", "rho_flip", "rho_flip_ceiling", "sdi", "sign_counts",
    "slice_metrics", "strict_disagreement", "tau_r", "to_score_matrix", "total_order_mismatch", "total_orders",
]
