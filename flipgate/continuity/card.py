"""The continuity suite in a GRID card (docs/definitions.md §10): the section built from the run
store's records of one sweep, the card of a sweep, and the Markdown table (what
flipgate.continuity.suite gives the cards through flipgate.cards.build.TypedCardSuite)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flipgate.cards.build import CardContext
from flipgate.cards.markdown import fmt_estimate
from flipgate.cards.model import (
    ContinuityEstimator,
    ContinuitySection,
    ContinuityTrajectoryPoint,
    Estimate,
    Scope,
    Scores,
    ScoringPath,
    Template,
)
from flipgate.continuity.names import CONTINUITY_CELL
from flipgate.continuity.record import ContinuityRecord
from flipgate.continuity.sweeps import SWEEPS
from flipgate.hashing import sha256_text
from flipgate.markdown_text import md_escape

if TYPE_CHECKING:
    from collections.abc import Callable

    from flipgate.cards.model import GridCard


def _estimator(record: ContinuityRecord) -> ContinuityEstimator:
    r = record.result
    return ContinuityEstimator(
        samples=record.samples,
        temperature=record.temperature,
        top_p=record.top_p,
        l_local=Estimate.of(r.l_local),
        l_global=Estimate.of(r.l_global),
        abstention_auc=Estimate.of(r.abstention_auc),
        auc_undefined=r.auc_undefined,
        accuracy=Estimate.of(r.accuracy),
        parse_rate=r.parse_rate,
        trajectory=[
            ContinuityTrajectoryPoint(
                branch=t.branch, step=t.step, d=t.d, u=Estimate.of(t.u), accuracy=t.accuracy
            )
            for t in r.trajectory
        ],
    )


def continuity_section(records: list[ContinuityRecord]) -> ContinuitySection:
    """One sweep's records (one per estimator) as the card's section."""
    first = records[0]
    return ContinuitySection(
        sweep=first.sweep,
        question=SWEEPS[first.sweep].question,
        manifest_sha256=first.manifest_sha256,
        n_sources=first.result.n_sources,
        n_inputs=first.result.n_inputs,
        estimators={r.estimator: _estimator(r) for r in records},
    )


def continuity_markdown(
    section: dict[str, Any], fmt: Callable[[dict | None], str], esc: Callable[[Any], str]
) -> list[str]:
    """The card's continuity table: per estimator the losses, the AUC and the accuracy."""
    lines = [
        "",
        "## Continuity of uncertainty (docs/definitions.md §10)",
        "",
        f"Sweep {esc(section['sweep'])}: {esc(section['question'])} "
        f"{section['n_sources']} sweeps, {section['n_inputs']} inputs; CIs resample whole sweeps. "
        "L_global: 0 = uncertainty peaks at the most ambiguous input, 0.5 = unrelated, "
        "1 = inverted.",
        "",
        "| estimator | samples | L_local | L_global | abstention AUC | accuracy | parse rate |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, e in section["estimators"].items():
        auc = esc(e["auc_undefined"]) if e.get("auc_undefined") else fmt(e["abstention_auc"])
        lines.append(
            f"| {esc(name)} | {e.get('samples') or '–'} | {fmt(e['l_local'])} "
            f"| {fmt(e['l_global'])} | {auc} | {fmt(e['accuracy'])} | {e['parse_rate']:.3f} |"
        )
    return lines


def card_fields_markdown(card: dict) -> list[str]:
    """The card's continuity table, where it has a ``continuity`` section."""
    section = card.get("continuity")
    return continuity_markdown(section, fmt_estimate, md_escape) if section else []


def own_card(ctx: CardContext, sections: dict[str, Any]) -> GridCard | None:
    """A card for a continuity sweep (docs/definitions.md §10): the score is the greedy answer's
    accuracy over the sweep's inputs, the section every estimator's losses. None where the card's
    dataset is no sweep the model ran."""
    from flipgate.continuity.run import ANSWER_PREFIX

    sweep = ctx.dataset
    records = [r for r in ctx.store.records(ContinuityRecord, ctx.model_id) if r.sweep == sweep]
    if not records:
        return None
    section = continuity_section(records)
    accuracy = section.estimators[records[0].estimator].accuracy
    spec = SWEEPS[sweep]
    template = Template(id=f"continuity-{sweep}-v1", sha256=sha256_text(spec.question))
    cell = CONTINUITY_CELL
    return ctx.suite_card(
        n_items=section.n_inputs,
        sampling=f"{section.n_sources} seeded sweeps (flipgate/continuity/sweeps.py)",
        receipt=ctx.plain_receipt(
            template.id,
            template.sha256,
            {template.id: template},
            ScoringPath(
                primary_readout={cell: "regex"},
                readouts=["regex"],
                map_back={cell: f"the answer after {ANSWER_PREFIX!r} -> {', '.join(spec.answers)}"},
            ),
            {cell: section.manifest_sha256} if section.manifest_sha256 else {},
        ),
        scores=Scores(
            facet=cell,
            primary_readout="regex",
            accuracy_canonical=accuracy,
            accuracy_all_orderings=accuracy,
        ),
        scope=Scope(
            varied=["the input along the sweep (its distance d to the most ambiguous input)"],
            not_varied=["prompt template within a sweep", "model weights and precision"],
        ),
        continuity=section,
    )
