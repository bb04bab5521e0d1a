"""Permutation-consensus judging (docs/definitions.md §9; PCFJudge §3.3).

A listwise judge is run over K predetermined orderings of one item's candidates. Each run that
parsed gives, per candidate (mapped back to its source index): a score s ∈ [0, 1], a rank (1 =
best), and a calibrated-uncertainty flag u. The consensus of candidate i is

    C_i = w_s·mean s_i + w_b·mean b_i + w_t·mean t_i + w_u·mean u_i

over the parsed runs, with the Borda contribution b = (n − rank)/(n − 1) and the top indicator
t = 1/|top set| for each candidate in the run's top-scored set (0 otherwise). The winners are
every candidate within ``tie_tolerance`` of max C. A run that did not parse is left out and
counted; with no parsed run there is no consensus.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from scipy.stats import rankdata

from flipgate import FlipgateError

#: scores closer than this are one top set (the logprob readout's scores are floats)
TOP_TOLERANCE = 1e-9


@dataclass(frozen=True)
class ConsensusWeights:
    """The weights of the four signals; each ≥ 0, together 1 (PCFJudge Eq. 5 default)."""

    score: float = 0.4
    borda: float = 0.4
    top: float = 0.15
    uncertainty: float = 0.05

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise FlipgateError(f"weight {f.name!r} must be a number >= 0 (value: {value!r})")
        total = sum(self.as_tuple())
        if not math.isclose(total, 1.0, abs_tol=1e-9):
            raise FlipgateError(
                f"the weights must sum to 1 (value: {self.as_tuple()} sums to {total:g})"
            )

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.score, self.borda, self.top, self.uncertainty)

    @classmethod
    def parse(cls, value: object, where: str) -> ConsensusWeights:
        """From models.yaml: a mapping of the four weights or a list of four numbers."""
        names = [f.name for f in fields(cls)]
        if isinstance(value, (list, tuple)) and len(value) == 4:
            value = dict(zip(names, value))
        if not isinstance(value, dict) or set(value) != set(names):
            raise FlipgateError(
                f"{where}: weights are a mapping with exactly score, borda, top, uncertainty, or "
                f"a list of four numbers (value: {value!r})"
            )
        try:
            return cls(**value)
        except FlipgateError as exc:
            raise FlipgateError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class RunJudgement:
    """One ordering's verdict over n candidates, by source index; ``failure`` (why it did not
    parse) instead of numbers when it did not."""

    scores: tuple[float, ...] = ()
    ranks: tuple[float, ...] = ()
    uncertain: tuple[bool, ...] = ()
    failure: str | None = None

    @property
    def parsed(self) -> bool:
        return self.failure is None

    @classmethod
    def of(
        cls,
        scores: list[float],
        uncertain: list[bool] | None = None,
        ranking: list[int] | None = None,
    ) -> RunJudgement:
        """From per-candidate scores; ``ranking`` (source indices, best first) gives the ranks,
        else they come from the scores (tied scores share their mean rank)."""
        n = len(scores)
        if ranking is not None:
            ranks = [0.0] * n
            for position, i in enumerate(ranking, start=1):
                ranks[i] = float(position)
        else:
            ranks = list(rankdata([-s for s in scores], method="average"))
        return cls(
            tuple(float(s) for s in scores),
            tuple(float(r) for r in ranks),
            tuple(uncertain or [False] * n),
        )

    @classmethod
    def failed(cls, reason: str) -> RunJudgement:
        return cls(failure=reason)

    def top_set(self) -> frozenset[int]:
        """The top-scored candidates (several when tied)."""
        best = max(self.scores)
        return frozenset(i for i, s in enumerate(self.scores) if s >= best - TOP_TOLERANCE)

    def pick(self) -> int | None:
        """The single top candidate; None for a tie or a parse failure."""
        if not self.parsed:
            return None
        top = self.top_set()
        return next(iter(top)) if len(top) == 1 else None


@dataclass(frozen=True)
class Consensus:
    """Per candidate: the four mean signals and C; the winners (within the tolerance of max C)
    and how many runs parsed."""

    score: tuple[float, ...]
    borda: tuple[float, ...]
    top: tuple[float, ...]
    uncertainty: tuple[float, ...]
    c: tuple[float, ...]
    winners: frozenset[int]
    n_runs: int
    n_parsed: int

    def pick(self) -> int | None:
        """The single winner; None for a tie (exact top-1 accuracy counts it wrong)."""
        return next(iter(self.winners)) if len(self.winners) == 1 else None


def consensus(
    runs: list[RunJudgement],
    weights: ConsensusWeights = ConsensusWeights(),
    tie_tolerance: float = 1e-6,
) -> Consensus | None:
    """docs/definitions.md §9 consensus of the parsed ``runs``; None when none parsed."""
    parsed = [r for r in runs if r.parsed]
    if not parsed:
        return None
    n = len(parsed[0].scores)
    if any(len(r.scores) != n for r in parsed):
        raise ValueError("runs of one item judge different numbers of candidates")
    s = np.array([r.scores for r in parsed])
    b = (n - np.array([r.ranks for r in parsed])) / (n - 1) if n > 1 else np.ones_like(s)
    t = np.zeros_like(s)
    for row, r in enumerate(parsed):
        best_set = r.top_set()
        t[row, list(best_set)] = 1.0 / len(best_set)
    u = np.array([r.uncertain for r in parsed], dtype=float)
    means = [m.mean(axis=0) for m in (s, b, t, u)]
    c = sum(w * m for w, m in zip(weights.as_tuple(), means))
    best = float(np.max(c))
    winners = frozenset(int(i) for i in np.flatnonzero(c >= best - tie_tolerance))
    score, borda, top, uncertainty = (tuple(float(x) for x in m) for m in means)
    return Consensus(
        score,
        borda,
        top,
        uncertainty,
        tuple(float(x) for x in c),
        winners,
        len(runs),
        len(parsed),
    )


def majority_bound(k: int, p: float) -> float | None:
    """PCFJudge Proposition 1 (Hoeffding): P(majority of k independent runs misses) ≤
    exp(−2k(p − ½)²) when each run finds the best candidate with probability p > ½; None when
    p ≤ ½ (no bound)."""
    if not p > 0.5:
        return None
    return math.exp(-2 * k * (p - 0.5) ** 2)


@dataclass(frozen=True)
class ConsensusSettings:
    """How a judge runs over orderings (docs/definitions.md §9): K, their design
    (flipgate/judging/orderings.py), the consensus weights and tie tolerance."""

    k: int = 8
    orderings: str = "balanced"
    weights: ConsensusWeights = ConsensusWeights()
    tie_tolerance: float = 1e-6

    @classmethod
    def parse(cls, spec: dict[str, Any], where: str, default_k: int) -> ConsensusSettings:
        return cls(
            int(spec.get("k", default_k)),
            spec.get("orderings", "balanced"),
            ConsensusWeights.parse(spec["weights"], f"{where}.weights")
            if "weights" in spec
            else ConsensusWeights(),
            float(spec.get("tie_tolerance", 1e-6)),
        )
