"""Continuity of uncertainty along input sweeps (docs/definitions.md §10; continuity paper §3).

A sweep source is an I+ branch (n+ inputs growing more ambiguous) then an I− branch (n− inputs
growing clearer); d is each input's distance in steps to the most ambiguous input, u ∈ [0, 1] an
estimator's uncertainty on it.

- ``l_local`` = mean over the (n+ − 1) + (n− − 1) consecutive steps within the branches of the
  violation max(0, −Δu) on I+ (u fell while ambiguity rose) and max(0, Δu) on I− (u rose while
  ambiguity fell); the step between the branches has no expected sign and is not counted;
- ``l_global`` = (1 − ρ_S)/2, ρ_S = Spearman(u, −d) over the source's inputs (average ranks for
  ties), ρ_S := 0 when undefined (constant u): 0 = perfectly peaked, ½ = unrelated, 1 = inverted;
- ``abstention_auc`` = ROC AUC of u for predicting the greedy answer's error, over every input of
  the cell; undefined (``None`` with the reason) when every answer is right or every one wrong;
- ``accuracy`` = share of inputs whose greedy answer is gold (an unparsable answer is wrong).

Per-source losses are averaged over sources; every CI resamples whole sources (the sweep is the
cluster: its inputs share a scene and a question).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict
from scipy.stats import rankdata, spearmanr

from flipgate.results import MetricEstimate

PLUS, MINUS = "I+", "I-"


@dataclass(frozen=True)
class SweepPoint:
    """One input of a sweep source as an estimator saw it."""

    source: str
    branch: str  # "I+" or "I-"
    step: int  # 1.. within its branch
    d: int
    u: float
    correct: bool
    parsed: bool = True


def l_local(u_plus: Sequence[float], u_minus: Sequence[float]) -> float:
    """Mean violation over the consecutive steps of both branches (module docstring)."""
    plus, minus = np.diff(np.asarray(u_plus, float)), np.diff(np.asarray(u_minus, float))
    violations = np.concatenate([np.maximum(0.0, -plus), np.maximum(0.0, minus)])
    if violations.size == 0:
        raise ValueError("a sweep needs at least two inputs on one branch")
    return float(violations.mean())


def l_global(u: npt.ArrayLike, d: npt.ArrayLike) -> float:
    """(1 − Spearman(u, −d)) / 2, with an undefined correlation (constant u or d) read as 0."""
    x, y = np.asarray(u, float), -np.asarray(d, float)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.5
    rho = spearmanr(x, y).statistic
    return float((1 - (0.0 if np.isnan(rho) else rho)) / 2)


def abstention_auc(u: npt.ArrayLike, wrong: npt.ArrayLike) -> float | None:
    """ROC AUC of ``u`` separating wrong from right answers (ties count ½: the Mann–Whitney U
    over both groups' sizes); None when one group is empty."""
    scores, err = np.asarray(u, float), np.asarray(wrong, bool)
    n_err, n_ok = int(err.sum()), int((~err).sum())
    if n_err == 0 or n_ok == 0:
        return None
    ranks = rankdata(scores)
    return float((ranks[err].sum() - n_err * (n_err + 1) / 2) / (n_err * n_ok))


def auc_undefined(correct: Sequence[bool]) -> str | None:
    """Why the abstention AUC is undefined for these answers, None when it is defined."""
    n, right = len(correct), int(np.sum(correct))
    if right == n:
        return f"accuracy saturated: all {n} greedy answers right"
    if right == 0:
        return f"accuracy saturated: all {n} greedy answers wrong"
    return None


class TrajectoryPoint(BaseModel):
    """The mean uncertainty at one sweep position over the cell's sources, with its CI."""

    model_config = ConfigDict(frozen=True)

    branch: str
    step: int
    d: int
    u: MetricEstimate
    accuracy: float


class SourceContinuity(BaseModel):
    """One sweep source: its uncertainties in sweep order and both losses."""

    model_config = ConfigDict(frozen=True)

    u: list[float]
    correct: list[bool]
    l_local: float
    l_global: float


class ContinuityResult(BaseModel):
    """Every number of one (model, sweep, estimator) cell; read by the gate, the card, Allure and
    the terminal."""

    model_config = ConfigDict(frozen=True)

    n_sources: int
    n_inputs: int
    l_local: MetricEstimate
    l_global: MetricEstimate
    abstention_auc: MetricEstimate
    #: why the abstention AUC is undefined (accuracy saturated), None when defined
    auc_undefined: str | None = None
    accuracy: MetricEstimate
    parse_rate: float
    trajectory: list[TrajectoryPoint]
    by_source: dict[str, SourceContinuity]

    def metrics(self) -> dict[str, MetricEstimate]:
        """The estimates a ``facet: continuity`` threshold can name (an undefined AUC is left
        out, never read as 0.5)."""
        out = {
            "l_local": self.l_local,
            "l_global": self.l_global,
            "accuracy": self.accuracy,
            "parse_rate": MetricEstimate(estimate=self.parse_rate),
        }
        if self.auc_undefined is None:
            out["abstention_auc"] = self.abstention_auc
        return out


def _order(points: Sequence[SweepPoint]) -> list[SweepPoint]:
    return sorted(points, key=lambda p: (p.branch != PLUS, p.step))


def source_losses(points: Sequence[SweepPoint]) -> SourceContinuity:
    """Both losses of one source's inputs (any order; sorted I+ then I−, by step)."""
    ordered = _order(points)
    plus = [p.u for p in ordered if p.branch == PLUS]
    minus = [p.u for p in ordered if p.branch == MINUS]
    return SourceContinuity(
        u=[p.u for p in ordered],
        correct=[p.correct for p in ordered],
        l_local=l_local(plus, minus),
        l_global=l_global([p.u for p in ordered], [p.d for p in ordered]),
    )


def _source_draws(
    n_sources: int, statistic: Callable[[np.ndarray], float | None], n_boot: int, seed: int
) -> np.ndarray:
    """``statistic`` over sources resampled with replacement (undefined draws dropped)."""
    idx = np.random.default_rng(seed).integers(0, n_sources, size=(n_boot, n_sources))
    values = [statistic(row) for row in idx]
    return np.array([v for v in values if v is not None], dtype=float)


def continuity(
    points: Sequence[SweepPoint], n_boot: int = 1000, level: float = 0.95, seed: int = 42
) -> ContinuityResult:
    """docs/definitions.md §10 over one cell's inputs (every source a full sweep)."""
    if not points:
        raise ValueError("no sweep inputs")
    names = sorted({p.source for p in points})
    per_source = {s: _order([p for p in points if p.source == s]) for s in names}
    losses = {s: source_losses(ps) for s, ps in per_source.items()}
    local = np.array([losses[s].l_local for s in names])
    glob = np.array([losses[s].l_global for s in names])
    u = [np.array([p.u for p in per_source[s]]) for s in names]
    right = [np.array([p.correct for p in per_source[s]]) for s in names]
    n = len(names)

    def mean_of(values: np.ndarray) -> MetricEstimate:
        draws = _source_draws(n, lambda row: float(values[row].mean()), n_boot, seed)
        return MetricEstimate.from_draws(float(values.mean()), draws, level, n)

    def auc_of(rows: Sequence[int] | np.ndarray) -> float | None:
        return abstention_auc(
            np.concatenate([u[i] for i in rows]), ~np.concatenate([right[i] for i in rows])
        )

    all_right = np.concatenate(right)
    undefined = auc_undefined(all_right.tolist())
    auc = MetricEstimate.from_draws(
        auc_of(range(n)) or float("nan"), _source_draws(n, auc_of, n_boot, seed), level, n
    )
    hits = np.array([r.mean() for r in right])
    sizes = np.array([r.size for r in right], dtype=float)
    acc_draws = _source_draws(
        n, lambda row: float((hits[row] * sizes[row]).sum() / sizes[row].sum()), n_boot, seed
    )
    template = per_source[names[0]]
    shape = [(p.branch, p.step, p.d) for p in template]
    for s in names:
        if [(p.branch, p.step, p.d) for p in per_source[s]] != shape:
            raise ValueError(f"sweep source {s!r} has other positions than {names[0]!r}")
    trajectory = []
    for pos, ref in enumerate(template):
        at = np.array([u[i][pos] for i in range(n)])
        trajectory.append(
            TrajectoryPoint(
                branch=ref.branch,
                step=ref.step,
                d=ref.d,
                u=mean_of(at),
                accuracy=float(np.mean([right[i][pos] for i in range(n)])),
            )
        )
    return ContinuityResult(
        n_sources=n,
        n_inputs=len(points),
        l_local=mean_of(local),
        l_global=mean_of(glob),
        abstention_auc=auc if undefined is None else MetricEstimate(n_items=n),
        auc_undefined=undefined,
        accuracy=MetricEstimate.from_draws(float(all_right.mean()), acc_draws, level, n),
        parse_rate=float(np.mean([p.parsed for p in points])),
        trajectory=trajectory,
        by_source=losses,
    )
