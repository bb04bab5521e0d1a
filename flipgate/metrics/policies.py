"""K-policies (docs/definitions.md §3; Facet-Probe §4.3 / Tab. 3): what re-asking under other
orderings buys, post hoc.

All functions take a trial table with columns item_id, condition (ordering index), answer (content
label, None = unparsed) and correct (bool | None), as :func:`flipgate.summary.answers_frame` gives.
Abstention counts as not answered: ``accuracy`` counts it wrong, ``selective_accuracy`` ignores it,
``coverage`` is the answered share. ``cost`` is model calls per item.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Hashable, Sequence

import numpy as np
import pandas as pd


def _per_item(trials: pd.DataFrame) -> list[tuple[list[Hashable | None], list[bool]]]:
    out: list[tuple[list[Hashable | None], list[bool]]] = []
    for _, g in trials.sort_values("condition").groupby("item_id", sort=True):
        answers = [
            None if a is None or (isinstance(a, float) and np.isnan(a)) else a for a in g["answer"]
        ]
        out.append((answers, [bool(c) if c is not None else False for c in g["correct"]]))
    return out


def _vote(answers: Sequence[Hashable | None], correct: Sequence[bool], k: int) -> tuple[bool, bool]:
    """(answered, right) for a plurality vote over the first k orderings; ties abstain."""
    pairs = [(a, c) for a, c in zip(answers[:k], correct[:k]) if a is not None]
    if not pairs:
        return False, False
    counts = Counter(a for a, _ in pairs).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return False, False
    winner = counts[0][0]
    return True, next(c for a, c in pairs if a == winner)


def _row(policy: str, k: int, cost: int, answered: list[bool], right: list[bool]) -> dict[str, Any]:
    n = len(answered)
    covered = sum(answered)
    return {
        "policy": policy,
        "k": k,
        "cost": cost,
        "accuracy": sum(right) / n if n else float("nan"),
        "selective_accuracy": sum(right) / covered if covered else float("nan"),
        "coverage": covered / n if n else float("nan"),
    }


def k_policies(trials: pd.DataFrame) -> list[dict[str, Any]]:
    """P1 single pass, P2 K=2 abstain-on-disagree, P3 K=3 majority, P4 K=6 majority, P5
    worst-ordering oracle, P6 best-ordering oracle (docs/definitions.md §3; Facet-Probe Tab. 3)."""
    items = _per_item(trials)
    k_max = max((len(a) for a, _ in items), default=0)
    rows = [
        _row(
            "P1 single pass (o=0)",
            1,
            1,
            [a[0] is not None for a, _ in items],
            [c[0] for _, c in items],
        )
    ]
    p2 = [
        (a[0] is not None and a[0] == a[1], a[0] is not None and a[0] == a[1] and c[0])
        for a, c in items
    ]
    rows.append(
        _row("P2 K=2 abstain on disagreement", 2, 2, [x for x, _ in p2], [y for _, y in p2])
    )
    for k, name in ((3, "P3 K=3 majority"), (k_max, f"P4 K={k_max} majority")):
        votes = [_vote(a, c, k) for a, c in items]
        rows.append(_row(name, k, k, [x for x, _ in votes], [y for _, y in votes]))
    rows.append(
        _row(
            "P5 worst-ordering oracle",
            k_max,
            k_max,
            [True] * len(items),
            [all(c) for _, c in items],
        )
    )
    rows.append(
        _row(
            "P6 best-ordering oracle", k_max, k_max, [True] * len(items), [any(c) for _, c in items]
        )
    )
    return rows


def k2_screen_recall(trials: pd.DataFrame) -> float:
    """Share of items that flip across all K orderings which the K=2 screen (orderings 0 and 1
    disagree) already flags. Precision is 1 by construction (Facet-Probe §4.3)."""
    flagged = flipped = 0
    for answers, _ in _per_item(trials):
        parsed = [a for a in answers if a is not None]
        if len(set(parsed)) > 1:
            flipped += 1
            flagged += int(
                answers[0] is not None and answers[1] is not None and answers[0] != answers[1]
            )
    return flagged / flipped if flipped else float("nan")


def k_ablation(trials: pd.DataFrame, ks: list[int] | None = None) -> dict[int, float]:
    """Flip rate using only the first k orderings, for each k (any-flip is K-monotone)."""
    items = _per_item(trials)
    k_max = max((len(a) for a, _ in items), default=0)
    out = {}
    for k in ks or list(range(2, k_max + 1)):
        flags = [
            int(len({a for a in answers[:k] if a is not None}) > 1)
            for answers, _ in items
            if sum(a is not None for a in answers[:k]) >= 2
        ]
        out[k] = sum(flags) / len(flags) if flags else float("nan")
    return out
