"""The GRID card as typed models (docs/definitions.md §6): what :mod:`flipgate.cards.build`
assembles, what the card JSON is written from and what ``grid_card.schema.json`` is generated
from (``make schema``: :mod:`flipgate.cards.schema`).

Pydantic v2, frozen, in the style of :mod:`flipgate.results`: a number that may be missing is a
:data:`~flipgate.results.Number` (NaN read as None, written as null). The card's optional keys
are absent, not null (:class:`CardModel`): a field that was not given is left out of the JSON,
and so is an ``X | Absent`` field given as None (``calls``, ``envelope``, ``odi``, a control's
``delta_order``, ...). Blocks whose shape belongs to another module's analysis (the envelope's
anchor, variance shares, parse-clean recomputation and configuration rows) are open
``dict[str, Any]``.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, SkipJsonSchema
from pydantic_core import core_schema

from flipgate.results import MetricEstimate, Number, Outcome, Verdict

SCHEMA_PATH = Path(__file__).parent / "grid_card.schema.json"
SCHEMA_VERSION: Final = "grid-card/0.1"


def _nan_as_none(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


_OMITTED = "omitted when None"
#: ``X | Absent``: a key that is left out when None (or not given), never null; the schema does
#: not admit null
Absent = Annotated[SkipJsonSchema[None], _OMITTED]
#: a count
Count = Annotated[int, Field(ge=0)]
#: a probability that may be missing (NaN read as missing)
Probability = Annotated[Annotated[float, Field(ge=0, le=1)] | None, BeforeValidator(_nan_as_none)]
#: a confidence level, or None where none applies
Level = Annotated[float, Field(gt=0, lt=1)] | None
#: a sha256 (hex), or None where it is not known
Sha = str | None
#: an interval's two bounds
Interval = tuple[Number, Number]


@cache
def _omitted_when_none(cls: type[BaseModel]) -> frozenset[str]:
    """The ``X | Absent`` fields of ``cls``."""
    return frozenset(
        name
        for name, field in cls.model_fields.items()
        if any(_OMITTED in getattr(arg, "__metadata__", ()) for arg in get_args(field.annotation))
    )


class CardModel(BaseModel):
    """A part of a card: frozen and closed. Its JSON leaves out a field that was not given (a
    key the card does not have, as validated or constructed) and an ``X | Absent`` field that is
    None."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in type(self).model_fields.keys() - self.model_fields_set:
            data.pop(key, None)
        for key in _omitted_when_none(type(self)):
            if data.get(key, 0) is None:
                del data[key]
        return data


class Estimate(CardModel):
    """A point estimate and its confidence interval (None: no interval, e.g. a max − min)."""

    estimate: Number
    ci: Interval | None

    @classmethod
    def of(cls, m: MetricEstimate) -> Estimate:
        """A result's estimate and CI as the card states them."""
        return cls(estimate=m.estimate, ci=m.ci)


# ---------------------------------------------------------------------------------------------
# identity: model, dataset, run


class ModelInfo(CardModel):
    id: str
    backend: str
    source: str | None = None


class Screen(CardModel):
    """A position-reference screen: items excluded of those considered."""

    excluded: Count
    considered: Count
    kept: Count


class DatasetInfo(CardModel):
    name: str
    n_items: int
    sampling: str
    screens: dict[str, Screen] | Absent = None


class Calls(CardModel):
    """API calls of this model over the run (pilot included): requests asked, attempts retried,
    attempts timed out, calls failed after their last attempt"""

    requests: Count
    retries: Count
    timeouts: Count
    failures: Count | Absent = None


class RunInfo(CardModel):
    run_id: str
    created: str
    trials_store: str
    calls: Calls | Absent = None
    interrupted: str | Absent = None
    """Present only where the run was interrupted before its end (why: SIGINT, SIGTERM, ...): the
    card is partial, its cells and threshold verdicts are those of the cells that finished (or a
    cell's trials so far), not the audit's verdict"""


# ---------------------------------------------------------------------------------------------
# axis receipt


class Template(CardModel):
    id: str
    sha256: Sha


class Decoding(CardModel):
    """Decoding settings: models.yaml's for a facet card (temperature, top_p, max_new_tokens), the
    anchor configuration's for an envelope card (name)."""

    name: str | Absent = None
    temperature: float | int | Absent = None
    top_p: float | int | Absent = None
    max_new_tokens: int | None = None
    greedy: bool


class FewShot(CardModel):
    count: Count
    exemplar_ids: list[str]


class ScoringPath(CardModel):
    primary_readout: dict[str, str]
    """facet -> its primary readout"""
    readouts: list[str]
    map_back: dict[str, str]
    """facet -> how a displayed label maps back to the content label"""


class AxisReceipt(CardModel):
    """What was held fixed (SafetyRepro App. B (i)): templates, decoding, few-shot, scoring path,
    weights and tokenizer, library versions, manifests, envelope rules, code version."""

    template_id: str
    template_sha256: Sha
    templates: dict[str, Template] | Absent = None
    decoding: Decoding
    few_shot: FewShot
    scoring_path: ScoringPath
    quantization: str | None
    dtype: str | None = None
    dtype_choice: str | Absent = None
    """how a local model's dtype was chosen: declared, or ``auto`` by what the hardware computes
    natively (e.g. "auto: CPU without native bf16 (torch CPU kernels AVX2) -> float32")"""
    engine: str | Absent = None
    """how the answers were computed: a local backend's library and shared-prefix KV cache, or
    the inference server flipgate started (engine and version)"""
    server: dict[str, str | int] | Absent = None
    """the settings of the inference server flipgate started for the model (threads, parallel
    slots, context, answer prefill; docs/servers.md)"""
    weights_sha256: str
    model_revision: str | None
    tokenizer_sha256: Sha
    chat_template_sha256: Sha
    library_versions: dict[str, str | None]
    manifest_sha256: dict[str, str]
    envelope_rules_sha256: Sha
    git_commit: str | None


# ---------------------------------------------------------------------------------------------
# scores and per-cell metrics


class Scores(CardModel):
    facet: str
    primary_readout: str
    accuracy_canonical: Estimate
    accuracy_all_orderings: Estimate


class KPolicy(CardModel):
    """One answering policy over the K orderings (docs/definitions.md §3)."""

    policy: str
    k: Count
    cost: Count
    accuracy: Number
    selective_accuracy: Number
    coverage: Number


class MetricBlock(CardModel):
    """One cell's metrics under one readout (docs/definitions.md §3): a facet's, or a same-ordering
    control's (``flip_rate_same``, ``flip_rate_perm``, ``delta_order``, ...). Open: a metric not
    named here is kept as it is."""

    model_config = ConfigDict(extra="allow")

    flip_rate: Estimate
    osi: Estimate
    pairwise_disagreement: Estimate
    parse_rate: Estimate
    accuracy: Estimate
    sem_flip_rate: Estimate | Absent = None
    judge_parse_rate: Estimate | Absent = None
    acc_swing: Estimate
    n_items: Count
    n_items_insufficient: Count | Absent = None
    k: Count
    n_trials: Count | Absent = None
    k_policies: list[KPolicy] | Absent = None
    k2_screen_recall: Number = None
    k_ablation: dict[str, Number] | Absent = None
    flip_rate_same: Estimate | Absent = None
    flip_rate_perm: Estimate | Absent = None
    delta_order: Estimate | Absent = None
    ordering_excess_share: Estimate | Absent = None
    floor: str | Absent = None
    """a control's noise floor when its backend did not measure it: "0 by construction (not
    measured)" (docs/definitions.md §12.5); its flip rate is then that of copies and its Δ_order
    the facet's flip rate against that floor; absent when measured"""


#: cell -> readout -> metrics
Cells = dict[str, dict[str, MetricBlock]]


class CardVerdict(Verdict):
    """A threshold verdict as the card lists it (:class:`flipgate.results.Verdict`, with its
    BH ``q_value``)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    level: Level
    outcome: Outcome
    """what the gate did with the verdict (docs/thresholds.md)"""
    p_value: Probability = None
    why: str | None = None
    """the threshold's optional why: rationale from its thresholds file"""
    q_value: Probability = None


class Scope(CardModel):
    varied: list[str]
    not_varied: list[str]


# ---------------------------------------------------------------------------------------------
# configuration envelope (docs/definitions.md §6-§7, §11)


class Neighbourhood(CardModel):
    min: Number
    mean: Number
    max: Number
    sdi: Estimate
    n_configs: Count | Absent = None
    parse_rate_mean: Number = None


class RosterPair(CardModel):
    """Two roster models over the shared configurations: N+ / N− / N0, ρ_flip, its ceiling."""

    benchmark: str | None = None
    model_a: str
    model_b: str
    n_configs: Count
    n_plus: Count
    n_minus: Count
    n_zero: Count
    rho_flip: Number
    strict_disagreement: Number
    ceiling: Number


class RankingStability(CardModel):
    models: list[str]
    n_configs: Count | Absent = None
    pairs: list[RosterPair]
    note: str | Absent = None
    """why τ_R is not given (fewer than two models or configurations)"""
    tau_r: Estimate | Absent = None
    total_order_mismatch: Estimate | Absent = None
    orderings_reached: Estimate | Absent = None
    orders: dict[str, int] | Absent = None


class ParseClean(CardModel):
    min_parse_rate: float | int
    cells_dropped: Count
    model: dict[str, Any] | None
    roster: dict[str, Any]


class CoreTier(CardModel):
    model: dict[str, Any] | None
    roster: dict[str, Any]


class ConfigDelta(CardModel):
    config: str
    candidate: Number
    baseline: Number
    delta: Number


class EnvelopeVersion(CardModel):
    """This model (candidate) vs its baseline over the configurations both ran: per-configuration
    deltas (candidate − baseline), mean delta with configuration-bootstrap interval, worse /
    better / equal counts, ρ_flip with its ceiling."""

    candidate: str
    baseline: str
    n_configs: Annotated[int, Field(ge=1)]
    deltas: list[ConfigDelta]
    mean_delta: Estimate
    min_delta: Number
    max_delta: Number
    n_worse: Count
    n_better: Count
    n_equal: Count
    rho_flip: Annotated[float, Field(ge=0, le=0.5)]
    ceiling: float


class NotCompared(CardModel):
    """A version pair that was not compared, and why."""

    candidate: str
    baseline: str
    missing: str


class EnvelopeSection(CardModel):
    """SafetyRepro App. B (iii)-(vi): configuration envelope over the roster (docs/definitions.md
    §6-§7)"""

    name: str
    sha256: Sha
    tier: str | Absent = None
    n_configs: Count | Absent = None
    n_items: Count | Absent = None
    anchor: dict[str, Any]
    """the anchor (receipt) configuration: its axis values, tier and id"""
    point_score: Number
    score_neighbourhood: Neighbourhood
    verdict_stability: dict[str, Estimate]
    """``cfr@θ`` -> CFR_θ"""
    ranking_stability: RankingStability
    variance: dict[str, Any] | Absent = None
    headline_max: dict[str, dict[str, Any]] | Absent = None
    parse_clean: ParseClean | Absent = None
    by_scoring_path: dict[str, dict[str, Any] | None] | Absent = None
    core_tier: CoreTier | None = None
    configs: list[dict[str, Any]] | Absent = None
    axes: dict[str, list[Any]] | Absent = None
    exemplar_ids: list[str] | Absent = None
    scope_not_varied: list[str]
    versions: list[EnvelopeVersion | NotCompared] | Absent = None
    """docs/definitions.md §11: this model (candidate) vs its baseline over the configurations
    both ran, or why not compared"""


# ---------------------------------------------------------------------------------------------
# ODI (docs/definitions.md §4, §11)


class Posterior(CardModel):
    """A posterior median with its HDI (and, where the fit had a CI level, ``ci``: the HDI at that
    level; ``cis``: at each threshold's level)."""

    median: Number
    hdi: Interval
    ci: Interval | Absent = None
    cis: dict[str, Interval] | Absent = None


class CellOffset(CardModel):
    """A cell's mean |δ|: estimate from the posterior-mean δ, intervals from the draws."""

    estimate: Number
    hdi: Interval
    ci: Interval | Absent = None
    cis: dict[str, Interval] | Absent = None


class OdiFacet(CardModel):
    """A facet in the panel's pooled fit"""

    sigma_pi: Posterior
    sigma_delta: Posterior


class OdiOwnFacet(CardModel):
    """A facet in the model's own fit (σ_π needs a panel: docs/suites/odi.md)"""

    sigma_delta: Posterior


class OdiCell(CardModel):
    facet: str
    dataset: str
    mean_abs_delta: CellOffset


class DeltaTheta(CardModel):
    """Δθ = θ(this model) − θ(baseline) from the correct-outcome fit."""

    candidate: str
    baseline: str
    delta_theta: Posterior
    passed: bool | Absent = None
    """whether the two versions' own correct-outcome fit passed its diagnostics"""


class Diagnostics(CardModel):
    """One fit's convergence: R̂ max, bulk / tail ESS min, divergences, and whether they pass."""

    rhat_max: Number
    ess_bulk_min: Number
    ess_tail_min: Number
    divergences: Count
    passed: bool
    scope: str | Absent = None
    worst: dict[str, str] | Absent = None
    thresholds: dict[str, float | int] | Absent = None


class OdiDiagnostics(CardModel):
    modal: Diagnostics
    correct: Diagnostics


class OdiOwnFit(CardModel):
    """The model's own ODI fit (its trials alone): what its ODI verdicts are decided on"""

    sizes: dict[str, int]
    draws_per_chain: int
    facets: dict[str, OdiOwnFacet]
    cells: dict[str, OdiCell]
    diagnostics: dict[str, Diagnostics]
    passed: bool


class OdiOwnMissing(CardModel):
    """Why the model has no own ODI fit (none of its trials enter the modal outcome)"""

    missing: str
    passed: bool


class OdiSection(CardModel):
    """ODI (docs/definitions.md §4): the model's own fit (``own``, what gates it) and this card's
    facets and cells in the panel's pooled fit (``facets``, ``cells``, ``theta``, ``diagnostics``,
    ``passed``, ``panel_checks``: panel-level, gating no model)"""

    profile: str
    panel: Annotated[list[str], Field(min_length=2)]
    hdi_prob: float
    ci_level: float | None = None
    readouts: dict[str, str] | Absent = None
    sizes: dict[str, dict[str, int]] | Absent = None
    draws_per_chain: dict[str, int] | None = None
    facets: dict[str, OdiFacet]
    cells: dict[str, OdiCell]
    theta: Posterior | None
    versions: list[DeltaTheta | NotCompared] | Absent = None
    """docs/definitions.md §11: Δθ per baseline in the panel, or why it was not estimated"""
    diagnostics: OdiDiagnostics
    passed: bool
    unmeasured: list[str] | Absent = None
    verdicts: list[Verdict]
    own: OdiOwnFit | OdiOwnMissing | Absent = None
    panel_checks: list[Verdict] | Absent = None
    """panel-level checks on the pooled fit (σ_π, its diagnostics): they gate no model"""


# ---------------------------------------------------------------------------------------------
# regression vs baseline (docs/definitions.md §11)

DeltaMetric = Literal["delta_flip_rate", "delta_accuracy", "delta_parse_rate", "delta_delta_order"]


class Overlap(CardModel):
    baseline_items: Count
    candidate_items: Count
    shared_items: Count
    baseline_pairs: Count
    candidate_pairs: Count
    shared_pairs: Count
    partial: bool
    prefix: bool | Absent = None
    """a sequential cell: compared on the items both versions drew (docs/definitions.md §12)"""


class BaselineIdentity(CardModel):
    """the baseline's model id, weights sha256, run id, git commit, date and trials store"""

    model_config = ConfigDict(extra="allow")

    model_id: str | Absent = None
    weights_sha256: Sha = None
    run_id: str | None = None
    git_commit: str | None = None
    date: str | None = None
    trials_store: str | None = None


class Delta(Estimate):
    n_items: Count | Absent = None


class Arms(CardModel):
    baseline: Number
    candidate: Number


class McNemar(CardModel):
    b: Count
    c: Count
    p_two_sided: Annotated[float, Field(ge=0, le=1)]
    p_regression: Annotated[float, Field(ge=0, le=1)]


class ReadoutComparison(CardModel):
    readout: str
    deltas: dict[DeltaMetric, Delta]
    arms: dict[DeltaMetric, Arms]
    mcnemar: dict[str, McNemar]
    items: dict[str, list[str]]
    """changed items by kind (flip state, correctness), primary readout"""


class Comparison(CardModel):
    """one cell's paired comparison of the candidate with a baseline (CellComparison.to_dict,
    without per-item values)"""

    candidate: str
    baseline: str
    cell: str
    dataset: str
    primary_readout: str
    overlap: Overlap
    baseline_identity: BaselineIdentity
    verdicts: list[Verdict]
    readouts: Annotated[dict[str, ReadoutComparison], Field(min_length=1)]


class RegressionSection(CardModel):
    """docs/definitions.md §11: regression of this model (the candidate) against its baseline on
    this dataset's cells"""

    level: Level
    comparisons: Annotated[list[Comparison], Field(min_length=1)]
    markdown: str


# ---------------------------------------------------------------------------------------------
# the card


# ---------------------------------------------------------------------------------------------
# readout decomposition (docs/definitions.md §8)


class DecompositionReadout(CardModel):
    """One readout on one axis: its flip rate and, against the reference readout, the artifact
    part (paired over ``n_paired`` items both parsed twice) and the share of its flips that the
    reference does not see (docs/definitions.md §8)."""

    flip_rate: Estimate
    parse_rate: Probability
    artifact: Estimate | Absent = None
    artifact_share: Estimate | Absent = None
    n_paired: Count | Absent = None


class DecompositionAxis(CardModel):
    axis: str
    manifest_sha256: Sha
    n_items: Count | Absent = None
    n_conditions: Count | Absent = None
    genuine_flip_rate: Estimate | Absent = None
    """the flip rate under the reference readout (regex over the generated text)"""
    readouts: dict[str, DecompositionReadout]
    gates: dict[str, dict[str, Any]]
    """gate name -> its report (the paraphrase gate: passed, reason, counts)"""
    stopped: str | Absent = None
    """why a gate stopped this axis (then it has no numbers)"""


class DecompositionSection(CardModel):
    """flipbench: each axis's flip rate per readout, split into genuine and readout artifact"""

    reference_readout: str
    axes: list[DecompositionAxis]
    not_measured: dict[str, str]
    """readout -> why this model gives none"""
    formats: dict[str, str]
    """prompt format id -> sha256 (the prompt_format axis)"""
    label_sets: list[str]


# ---------------------------------------------------------------------------------------------
# judge consensus (docs/definitions.md §9)


class JudgeSignTest(CardModel):
    improved: Count
    regressed: Count
    p_value: Probability
    """exact two-sided sign test on the discordant items; null when none is discordant"""


class JudgeConsensusSection(CardModel):
    """PCFJudge: this model as a judge of candidate sets, direct (ordering 0) vs the consensus of
    K orderings; exact top-1 accuracy (a tie or a parse failure is a miss)"""

    readout: str
    k: Count
    weights: tuple[float, float, float, float]
    """score, Borda, top, uncertainty"""
    tie_tolerance: float
    manifest_sha256: Sha
    n_items: Count
    parse_rate: Probability
    parse_failures: dict[str, int]
    judge_flip_rate: Estimate
    direct_accuracy: Estimate
    consensus_accuracy: Estimate
    consensus_gain: Estimate
    sign_test: JudgeSignTest
    consensus_tie_rate: Probability
    run_accuracy: Probability
    majority_error: Probability
    majority_bound: Probability
    """exp(−2K(p − ½)²); null when p ≤ ½"""
    accuracy_at_k: list[Estimate]
    by_source: dict[str, dict[str, float]]
    direct_macro_accuracy: Estimate | Absent = None
    consensus_macro_accuracy: Estimate | Absent = None


# ---------------------------------------------------------------------------------------------
# continuity of uncertainty (docs/definitions.md §10)


class ContinuityTrajectoryPoint(CardModel):
    branch: str
    step: Count
    d: Count
    """steps to the most ambiguous input"""
    u: Estimate
    """mean uncertainty over the sweeps at this position"""
    accuracy: Probability


class ContinuityEstimator(CardModel):
    """One uncertainty estimator over the sweep's sources: the monotonicity losses, the abstention
    AUC (null with ``auc_undefined`` when accuracy saturates) and the trajectory"""

    samples: Count | Absent = None
    """sampled answers per estimate (DSE's N, FESTA's N per side); absent for logprob"""
    temperature: float | Absent = None
    top_p: float | Absent = None
    l_local: Estimate
    l_global: Estimate
    abstention_auc: Estimate
    auc_undefined: str | Absent = None
    accuracy: Estimate
    parse_rate: Probability
    trajectory: list[ContinuityTrajectoryPoint]


class ContinuitySection(CardModel):
    """The continuity paper on one sweep generator: N sweeps of n+ inputs toward and n− away from
    the most ambiguous input, per estimator"""

    sweep: str
    question: str
    manifest_sha256: Sha
    n_sources: Count
    n_inputs: Count
    estimators: dict[str, ContinuityEstimator]


# ---------------------------------------------------------------------------------------------
# sequential gates (docs/definitions.md §12)


class SequentialThreshold(CardModel):
    """How one threshold of a sequential cell stood when the cell stopped
    (flipgate.gate.sequential.ThresholdDecision)."""

    threshold: str
    metric: str
    readout: str
    decision: Literal["pass", "fail"] | None
    """'pass' or 'fail' once one of its one-sided tests rejected; null: undecided"""
    decided_at: Count | None
    """items drawn when it was decided"""
    holds: bool
    """whether it could hold the cell: a lower/upper rule on a mean of per-item values"""
    note: str | None
    """why it does not hold the cell, or why it held it to the cap"""
    test: str | None | Absent = None
    """the deciding one-sided test with its e-value or p-value (both tests while undecided)"""
    futile: bool | Absent = None
    """undecided and no longer decidable within the cap: it stopped holding the cell"""


class SequentialCell(CardModel):
    """Where a sequential cell stopped and why (flipgate.gate.sequential.SequentialStop): N used of
    the cap, the stopping batch, what decided, the model calls used and saved."""

    cap: Count
    cap_from: str | Absent = None
    """the facet whose items a control's cap is"""
    n_items: Count
    """items drawn: the first n_items of the seeded order"""
    min_items: Count
    batch_items: Count
    batches: Count
    """batches drawn; the stopping batch is the last"""
    reason: Literal["decided", "cap", "nothing to decide", "undecidable"]
    """undecidable: every threshold left open could no longer be decided within the cap"""
    decided_by: list[str]
    """the thresholds whose decision ended it (the last to be decided)"""
    calls_used: Count
    calls_saved: Count
    """model calls the cap would have taken beyond those drawn"""
    bootstrap_level: Level
    """the level of this cell's fixed-N bootstrap CIs (order_robustness / controls), shown next to
    its confidence sequences"""
    thresholds: list[SequentialThreshold]


class GridCard(CardModel):
    """One model on one dataset (docs/definitions.md §6): a facet card (order robustness,
    controls, thresholds; with ODI and regression sections where those ran) or, for a benchmark
    audited only by the configuration envelope, an envelope card (empty ``order_robustness``)."""

    model_config = ConfigDict(
        title="flipgate GRID card v0 (SafetyRepro App. B, extended with order robustness)"
    )

    schema_version: Literal["grid-card/0.1"]
    model: ModelInfo
    dataset: DatasetInfo
    run: RunInfo
    axis_receipt: AxisReceipt
    scores: Scores
    order_robustness: Cells
    controls: Cells
    thresholds: list[CardVerdict]
    scope: Scope
    envelope: EnvelopeSection | Absent = None
    odi: OdiSection | Absent = None
    regression: RegressionSection | Absent = None
    readout_decomposition: DecompositionSection | Absent = None
    judge_consensus: JudgeConsensusSection | Absent = None
    continuity: ContinuitySection | Absent = None
    sequential: dict[str, SequentialCell] | Absent = None
    """docs/definitions.md §12: each sequential cell's stop, by cell name (absent at fixed N)"""
    #: sections of the suites other packages registered (flipgate.suite.api.Suite.card_section),
    #: by suite name
    suites: dict[str, dict[str, Any]] | Absent = None

    def to_data(self) -> dict[str, Any]:
        """The card as JSON data (what the JSON file holds and the Markdown is rendered from)."""
        return self.model_dump(mode="json")

    def to_json(self) -> str:
        return json.dumps(self.to_data(), indent=2)


class _Schema(GenerateJsonSchema):
    """Without a title per field (the field's name says it) or defaults (a card's key that was not
    given is absent, see :class:`CardModel`)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        """``{"type": ["number", "null"]}`` rather than an ``anyOf`` for a nullable scalar (a
        nullable ``enum`` admits null among its values too)."""
        inner = self.generate_inner(schema["schema"])
        if isinstance(inner.get("type"), str) and inner["type"] != "null" and "const" not in inner:
            nullable = {**inner, "type": [inner["type"], "null"]}
            if "enum" in inner:
                nullable["enum"] = [*inner["enum"], None]
            return nullable
        return super().nullable_schema(schema)


def card_schema() -> dict[str, Any]:
    """The card's JSON Schema (draft 2020-12), generated from :class:`GridCard`."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://flipgate/{SCHEMA_VERSION}",
        **GridCard.model_json_schema(schema_generator=_Schema),
    }


def schema_text() -> str:
    """:func:`card_schema` as ``grid_card.schema.json`` holds it."""
    return json.dumps(card_schema(), indent=2) + "\n"
