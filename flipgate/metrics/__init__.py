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
from flipgate.metrics.bootstrap import bootstrap_ci, paired_bootstrap_ci

__all__ = [
    "acc_swing", "accuracy", "answer_entropy", "any_flip", "bootstrap_ci", "delta_order",
    "flip_rate", "item_table", "ordering_excess_share", "osi", "paired_bootstrap_ci",
    "pairwise_disagreement", "parse_rate",
]
