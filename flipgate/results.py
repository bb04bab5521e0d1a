"""Typed results, computed once and read everywhere (store, cards, Allure, terminal, comparisons).

Pydantic v2 models, frozen: they validate what comes back from the run store, serialise to the
JSON the cards carry (a NaN becomes ``null`` in the model, not in a walker over the output) and
can describe themselves as JSON Schema. Frozen dataclasses would need all three written by hand.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_serializer,
    model_validator,
)

from flipgate.backends.base import Output, Request, prompt_sha256


def _finite_or_none(value: Any) -> Any:
    """NaN (a missing estimate) as None; anything else unchanged, for pydantic to validate."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


#: a number that may be missing; NaN is read as missing
Number = Annotated[float | None, BeforeValidator(_finite_or_none)]


class Trial(BaseModel):
    """One model call (docs/definitions.md §1), as the run store keeps it and the metrics read
    it: who answered which item under which ordering, the raw output, each readout's label, the
    content label it maps back to and whether that is correct."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    model_id: str
    model_fingerprint: str
    dataset: str
    item_id: str
    facet: str  # the cell: a facet, ``<control>:<facet>`` or ``envelope[<configuration>]``
    condition: int  # ordering index o (0 = canonical) or the control's replicate
    permutation: list[int]
    sample: int
    prompt_sha256: str
    raw_output: str  # the backend's Output as JSON
    readouts: dict[str, str | None]  # readout -> displayed label (None: unparsed)
    mapped: dict[str, Any]  # readout -> content label (option index or normalised answer)
    correct: dict[str, bool | None]
    gold: str | None
    n_classes: int
    tokens_in: int
    tokens_out: int
    latency_s: float
    cost_usd: float
    from_cache: int

    @classmethod
    def of(cls, request: Request, output: Output, cached: bool, **fields: Any) -> Trial:
        """The trial of ``request`` answered by ``output``: prompt hash, raw output, token counts,
        latency, cost and cache flag from them, every other field from ``fields``."""
        return cls(
            prompt_sha256=prompt_sha256(request),
            raw_output=json.dumps(output.to_dict()),
            tokens_in=output.tokens_in,
            tokens_out=output.tokens_out,
            latency_s=output.latency_s,
            cost_usd=output.cost_usd,
            from_cache=int(cached),
            **fields,
        )


#: the run store's trial columns, in order
TRIAL_COLUMNS = list(Trial.model_fields)


def trials_frame(trials: list[Trial]) -> pd.DataFrame:
    """Trials as the table the metrics read (one row per trial, :data:`TRIAL_COLUMNS`)."""
    return pd.DataFrame([t.model_dump() for t in trials], columns=TRIAL_COLUMNS)


#: fields a gate adds to some verdicts only (see :class:`Verdict`)
CONTEXT_FIELDS = frozenset(
    {"facet", "model", "target", "mcnemar", "q_value", "interval", "test", "undecided"}
)

Direction = Literal["max", "min"]
Label = Literal["pass", "fail", "inconclusive", "warn", "missing"]
Outcome = Literal["pass", "warn", "xfail", "fail"]


class Undecided(BaseModel):
    """Why a ``lower``/``upper`` verdict is undecided at its cap ``n`` (docs/definitions.md §12.8,
    flipgate.metrics.undecided): **under-powered** when ``n_star`` — the items at which the
    fixed-N test would reject if the estimate stayed where it is — is at most ``limit``
    (10 · n), else **at its bound**, ``distance`` = |estimate − bound| from it. ``n_star`` None:
    more than ``limit`` (``by: test``, searched up to it) or never (the estimate on the bound).
    ``by``: n* from the cell's fixed-N tests (``test``) or from its interval narrowing as 1/√n
    (``interval``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reason: Literal["under-powered", "at its bound"]
    n: int
    n_star: int | None
    distance: float
    limit: int
    by: Literal["test", "interval"]

    def text(self) -> str:
        """One phrase, e.g. "under-powered: 412 items would decide it (cap 64)"."""
        if self.reason == "under-powered":
            return f"under-powered: {self.n_star} items would decide it (cap {self.n})"
        if self.n_star is not None:
            n_star = f"n* = {self.n_star}"
        elif self.distance == 0:
            n_star = "n* = ∞"
        else:
            n_star = f"n* > {self.limit}"
        return (
            f"at its bound: |estimate − bound| = {self.distance:.3g}; no affordable N decides it "
            f"({n_star}, cap {self.n})"
        )


def label_text(verdict: dict[str, Any]) -> str:
    """A verdict's label (JSON data) with, when undecided, why: e.g. "inconclusive
    (under-powered: 412 items would decide it (cap 64))"."""
    why = verdict.get("undecided")
    return _with_reason(str(verdict["verdict"]), Undecided.model_validate(why) if why else None)


def _with_reason(label: str, why: Undecided | None) -> str:
    return f"{label} ({why.text()})" if why else label


class Verdict(BaseModel):
    """One threshold applied to one cell (docs/thresholds.md): the bound, the estimate and CI it
    was decided on, the verdict *label* and what the release gate does with it (*outcome*).

    ``facet`` names the cell (a facet, a control, ``envelope``, ``odi`` or ``<cell> vs
    <baseline>``); ``model``, ``target`` and ``mcnemar`` are given only by the envelope, ODI and
    regression gates. ``q_value`` is the run-wide Benjamini–Hochberg adjustment of ``p_value``,
    known only once every cell has run (cards). A context field never given (not even as None) is
    left out of the JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    threshold: str
    metric: str
    bound: float
    direction: Direction
    rule: str
    level: float | None
    readout: str | None
    estimate: Number
    ci: tuple[Number, Number] | None
    verdict: Label
    outcome: Outcome
    p_value: Number = None
    source: str | None = None
    why: str | None = None
    facet: str | None = None
    model: str | None = None
    target: str | None = None
    mcnemar: dict[str, Any] | None = None
    q_value: Number = None
    #: what ``ci`` is when a threshold was decided by tests (docs/definitions.md §12.6), shown for
    #: reading and never deciding: ``confidence_sequence`` (a sequential cell) or ``bootstrap``;
    #: left out when the CI itself decided (a gate without per-item values)
    interval: str | None = None
    #: the one-sided test that decided the verdict with its e-value or p-value, or both tests
    #: while undecided (docs/definitions.md §12.1)
    test: str | None = None
    #: why a ``lower``/``upper`` verdict is undecided (``inconclusive``) at its cap
    #: (docs/definitions.md §12.8)
    undecided: Undecided | None = None

    @model_serializer(mode="wrap")
    def _without_unset_context(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in CONTEXT_FIELDS - self.model_fields_set:
            data.pop(key, None)
        return data

    def with_context(self, **fields: Any) -> Verdict:
        """A copy with context fields (``facet``, ``model``, ``target``, ``mcnemar``, ``q_value``)
        or a renamed ``threshold`` / ``readout`` given, validated like the original."""
        return Verdict.model_validate({**self.model_dump(), **fields})

    def describe(self) -> str:
        """One line for the terminal: who, threshold, source, estimate and CI, verdict."""
        level = f" {self.level:.0%}" if self.level else ""
        ci = self.ci
        kind = {
            "confidence_sequence": "confidence sequence (shown)",
            "bootstrap": "CI (shown)",
        }.get(self.interval or "", "CI")
        ci_text = (
            f"{level} {kind} [{ci[0]:.3f}, {ci[1]:.3f}]"
            if ci and ci[0] is not None and ci[1] is not None
            else ""
        )
        est = "no estimate" if self.estimate is None else f"{self.estimate:.3f}"
        who = f"{self.model}: " if self.model else ""
        unproven = (
            " (not proven)" if self.verdict == "inconclusive" and self.rule == "upper" else ""
        )
        by = f" by {self.test}" if self.test and self.verdict in ("pass", "fail") else ""
        why = f"; {self.undecided.text()}" if self.undecided else ""
        return (
            f"{who}{self.threshold} [{self.source}]: {est}{ci_text} -> "
            f"{self.verdict}{unproven}{by}{why}"
        )

    @property
    def label_text(self) -> str:
        """The label with, when undecided, why (:func:`label_text`)."""
        return _with_reason(self.verdict, self.undecided)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> Verdict:
        return cls.model_validate_json(text)


class MetricEstimate(BaseModel):
    """One metric of a cell: its point estimate, its interval (``None`` for a metric that has
    none, ``(None, None)`` when there was nothing to resample) and, for paired deltas, the
    number of items both arms scored. ``level`` and the bootstrap ``draws`` (from which a
    threshold recomputes the CI at its own level and a one-sided p-value) stay out of the JSON;
    the card states the run's level once."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    estimate: Number = None
    ci: tuple[Number, Number] | None = None
    n_items: int | None = None
    level: float | None = Field(default=None, exclude=True)
    draws: np.ndarray | None = Field(default=None, exclude=True, repr=False)
    #: for a mean of per-item values in [0, 1]: the items behind it, at which a gate widens the
    #: interval to Wilson's (flipgate.metrics.proportion; valid at small N)
    n_units: int | None = Field(default=None, exclude=True)

    @classmethod
    def from_draws(
        cls, estimate: float, draws: np.ndarray, level: float, n_items: int | None = None
    ) -> MetricEstimate:
        """``estimate`` with the equal-tailed ``level`` interval of its bootstrap ``draws``; no
        draws (nothing to resample) means no estimate either."""
        if not draws.size:
            return cls(ci=(None, None), n_items=n_items, level=level, draws=draws)
        lo, hi = np.quantile(draws, [(1 - level) / 2, 1 - (1 - level) / 2])
        return cls(
            estimate=estimate,
            ci=(float(lo), float(hi)),
            n_items=n_items,
            level=level,
            draws=draws,
        )

    @model_serializer(mode="wrap")
    def _without_unset_n(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.n_items is None:
            data.pop("n_items", None)
        return data


def _is_metric_block(value: Any) -> bool:
    return isinstance(value, MetricEstimate) or (isinstance(value, dict) and "estimate" in value)


def estimates(block: dict[str, Any]) -> dict[str, MetricEstimate]:
    """The ``{estimate, ci}`` blocks of an analysis's JSON (envelope, ODI) as estimates."""
    return {k: MetricEstimate.model_validate(v) for k, v in block.items() if _is_metric_block(v)}


#: a cell's fields that only an ordering facet's summary has (K analyses, docs/definitions.md §3.4)
K_FIELDS = ("k_policies", "k2_screen_recall", "k_ablation")


class CellSummary(BaseModel):
    """Every metric of one cell under one readout, with the cell's sizes and (for an ordering
    facet, not a control) its K analyses. Its JSON is flat, as the card shows it:
    ``{metric: {estimate, ci}, ..., "n_items": N, "k": K, ...}``."""

    model_config = ConfigDict(frozen=True)

    metrics: dict[str, MetricEstimate]
    n_items: int
    n_items_insufficient: int
    k: int
    n_trials: int
    k_policies: list[dict[str, Any]] | None = None
    k2_screen_recall: Number = None
    k_ablation: dict[str, Number] | None = None
    #: a same-ordering control's floor when its backend did not measure it
    #: (flipgate.backends.floor.NOT_MEASURED_FLOOR, docs/definitions.md §12.5); left out of the
    #: JSON when measured
    floor: str | None = None

    @property
    def has_k_analyses(self) -> bool:
        return self.k_policies is not None

    @model_validator(mode="before")
    @classmethod
    def _from_flat(cls, data: Any) -> Any:
        """Read the flat JSON form back: every ``{estimate, ...}`` block is a metric."""
        if isinstance(data, dict) and "metrics" not in data:
            metrics = {k: v for k, v in data.items() if _is_metric_block(v)}
            data = {k: v for k, v in data.items() if k not in metrics} | {"metrics": metrics}
        return data

    @model_serializer(mode="wrap")
    def _flat(self, handler: Any) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        flat = data.pop("metrics")
        if not self.has_k_analyses:
            for key in K_FIELDS:
                data.pop(key)
        if self.floor is None:
            data.pop("floor")
        return {**flat, **data}

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> CellSummary:
        return cls.model_validate_json(text)
