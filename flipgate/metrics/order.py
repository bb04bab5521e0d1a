"""Order-robustness metrics (docs/definitions.md §3; Facet-Probe §3 "Flip-rate definition").

Answers are content labels after map-back (e.g. source option index). ``None`` is a parse
failure: excluded from the answer set and counted in the parse rate (docs/definitions.md §1).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Hashable, Iterable, Sequence

import pandas as pd


def _parsed(answers: Iterable[Hashable | None]) -> list[Hashable]:
    return [a for a in answers if a is not None]


def any_flip(answers: Sequence[Hashable | None]) -> int:
    """docs/definitions.md §3: 1[|set(parsed answers)| > 1]."""
    return int(len(set(_parsed(answers))) > 1)


def flip_rate(answer_sets: Iterable[Sequence[Hashable | None]]) -> float:
    """docs/definitions.md §3: mean of ``any_flip`` over items (items with < 2 parsed answers
    excluded; report them with :func:`item_table`)."""
    flags = [any_flip(a) for a in answer_sets if len(_parsed(a)) >= 2]
    return float(sum(flags) / len(flags)) if flags else float("nan")


def answer_entropy(answers: Sequence[Hashable | None]) -> float:
    """Shannon entropy (nats) of the parsed-answer distribution (Facet-Probe release's "OSI";
    docs/definitions.md §3)."""
    parsed = _parsed(answers)
    if not parsed:
        return float("nan")
    n = len(parsed)
    return float(-sum((c / n) * math.log(c / n) for c in Counter(parsed).values()))


def osi(answers: Sequence[Hashable | None], n_classes: int) -> float:
    """docs/definitions.md §3: OSI = 1 − H(answers)/log(C); 1 = stable, 0 = uniform over C
    classes."""
    if n_classes < 2:
        raise ValueError(f"OSI needs at least 2 answer classes, got {n_classes}")
    h = answer_entropy(answers)
    return float(1.0 - h / math.log(n_classes)) if not math.isnan(h) else float("nan")


def pairwise_disagreement(answers: Sequence[Hashable | None]) -> float:
    """docs/definitions.md §3: share of ordered pairs (k≠k') of parsed answers that differ."""
    parsed = _parsed(answers)
    n = len(parsed)
    if n < 2:
        return float("nan")
    same = sum(c * (c - 1) for c in Counter(parsed).values())
    return float(1.0 - same / (n * (n - 1)))


def parse_rate(answers: Sequence[Hashable | None]) -> float:
    """docs/definitions.md §1: share of trials whose readout parsed."""
    return float(len(_parsed(answers)) / len(answers)) if len(answers) else float("nan")


def accuracy(correct: Iterable[bool | None]) -> float:
    """Share correct over trials; an unparsed answer (None) counts as wrong."""
    vals = [bool(c) for c in correct]
    return float(sum(vals) / len(vals)) if vals else float("nan")


def acc_swing(trials: pd.DataFrame) -> float:
    """docs/definitions.md §3: best-ordering accuracy − worst-ordering accuracy, accuracy taken per
    ordering index over items. ``trials`` needs columns ``condition`` and ``correct``."""
    per_ordering = (
        trials.assign(correct=trials["correct"].fillna(False).astype(float))
        .groupby("condition")["correct"]
        .mean()
    )
    return float(per_ordering.max() - per_ordering.min()) if len(per_ordering) else float("nan")


def delta_order(flip_rate_perm: float, flip_rate_same: float) -> float:
    """docs/definitions.md §3.6 / Facet-Probe §3: Δ_order = flip_rate_perm − flip_rate_same (may be
    negative)."""
    return float(flip_rate_perm - flip_rate_same)


def ordering_excess_share(flip_rate_perm: float, flip_rate_same: float) -> float:
    """docs/definitions.md §3.6: Δ_order / flip_rate_perm (nan when flip_rate_perm is 0)."""
    if flip_rate_perm == 0:
        return float("nan")
    return float(delta_order(flip_rate_perm, flip_rate_same) / flip_rate_perm)


def item_table(trials: pd.DataFrame, n_classes_col: str = "n_classes") -> pd.DataFrame:
    """Per-item metrics from a trial table with columns item_id, answer, correct, n_classes.

    Returns one row per item: n_trials, n_parsed, any_flip (None when < 2 parsed), osi,
    pairwise_disagreement, answer_entropy, accuracy, parse_rate, answers.
    """
    rows = []
    for item_id, g in trials.groupby("item_id", sort=True):
        answers = [None if pd.isna(a) else a for a in g["answer"]]
        parsed = _parsed(answers)
        enough = len(parsed) >= 2
        rows.append(
            {
                "item_id": item_id,
                "n_trials": len(answers),
                "n_parsed": len(parsed),
                "any_flip": any_flip(answers) if enough else None,
                "osi": osi(answers, int(g[n_classes_col].iloc[0])) if parsed else None,
                "pairwise_disagreement": pairwise_disagreement(answers) if enough else None,
                "answer_entropy": answer_entropy(answers) if parsed else None,
                "accuracy": accuracy(g["correct"].fillna(False)),
                "parse_rate": parse_rate(answers),
                "answers": "|".join("-" if a is None else str(a) for a in answers),
            }
        )
    return pd.DataFrame(rows)
