"""Configuration-envelope metrics
(docs/definitions.md §7; SafetyRepro §4, §5.1, App. D, F, G, I, L).

Pure functions over plain numpy / pandas inputs. Conventions used throughout:

* a *score vector* is 1-D, one score per configuration of one (model, benchmark) slice;
* a *score matrix* is 2-D, rows = configurations, columns = models (a DataFrame's columns are the
  model names; for a bare array the models are the column positions 0..M−1);
* a *long frame* has one row per cell (model × configuration) with columns ``model``, ``config``,
  ``score`` and, where used, ``benchmark``, ``parse_rate`` and the axis columns ``template``,
  ``decoding``, ``few_shot`` (the shape of :func:`flipgate.envelope.run.config_scores`).

Bad input raises :class:`flipgate.FlipgateError` naming the argument and the value at fault.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Hashable,
    Iterator,
    Mapping,
    NamedTuple,
    Sequence,
    TypeAlias,
    TypeVar,
    Union,
    cast,
)

import numpy as np
import numpy.typing as npt
import pandas as pd

from flipgate import FlipgateError, short

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

Estimate = tuple[float, float, float]
#: a score matrix: configs × models, as an array(-like) or a DataFrame whose columns are the models
ScoreMatrix: TypeAlias = Union[npt.ArrayLike, pd.DataFrame]
#: data with configurations along axis 0: a score vector or matrix, a DataFrame / Series, or a long
#: frame (with ``config_col``)
ConfigData: TypeAlias = Union[npt.ArrayLike, pd.DataFrame, pd.Series]
#: a statistic of resampled configuration data; it sees the data as the resamples are drawn (an
#: ndarray for array input, a re-indexed Series / DataFrame for pandas input), hence ``Any``
Stat: TypeAlias = Callable[[Any], float]
#: configuration indices of one resample
Indices: TypeAlias = npt.NDArray[np.integer[Any]]
SliceKey = TypeVar("SliceKey", bound=Hashable)

#: docs/definitions.md §7; SafetyRepro App. F: the four main effects and the five two-way terms of
#: the fitted OLS model (decoding:few_shot is *not* among them; it stays in the residual).
ANOVA_TERMS = (
    "model",
    "template",
    "decoding",
    "few_shot",
    "model:template",
    "model:decoding",
    "model:few_shot",
    "template:decoding",
    "template:few_shot",
)
#: docs/definitions.md §7; SafetyRepro App. F / App. H: the implementation share is η²_template +
#: η²_decoding + η²_few-shot (main effects only; model × * and template × * interactions are not
#: counted toward ρ).
IMPL_TERMS = ("template", "decoding", "few_shot")


# ---------------------------------------------------------------------------------------------
# input checks


def _short(x: object, limit: int = 80) -> str:
    return short(x.tolist() if isinstance(x, np.ndarray) else x, limit)


def _vector(fn: str, name: str, x: npt.ArrayLike, min_len: int = 1) -> npt.NDArray[np.float64]:
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise FlipgateError(f"{fn}: {name} must be numeric, got {_short(x)}") from exc
    if arr.ndim != 1:
        raise FlipgateError(
            f"{fn}: {name} must be 1-D (one score per configuration), got shape {arr.shape}"
        )
    if arr.size < min_len:
        raise FlipgateError(
            f"{fn}: {name} has {arr.size} configuration(s), need at least {min_len}"
        )
    if not np.all(np.isfinite(arr)):
        raise FlipgateError(f"{fn}: {name} contains non-finite values: {_short(arr)}")
    return arr


def _matrix(
    fn: str,
    score_matrix: ScoreMatrix,
    models: Sequence[Hashable] | None = None,
    min_configs: int = 2,
) -> tuple[npt.NDArray[np.float64], list[Hashable]]:
    names: list[Hashable] | None
    if isinstance(score_matrix, pd.DataFrame):
        names = list(score_matrix.columns) if models is None else list(models)
    else:
        names = None if models is None else list(models)
    try:
        arr = np.asarray(score_matrix, dtype=float)
    except (TypeError, ValueError) as exc:
        raise FlipgateError(
            f"{fn}: score_matrix must be numeric, got {_short(score_matrix)}"
        ) from exc
    if arr.ndim != 2:
        raise FlipgateError(
            f"{fn}: score_matrix must be 2-D (configs × models), got shape {arr.shape}"
        )
    n_cfg, n_mod = arr.shape
    if n_cfg < min_configs:
        raise FlipgateError(
            f"{fn}: score_matrix has {n_cfg} configuration(s), need at least {min_configs}"
        )
    if n_mod < 2:
        raise FlipgateError(f"{fn}: score_matrix has {n_mod} model(s), need at least 2")
    if names is None:
        names = list(range(n_mod))
    if len(names) != n_mod:
        raise FlipgateError(
            f"{fn}: models has {len(names)} names for {n_mod} columns: {_short(names)}"
        )
    if len(set(names)) != n_mod:
        raise FlipgateError(f"{fn}: models has duplicate names: {_short(names)}")
    bad = np.flatnonzero(~np.all(np.isfinite(arr), axis=1))
    if bad.size:
        raise FlipgateError(
            f"{fn}: score_matrix rows {bad[:5].tolist()} have missing/non-finite scores; "
            f"keep only configurations evaluated on every model (to_score_matrix(complete=True))"
        )
    return arr, names


# ---------------------------------------------------------------------------------------------
# per-slice dispersion


def sdi(scores: npt.ArrayLike) -> float:
    """Score Dispersion Index, docs/definitions.md §7 / SafetyRepro §4: ``(max s − min s) / mean s``
    over a slice's configs."""
    s = _vector("sdi", "scores", scores)
    mean = float(s.mean())
    if mean == 0:
        raise FlipgateError(f"sdi: scores has mean 0, SDI undefined (scores={_short(s)})")
    return float((s.max() - s.min()) / mean)


def cfr(scores: npt.ArrayLike, theta: float) -> float:
    """Compliance Flip Rate, docs/definitions.md §7 / SafetyRepro §4: ``2n/(n−1) · p(1−p)``,
    p = share of scores ≥ θ.

    Equals the share of unordered pairs of distinct configurations whose pass/fail verdicts differ
    (n=48, p=½ → 0.5106; the median-θ ceiling of SafetyRepro App. L)."""
    s = _vector("cfr", "scores", scores, min_len=2)
    if not (isinstance(theta, (int, float, np.floating, np.integer)) and math.isfinite(theta)):
        raise FlipgateError(f"cfr: theta must be a finite number, got {theta!r}")
    n = s.size
    p = float(np.mean(s >= theta))
    return float(2 * n / (n - 1) * p * (1 - p))


# ---------------------------------------------------------------------------------------------
# pairwise strict-sign verdicts (SafetyRepro §4 eq. 1, Prop. 1; §5.1 eq. 2)


def sign_counts(a: npt.ArrayLike, b: npt.ArrayLike) -> tuple[int, int, int]:
    """docs/definitions.md §7 / SafetyRepro §4 eq. (1): ``(N+, N−, N0)`` = configs with a_c > b_c,
    a_c < b_c, a_c == b_c (exact)."""
    x = _vector("sign_counts", "a", a)
    y = _vector("sign_counts", "b", b)
    if x.size != y.size:
        raise FlipgateError(
            f"sign_counts: a and b differ in length ({x.size} vs {y.size} configurations)"
        )
    return int(np.sum(x > y)), int(np.sum(x < y)), int(np.sum(x == y))


def rho_flip(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Minority strict-sign mass, docs/definitions.md §7 / SafetyRepro §5.1 eq. (2):
    ``min(N+, N−)/|C|``; ties count in N0.

    ``a`` and ``b`` are the two models' scores on the same configurations, in the same order."""
    n_plus, n_minus, n_zero = sign_counts(a, b)
    return float(min(n_plus, n_minus) / (n_plus + n_minus + n_zero))


def rho_flip_ceiling(n_configs: int) -> float:
    """Combinatorial ceiling of ``rho_flip``, docs/definitions.md §7 / SafetyRepro Prop. 1(iii):
    ``⌊|C|/2⌋/|C|``."""
    if isinstance(n_configs, bool) or not isinstance(n_configs, (int, np.integer)) or n_configs < 1:
        raise FlipgateError(
            f"rho_flip_ceiling: n_configs must be an integer ≥ 1, got {n_configs!r}"
        )
    return float((n_configs // 2) / n_configs)


def strict_disagreement(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Per-configuration-pair strict-disagreement rate, docs/definitions.md §7 / SafetyRepro §5.1:
    ``2N+N−/(|C|(|C|−1))``.

    Note: SafetyRepro calls ``rho_flip`` a lower bound of this; that holds only when the majority
    sign has at least (|C|−1)/2 configs (always true without ties), not in general (e.g. N+=N−=1,
    N0=8)."""
    n_plus, n_minus, n_zero = sign_counts(a, b)
    n = n_plus + n_minus + n_zero
    if n < 2:
        raise FlipgateError(
            f"strict_disagreement: a and b have {n} configuration(s), need at least 2"
        )
    return float(2 * n_plus * n_minus / (n * (n - 1)))


# ---------------------------------------------------------------------------------------------
# ranking concordance over configurations (SafetyRepro §4 "Ranking concordance")


def _pair_signs(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    i, j = np.triu_indices(x.shape[1], k=1)
    signs: npt.NDArray[np.float64] = np.sign(x[:, i] - x[:, j])
    return signs


def kendall_tau_matrix(
    score_matrix: ScoreMatrix, models: Sequence[Hashable] | None = None
) -> npt.NDArray[np.float64]:
    """Kendall τ-b between every pair of configurations' model rankings (C × C; NaN where a row is
    entirely tied). τ-b is the cosine of the rows' pairwise-sign vectors; it equals
    ``scipy.stats.kendalltau(x, y, variant="b")`` (ranks with averaged ties give the same value)."""
    x, _ = _matrix("kendall_tau_matrix", score_matrix, models, min_configs=1)
    s = _pair_signs(x)
    nonzero = np.sum(s != 0, axis=1).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau: npt.NDArray[np.float64] = (s @ s.T) / np.sqrt(np.outer(nonzero, nonzero))
        return tau


def tau_r(score_matrix: ScoreMatrix, models: Sequence[Hashable] | None = None) -> float:
    """τ_R, docs/definitions.md §7 / SafetyRepro §4: mean Kendall **τ-b** over all unordered pairs
    of configurations' induced model rankings (rows = configs, columns = models; ties in scores stay
    ties).

    A pair in which either configuration ties every model has no τ-b and is left out of the mean;
    NaN if no pair is defined. Needs ≥ 2 configurations and ≥ 2 models."""
    x, names = _matrix("tau_r", score_matrix, models)
    tau = kendall_tau_matrix(x, names)
    upper = tau[np.triu_indices(x.shape[0], k=1)]
    upper = upper[~np.isnan(upper)]
    return float(upper.mean()) if upper.size else float("nan")


def _tie_break_rank(names: list[Hashable]) -> npt.NDArray[np.int_]:
    try:
        # names need not be comparable: sorted raises TypeError then
        order = sorted(range(len(names)), key=lambda j: cast("SupportsRichComparison", names[j]))
    except TypeError:
        order = sorted(range(len(names)), key=lambda j: str(names[j]))
    rank = np.empty(len(names), dtype=int)
    rank[order] = np.arange(len(names))
    return rank


def total_orders(
    score_matrix: ScoreMatrix, models: Sequence[Hashable] | None = None
) -> list[tuple[Hashable, ...]]:
    """Each configuration's induced total order, best first (SafetyRepro §4 / App. V): score
    descending, ties broken alphabetically by model name
    (e.g. qwen = yi > mistral → (qwen, yi, mistral))."""
    x, names = _matrix("total_orders", score_matrix, models, min_configs=1)
    rank = _tie_break_rank(names)
    return [tuple(names[j] for j in np.lexsort((rank, -row))) for row in x]


def total_order_mismatch(
    score_matrix: ScoreMatrix, models: Sequence[Hashable] | None = None
) -> float:
    """docs/definitions.md §7 / SafetyRepro §4 "flip rate": share of unordered configuration pairs
    whose total orders (alphabetical tie-break) differ. Null (uniform random scores) = 1 − 1/M!; 5/6
    at M = 3."""
    x, names = _matrix("total_order_mismatch", score_matrix, models)
    counts = np.array(list(Counter(total_orders(x, names)).values()), dtype=float)
    n = x.shape[0]
    return float(1 - np.sum(counts * (counts - 1)) / (n * (n - 1)))


def orderings_reached(score_matrix: ScoreMatrix, models: Sequence[Hashable] | None = None) -> float:
    """docs/definitions.md §7 / SafetyRepro §5.1 "orderings/6": distinct total orders (alphabetical
    tie-break) / M!."""
    x, names = _matrix("orderings_reached", score_matrix, models, min_configs=1)
    return float(len(set(total_orders(x, names))) / math.factorial(x.shape[1]))


def to_score_matrix(
    df: pd.DataFrame,
    *,
    complete: bool = True,
    model_col: str = "model",
    config_col: str = "config",
    score_col: str = "score",
) -> pd.DataFrame:
    """Long frame (one row per model × config of one benchmark) → score matrix (configs × models).

    ``complete=True`` keeps only configurations scored for every model (SafetyRepro §5.1)."""
    _columns("to_score_matrix", df, [model_col, config_col, score_col])
    dup = df.duplicated([config_col, model_col])
    if dup.any():
        row = df.loc[dup].iloc[0]
        raise FlipgateError(
            f"to_score_matrix: df has several rows for {model_col}={row[model_col]!r}, "
            f"{config_col}={row[config_col]!r} (one benchmark, seeds averaged, expected)"
        )
    wide = df.pivot(index=config_col, columns=model_col, values=score_col)
    wide = wide.reindex(columns=sorted(wide.columns, key=str))
    return wide.dropna() if complete else wide


# ---------------------------------------------------------------------------------------------
# variance attribution (SafetyRepro §4 "Variance attribution", App. F, App. H)


def _columns(fn: str, df: object, cols: Sequence[str]) -> None:
    if not isinstance(df, pd.DataFrame):
        raise FlipgateError(f"{fn}: df must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise FlipgateError(f"{fn}: df lacks column(s) {missing} (has {list(df.columns)})")


@dataclass
class AnovaShares:
    """Result of :func:`anova_shares`. ``table`` is indexed by term plus ``Residual`` with columns
    ``sum_sq``, ``df``, ``eta_sq`` (SS/SS_total) and ``omega_sq`` (Hays; NaN on ``Residual``)."""

    table: pd.DataFrame
    ss_total: float
    ms_within: float
    model_term: str
    impl_terms: tuple[str, ...]

    @property
    def eta_model(self) -> float:
        return float(self.table.loc[self.model_term, "eta_sq"])

    @property
    def eta_impl(self) -> float:
        terms = [t for t in self.impl_terms if t in self.table.index]
        return float(self.table.loc[terms, "eta_sq"].sum())

    @property
    def eta_interaction(self) -> float:
        return float(self.table.loc[[t for t in self.table.index if ":" in t], "eta_sq"].sum())

    @property
    def eta_residual(self) -> float:
        return float(self.table.loc["Residual", "eta_sq"])

    @property
    def rho(self) -> float:
        """ρ = η²_impl / η²_model (inf when the model share is 0 and impl > 0; NaN when both are
        0)."""
        model, impl = self.eta_model, self.eta_impl
        if model == 0:
            return float("inf") if impl > 0 else float("nan")
        return impl / model

    def as_dict(self) -> dict[str, Any]:
        return {
            "eta_model": self.eta_model,
            "eta_impl": self.eta_impl,
            "eta_interaction": self.eta_interaction,
            "eta_residual": self.eta_residual,
            "rho": self.rho,
            "eta_sq": self.table["eta_sq"].drop("Residual").to_dict(),
            "omega_sq": self.table["omega_sq"].drop("Residual").to_dict(),
        }


def _parse_terms(terms: Sequence[str]) -> list[tuple[str, ...]]:
    if isinstance(terms, str) or not len(terms):
        raise FlipgateError(
            f"anova_shares: terms must be a non-empty sequence of term names, got {terms!r}"
        )
    parsed: list[tuple[str, ...]] = []
    for term in terms:
        factors = tuple(f.strip() for f in str(term).split(":"))
        if not all(f.isidentifier() for f in factors):
            raise FlipgateError(
                f"anova_shares: term {term!r} must be factor names joined by ':' "
                f"(python identifiers)"
            )
        if len(set(factors)) != len(factors) or frozenset(factors) in {
            frozenset(p) for p in parsed
        }:
            raise FlipgateError(f"anova_shares: term {term!r} is repeated or repeats a factor")
        parsed.append(factors)
    mains = {p[0] for p in parsed if len(p) == 1}
    for p in parsed:
        lacking = [f for f in p if f not in mains]
        if len(p) > 1 and lacking:
            raise FlipgateError(
                f"anova_shares: term {':'.join(p)!r} needs its main effect(s) {lacking} in "
                f"terms (Type-II SS assume a hierarchical model)"
            )
    return parsed


def _check_rank(df: pd.DataFrame, rhs: str, names: list[str]) -> None:
    import patsy

    design = patsy.dmatrix("~ " + rhs, df, return_type="matrix")
    x = np.asarray(design)
    slices = list(design.design_info.term_slices.values())  # intercept first, then terms in order
    aliased, cols, rank = [], [], 1
    cols.extend(range(x.shape[1])[slices[0]])
    for name, sl in zip(names, slices[1:]):
        new = list(range(x.shape[1])[sl])
        r = np.linalg.matrix_rank(x[:, cols + new])
        if r - rank < len(new):
            aliased.append(f"{name} ({len(new) - (r - rank)} of {len(new)} columns)")
        cols.extend(new)
        rank = r
    if aliased:
        raise FlipgateError(
            f"anova_shares: design is rank-deficient — term(s) {', '.join(aliased)} are aliased "
            f"with earlier "
            f"terms ({x.shape[0]} rows, {x.shape[1]} columns, rank {rank}); usually an empty cell "
            f"of an "
            f"interaction (e.g. after parse-clean filtering) or confounded factors. "
            f"Drop those terms via "
            f"terms=... or restrict to a complete design."
        )


def anova_shares(
    df: pd.DataFrame,
    terms: Sequence[str] = ANOVA_TERMS,
    *,
    response: str = "score",
    model_term: str = "model",
    impl_terms: Sequence[str] = IMPL_TERMS,
    total: str = "data",
) -> AnovaShares:
    """Type-II ANOVA variance shares, docs/definitions.md §7 / SafetyRepro §4, App. F (statsmodels
    ``ols`` + ``anova_lm(typ=2)``).

    ``df``: long frame of one benchmark's free-form slice, one row per (model, config) cell, with
    the ``response`` column and one column per factor named in ``terms`` (factors are treated as
    categorical via ``C()``). Default terms are those of SafetyRepro App. F (:data:`ANOVA_TERMS`).

    η²_X = SS_X/SS_total; ρ = η²_impl/η²_model with η²_impl the sum over ``impl_terms`` present in
    ``terms``; Hays ω²_X = max((SS_X − df_X·MS_W)/(SS_total + MS_W), 0) with MS_W the residual mean
    square. ``total="data"`` takes SS_total = Σ(y − ȳ)²; ``total="table"`` the sum of the ANOVA
    table's SS column (SafetyRepro's "sums to 100% by construction"); both agree on balanced
    designs, and only there do the Type-II shares add up to 1.

    Raises FlipgateError for missing columns, non-finite responses, a factor with < 2 levels, a
    rank-deficient (aliased) design — naming the aliased terms — or no residual degrees of freedom.
    """
    import warnings

    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    parsed = _parse_terms(terms)
    names = [":".join(p) for p in parsed]
    if model_term not in names:
        raise FlipgateError(f"anova_shares: model_term {model_term!r} is not among terms {names}")
    if total not in ("data", "table"):
        raise FlipgateError(f"anova_shares: total must be 'data' or 'table', got {total!r}")
    factors = sorted({f for p in parsed for f in p})
    _columns("anova_shares", df, [response, *factors])
    y = pd.to_numeric(df[response], errors="coerce")
    if not np.all(np.isfinite(y)):
        raise FlipgateError(
            f"anova_shares: response column {response!r} has {int((~np.isfinite(y)).sum())} "
            f"missing/non-numeric value(s)"
        )
    for f in factors:
        if df[f].isna().any():
            raise FlipgateError(f"anova_shares: factor column {f!r} has missing values")
        levels = df[f].unique()
        if len(levels) < 2:
            raise FlipgateError(
                f"anova_shares: factor {f!r} has a single level {levels.tolist()!r}; "
                f"drop it (and its interactions) from terms"
            )
    data = df[[*factors]].copy()
    data["_y"] = y.to_numpy(dtype=float)
    rhs = " + ".join(":".join(f"C({f})" for f in p) for p in parsed)
    _check_rank(data, rhs, names)
    fit = smf.ols("_y ~ " + rhs, data=data).fit()
    if fit.df_resid < 1:
        raise FlipgateError(
            f"anova_shares: the design is saturated ({len(data)} rows, no residual degrees of "
            f"freedom); MS_W and ω² are undefined — drop interaction terms"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aov = anova_lm(fit, typ=2)
    by_factors = {frozenset(p): n for p, n in zip(parsed, names)}
    index = []
    for label in aov.index:
        if label == "Residual":
            index.append("Residual")
            continue
        key = frozenset(re.findall(r"C\((\w+)\)", str(label)))
        if key not in by_factors:
            raise FlipgateError(
                f"anova_shares: cannot map ANOVA row {label!r} back to a term of {names}"
            )
        index.append(by_factors[key])
    table = pd.DataFrame(
        {"sum_sq": aov["sum_sq"].to_numpy(float), "df": aov["df"].to_numpy(float)}, index=index
    ).reindex([*names, "Residual"])
    ss_total = (
        float(np.sum((data["_y"] - data["_y"].mean()) ** 2))
        if total == "data"
        else float(table["sum_sq"].sum())
    )
    ms_within = float(table.loc["Residual", "sum_sq"] / table.loc["Residual", "df"])
    with np.errstate(divide="ignore", invalid="ignore"):
        table["eta_sq"] = table["sum_sq"] / ss_total
        omega = (table["sum_sq"] - table["df"] * ms_within) / (ss_total + ms_within)
    table["omega_sq"] = np.maximum(omega, 0.0)
    table.loc["Residual", "omega_sq"] = np.nan
    return AnovaShares(
        table=table,
        ss_total=ss_total,
        ms_within=ms_within,
        model_term=model_term,
        impl_terms=tuple(impl_terms),
    )


# ---------------------------------------------------------------------------------------------
# configuration bootstrap (SafetyRepro App. G) and max-statistic intervals (SafetyRepro App. I)


def _resampler(
    fn: str, data: ConfigData, config_col: str | None
) -> tuple[int, Callable[[Indices], object]]:
    """Number of configurations and a function drawing the data at configuration indices."""
    if config_col is not None:
        _columns(fn, data, [config_col])
        assert isinstance(data, pd.DataFrame)  # _columns raised otherwise
        codes, uniques = pd.factorize(data[config_col], sort=False)
        rows = [np.flatnonzero(codes == k) for k in range(len(uniques))]
        sizes = np.array([len(r) for r in rows])

        def take_long(idx: Indices) -> pd.DataFrame:
            picked = data.iloc[np.concatenate([rows[k] for k in idx])].copy()
            picked[config_col] = np.repeat(
                np.arange(len(idx)), sizes[idx]
            )  # each draw a distinct config
            return picked.reset_index(drop=True)

        return len(uniques), take_long
    if isinstance(data, (pd.DataFrame, pd.Series)):
        return len(data), lambda idx: data.iloc[idx].reset_index(drop=True)
    arr = np.asarray(data)
    if arr.ndim == 0:
        raise FlipgateError(
            f"{fn}: scores_by_config must have configurations along axis 0, got {_short(data)}"
        )
    return arr.shape[0], lambda idx: arr[idx]


def _stat_or_nan(stat: Stat, sample: object) -> float:
    try:
        return float(stat(sample))
    except FlipgateError:
        return float("nan")


def _check_boot(fn: str, n: int, level: float) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise FlipgateError(f"{fn}: n (resamples) must be an integer ≥ 1, got {n!r}")
    if not 0 < level < 1:
        raise FlipgateError(f"{fn}: level must lie in (0, 1), got {level!r}")


def _percentiles(estimate: float, draws: npt.NDArray[np.float64], level: float) -> Estimate:
    draws = draws[~np.isnan(draws)]
    if draws.size == 0:
        return float(estimate), float("nan"), float("nan")
    alpha = (1 - level) / 2
    lo, hi = np.quantile(draws, [alpha, 1 - alpha])
    return float(estimate), float(lo), float(hi)


def config_bootstrap_draws(
    scores_by_config: ConfigData,
    stat: Stat,
    n: int = 1000,
    seed: int = 42,
    *,
    config_col: str | None = None,
) -> npt.NDArray[np.float64]:
    """The ``n`` resampled values of ``stat`` behind :func:`config_bootstrap` (NaN where the stat
    is undefined on a resample, i.e. returned NaN or raised FlipgateError)."""
    _check_boot("config_bootstrap", n, 0.95)
    size, take = _resampler("config_bootstrap", scores_by_config, config_col)
    if size < 2:
        raise FlipgateError(
            f"config_bootstrap: scores_by_config has {size} configuration(s), need at least 2"
        )
    idx = np.random.default_rng(seed).integers(0, size, size=(n, size))
    return np.array([_stat_or_nan(stat, take(row)) for row in idx])


def config_bootstrap(
    scores_by_config: ConfigData,
    stat: Stat,
    n: int = 1000,
    seed: int = 42,
    level: float = 0.95,
    *,
    config_col: str | None = None,
) -> Estimate:
    """Configuration bootstrap, docs/definitions.md §7 / SafetyRepro App. G: resample configurations
    with replacement ``n`` times, recompute ``stat``; returns ``(stat(data), lo, hi)``, the
    percentile interval (``stat`` sees the data as the resamples do: arrays as ndarrays, frames
    re-indexed).

    ``scores_by_config``: configurations along axis 0 — a score vector, a score matrix (array or
    DataFrame, rows = configs), or, with ``config_col``, a long frame whose rows sharing a
    ``config_col`` value are drawn together (in a resample each draw gets a fresh ``config_col``
    value 0..C−1, so duplicated configurations stay distinct). Resamples on which ``stat`` is
    undefined (NaN or FlipgateError, e.g. an aliased ANOVA) are left out of the percentiles; use
    :func:`config_bootstrap_draws` to count them."""
    _check_boot("config_bootstrap", n, level)
    draws = config_bootstrap_draws(scores_by_config, stat, n, seed, config_col=config_col)
    size, take = _resampler("config_bootstrap", scores_by_config, config_col)
    estimate = float(stat(take(np.arange(size))))  # same representation as the resamples
    return _percentiles(estimate, draws, level)


class MaxStatInterval(NamedTuple):
    """Max-statistic interval (docs/definitions.md §7; SafetyRepro App. I): headline max, its
    resampling interval, the argmax slice."""

    estimate: float
    lo: float
    hi: float
    slice: Hashable


def max_stat_bootstrap(
    slices: Mapping[SliceKey, ConfigData],
    stat: Stat,
    n: int = 1000,
    seed: int = 42,
    level: float = 0.95,
    *,
    groups: Mapping[SliceKey, Hashable] | None = None,
    config_col: str | None = None,
) -> MaxStatInterval:
    """Max-statistic configuration-bootstrap interval for an "up to X" headline,
    docs/definitions.md §7 / SafetyRepro App. I.

    ``slices`` maps a slice name (e.g. (model, benchmark)) to that slice's per-config data (as in
    :func:`config_bootstrap`). In each of ``n`` configuration resamples the metric is recomputed on
    every slice and the max taken; the ``(1−level)/2`` and ``(1+level)/2`` percentiles of those
    maxima bound the headline ``max_s stat(slice_s)``. This is SafetyRepro's interval for the
    *maximum* (multiplicity over slices), not a per-slice simultaneous band. Slices with the same
    ``groups`` value (e.g. one benchmark's models, configs aligned in the same order and count)
    share their configuration draws; by default every slice is resampled independently. With a
    single slice this equals :func:`config_bootstrap` at the same seed."""
    _check_boot("max_stat_bootstrap", n, level)
    if not isinstance(slices, Mapping) or not slices:
        raise FlipgateError(
            f"max_stat_bootstrap: slices must be a non-empty mapping name → data, got "
            f"{type(slices).__name__}"
        )
    names = list(slices)
    groups = {s: s for s in names} if groups is None else dict(groups)
    missing = [s for s in names if s not in groups]
    if missing:
        raise FlipgateError(f"max_stat_bootstrap: groups has no entry for slice(s) {missing[:5]}")
    takers, sizes = {}, {}
    for s in names:
        sizes[s], takers[s] = _resampler("max_stat_bootstrap", slices[s], config_col)
        if sizes[s] < 2:
            raise FlipgateError(
                f"max_stat_bootstrap: slice {s!r} has {sizes[s]} configuration(s), need ≥ 2"
            )
    rng = np.random.default_rng(seed)
    draws_for: dict[Hashable, npt.NDArray[np.int64]] = {}
    for s in names:
        g = groups[s]
        if g in draws_for:
            if draws_for[g].shape[1] != sizes[s]:
                raise FlipgateError(
                    f"max_stat_bootstrap: slice {s!r} has {sizes[s]} configurations but its "
                    f"group {g!r} has {draws_for[g].shape[1]}; grouped slices must be aligned"
                )
            continue
        draws_for[g] = rng.integers(0, sizes[s], size=(n, sizes[s]))
    point = np.array([_stat_or_nan(stat, takers[s](np.arange(sizes[s]))) for s in names])
    if np.all(np.isnan(point)):
        raise FlipgateError("max_stat_bootstrap: stat is undefined on every slice")
    per_slice = np.array(
        [[_stat_or_nan(stat, takers[s](draws_for[groups[s]][r])) for s in names] for r in range(n)]
    )
    with np.errstate(all="ignore"):
        maxima = np.where(
            np.all(np.isnan(per_slice), axis=1),
            np.nan,
            np.nanmax(np.where(np.isnan(per_slice), -np.inf, per_slice), axis=1),
        )
    best = int(np.nanargmax(point))
    est, lo, hi = _percentiles(float(point[best]), maxima, level)
    return MaxStatInterval(est, lo, hi, names[best])


# ---------------------------------------------------------------------------------------------
# whole-envelope tables and the parse-clean recomputation (SafetyRepro App. D)


def _benchmarks(df: pd.DataFrame, benchmark_col: str) -> Iterator[tuple[Hashable, pd.DataFrame]]:
    if benchmark_col in df.columns:
        yield from df.groupby(benchmark_col, sort=True)
    else:
        yield None, df


def slice_metrics(
    df: pd.DataFrame,
    thetas: Sequence[float] = (0.5, 0.7),
    *,
    benchmark_col: str = "benchmark",
    model_col: str = "model",
    score_col: str = "score",
) -> pd.DataFrame:
    """Per (benchmark, model) slice: n, s_min, s_max, s_mean, ``sdi`` and ``cfr_<θ>``
    (docs/definitions.md §7; SafetyRepro App. E, L). Undefined values (n < 2 for CFR, mean 0 for
    SDI) are NaN rather than errors."""
    _columns("slice_metrics", df, [model_col, score_col])
    rows = []
    for bench, part in _benchmarks(df, benchmark_col):
        for model, cell in part.groupby(model_col, sort=True):
            s = cell[score_col].to_numpy(float)
            row = {
                benchmark_col: bench,
                model_col: model,
                "n": s.size,
                "s_min": s.min(),
                "s_max": s.max(),
                "s_mean": s.mean(),
                "sdi": sdi(s) if s.mean() != 0 else float("nan"),
            }
            for theta in thetas:
                row[f"cfr_{theta:g}"] = cfr(s, theta) if s.size >= 2 else float("nan")
            rows.append(row)
    cols = [
        benchmark_col,
        model_col,
        "n",
        "s_min",
        "s_max",
        "s_mean",
        "sdi",
        *(f"cfr_{t:g}" for t in thetas),
    ]
    out = pd.DataFrame(rows, columns=cols)
    return out.drop(columns=benchmark_col) if benchmark_col not in df.columns else out


def pair_flips(
    df: pd.DataFrame,
    *,
    benchmark_col: str = "benchmark",
    model_col: str = "model",
    config_col: str = "config",
    score_col: str = "score",
) -> pd.DataFrame:
    """Per benchmark and model pair (A < B by name; N+ counts A > B) over the configurations scored
    for every model: n_configs, n_plus, n_minus, n_zero, rho_flip, strict_disagreement, ceiling."""
    rows = []
    for bench, part in _benchmarks(df, benchmark_col):
        wide = to_score_matrix(
            part, model_col=model_col, config_col=config_col, score_col=score_col
        )
        for a, b in itertools.combinations(wide.columns, 2):
            c = len(wide)
            if c == 0:
                continue
            n_plus, n_minus, n_zero = sign_counts(wide[a], wide[b])
            rows.append(
                {
                    benchmark_col: bench,
                    "model_a": a,
                    "model_b": b,
                    "n_configs": c,
                    "n_plus": n_plus,
                    "n_minus": n_minus,
                    "n_zero": n_zero,
                    "rho_flip": min(n_plus, n_minus) / c,
                    "strict_disagreement": 2 * n_plus * n_minus / (c * (c - 1))
                    if c > 1
                    else float("nan"),
                    "ceiling": rho_flip_ceiling(c),
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            benchmark_col,
            "model_a",
            "model_b",
            "n_configs",
            "n_plus",
            "n_minus",
            "n_zero",
            "rho_flip",
            "strict_disagreement",
            "ceiling",
        ],
    )


def ordering_metrics(
    df: pd.DataFrame,
    *,
    benchmark_col: str = "benchmark",
    model_col: str = "model",
    config_col: str = "config",
    score_col: str = "score",
) -> pd.DataFrame:
    """Per benchmark, over configurations scored for every model (docs/definitions.md §7;
    SafetyRepro Tab. 2, §4): n_configs, n_models, tau_r, total_order_mismatch, n_orderings,
    orderings_reached, rho_flip_max and its pair. NaN where fewer than 2 complete configurations or
    models remain."""
    rows = []
    flips = pair_flips(
        df,
        benchmark_col=benchmark_col,
        model_col=model_col,
        config_col=config_col,
        score_col=score_col,
    )
    for bench, part in _benchmarks(df, benchmark_col):
        wide = to_score_matrix(
            part, model_col=model_col, config_col=config_col, score_col=score_col
        )
        row = {benchmark_col: bench, "n_configs": len(wide), "n_models": wide.shape[1]}
        ok = len(wide) >= 2 and wide.shape[1] >= 2
        row["tau_r"] = tau_r(wide) if ok else float("nan")
        row["total_order_mismatch"] = total_order_mismatch(wide) if ok else float("nan")
        row["n_orderings"] = len(set(total_orders(wide))) if len(wide) and wide.shape[1] >= 2 else 0
        row["orderings_reached"] = orderings_reached(wide) if ok else float("nan")
        mine = flips if bench is None else flips[flips[benchmark_col] == bench]
        if ok and len(mine):
            top = mine.loc[mine["rho_flip"].idxmax()]
            row.update(
                rho_flip_max=float(top["rho_flip"]),
                rho_flip_pair=(top["model_a"], top["model_b"]),
                rho_flip_ceiling=rho_flip_ceiling(len(wide)),
            )
        else:
            row.update(rho_flip_max=float("nan"), rho_flip_pair=None, rho_flip_ceiling=float("nan"))
        rows.append(row)
    cols = [
        benchmark_col,
        "n_configs",
        "n_models",
        "tau_r",
        "total_order_mismatch",
        "n_orderings",
        "orderings_reached",
        "rho_flip_max",
        "rho_flip_pair",
        "rho_flip_ceiling",
    ]
    out = pd.DataFrame(rows, columns=cols)
    return out.drop(columns=benchmark_col) if benchmark_col not in df.columns else out


@dataclass
class ParseClean:
    """Result of :func:`parse_clean`: ``frame`` = kept cells (all columns of the input), ``dropped``
    = cells under the threshold, ``complete`` = ``frame`` restricted to configurations whose every
    model was kept, and the recomputed ``slices`` (:func:`slice_metrics` on ``frame``) and
    ``orderings`` (:func:`ordering_metrics` on ``complete``)."""

    frame: pd.DataFrame
    dropped: pd.DataFrame
    complete: pd.DataFrame
    slices: pd.DataFrame
    orderings: pd.DataFrame
    min_parse_rate: float


def parse_clean(
    df: pd.DataFrame,
    min_parse_rate: float = 0.95,
    thetas: Sequence[float] = (0.5, 0.7),
    *,
    benchmark_col: str = "benchmark",
    model_col: str = "model",
    config_col: str = "config",
    score_col: str = "score",
    parse_col: str = "parse_rate",
) -> ParseClean:
    """Parse-clean recomputation, docs/definitions.md §7 / SafetyRepro App. D, §5.1: keep only cells
    (model × config) with parse rate ≥ ``min_parse_rate`` and recompute. Per-slice metrics (SDI,
    CFR) use every kept cell (SafetyRepro's 579 of 612 cells); ordering metrics (τ_R, mismatch,
    orderings, ρ_flip) use only configurations where every model of the benchmark kept its cell
    ("all-three-models parse rate ≥ 0.95"). ``df``: long frame, one row per cell (seeds averaged).
    For the ANOVA ρ, call :func:`anova_shares` on ``result.frame`` (it may be aliased once cells are
    gone)."""
    keys = ([benchmark_col] if benchmark_col in getattr(df, "columns", []) else []) + [
        model_col,
        config_col,
    ]
    _columns("parse_clean", df, [*keys, score_col, parse_col])
    if not (isinstance(min_parse_rate, (int, float, np.floating)) and 0 <= min_parse_rate <= 1):
        raise FlipgateError(
            f"parse_clean: min_parse_rate must lie in [0, 1], got {min_parse_rate!r}"
        )
    dup = df.duplicated(keys)
    if dup.any():
        first = df.loc[dup, keys].iloc[0].to_dict()
        raise FlipgateError(
            f"parse_clean: df has several rows for cell {first}; average seeds first "
            f"(flipgate.envelope.run.config_scores)"
        )
    rate = pd.to_numeric(df[parse_col], errors="coerce")
    if rate.isna().any():
        raise FlipgateError(
            f"parse_clean: column {parse_col!r} has {int(rate.isna().sum())} missing value(s)"
        )
    keep = rate >= min_parse_rate
    frame, dropped = df.loc[keep].copy(), df.loc[~keep].copy()
    bench_keys = keys[:-2]
    n_models = (
        df.groupby(bench_keys)[model_col].nunique() if bench_keys else df[model_col].nunique()
    )
    kept_per_cfg = frame.groupby(bench_keys + [config_col])[model_col].nunique()
    if bench_keys:
        need = n_models.reindex(kept_per_cfg.index.get_level_values(0)).to_numpy()
    else:
        need = n_models
    full = set(kept_per_cfg.index[kept_per_cfg.to_numpy() == need])
    cfg_key = (
        frame[bench_keys + [config_col]].apply(tuple, axis=1) if bench_keys else frame[config_col]
    )
    complete = frame.loc[cfg_key.isin(full)] if len(frame) else frame
    return ParseClean(
        frame=frame,
        dropped=dropped,
        complete=complete,
        slices=slice_metrics(
            frame, thetas, benchmark_col=benchmark_col, model_col=model_col, score_col=score_col
        ),
        orderings=ordering_metrics(
            complete,
            benchmark_col=benchmark_col,
            model_col=model_col,
            config_col=config_col,
            score_col=score_col,
        ),
        min_parse_rate=float(min_parse_rate),
    )
