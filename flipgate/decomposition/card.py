"""The readout decomposition in a GRID card (docs/definitions.md §8): the section built from the
run store's records, the card of a dataset only the decomposition suite audited, and the
Markdown table (what flipgate.decomposition.suite gives the cards through
flipgate.cards.build.TypedCardSuite)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flipgate import metrics as M
from flipgate.axes.formats import FORMATS
from flipgate.axes.variant import LABEL_SETS
from flipgate.cards.build import CardContext
from flipgate.cards.markdown import fmt_estimate
from flipgate.cards.model import (
    DecompositionAxis,
    DecompositionReadout,
    DecompositionSection,
    Estimate,
    GridCard,
    Scope,
    Scores,
    ScoringPath,
    Template,
)
from flipgate.decomposition.names import CELL_PREFIX
from flipgate.decomposition.record import DecompositionRecord
from flipgate.markdown_text import md_escape
from flipgate.results import MetricEstimate

if TYPE_CHECKING:
    from collections.abc import Callable


def _estimate(m: MetricEstimate | None) -> Estimate | None:
    return None if m is None else Estimate.of(m)


def decomposition_section(records: list[DecompositionRecord]) -> DecompositionSection:
    """The records of one (model, dataset), one per axis, as the card's section."""
    axes = []
    for rec in records:
        d = rec.decomposition
        readouts = {}
        for name, split in (d.readouts if d else {}).items():
            readouts[name] = DecompositionReadout(
                flip_rate=Estimate(estimate=split.flip_rate.estimate, ci=split.flip_rate.ci),
                parse_rate=split.parse_rate,
                artifact=_estimate(split.artifact),
                artifact_share=_estimate(split.artifact_share),
                n_paired=None if split.artifact is None else split.artifact.n_items,
            )
        axes.append(
            DecompositionAxis(
                axis=rec.axis,
                manifest_sha256=rec.manifest_sha256,
                n_items=d.n_items if d else None,
                n_conditions=d.n_conditions if d else None,
                genuine_flip_rate=_estimate(d.genuine) if d else None,
                readouts=readouts,
                gates=rec.gates,
                stopped=rec.stopped,
            )
        )
    missing: dict[str, str] = {}
    for rec in records:
        missing |= rec.not_measured
    return DecompositionSection(
        reference_readout=next(
            (r.decomposition.reference for r in records if r.decomposition), "regex"
        ),
        axes=axes,
        not_measured=missing,
        formats={f.id: f.sha256 for f in FORMATS},
        label_sets=list(LABEL_SETS),
    )


def decomposition_markdown(
    section: dict[str, Any], fmt: Callable[[dict | None], str], esc: Callable[[Any], str]
) -> list[str]:
    """The card's decomposition table: per axis and readout, total, genuine and artifact."""
    ref = section["reference_readout"]
    lines = [
        "",
        "## Readout decomposition (docs/definitions.md §8)",
        "",
        f"Genuine = flip rate under the reference readout `{ref}`; artifact = a readout's flip "
        "rate − genuine, paired over the items both readouts parsed twice.",
        "",
        "| axis | readout | N | conditions | flip rate | genuine | artifact | artifact share | "
        "parse rate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for axis in section["axes"]:
        if axis.get("stopped"):
            lines.append(
                f"| {axis['axis']} | – | – | – | stopped: {esc(axis['stopped'])} | | | | |"
            )
            continue
        for name, r in axis["readouts"].items():
            parse = r.get("parse_rate")
            lines.append(
                f"| {axis['axis']} | {name} | {axis.get('n_items', '–')} | "
                f"{axis.get('n_conditions', '–')} | {fmt(r['flip_rate'])} | "
                f"{fmt(axis.get('genuine_flip_rate'))} | "
                f"{fmt(r.get('artifact')) if name != ref else '(reference)'} | "
                f"{fmt(r.get('artifact_share')) if name != ref else ''} | "
                f"{'–' if parse is None else f'{parse:.2f}'} |"
            )
    for readout, why in section["not_measured"].items():
        lines.append(f"\n{readout}: not measured ({esc(why)}).")
    return lines


def card_fields(ctx: CardContext) -> dict[str, Any]:
    """The card's ``readout_decomposition`` section, where the suite audited the dataset."""
    records = ctx.store.records(DecompositionRecord, ctx.model_id)
    records = [r for r in records if r.dataset == ctx.dataset]
    return {"readout_decomposition": decomposition_section(records)} if records else {}


def card_fields_markdown(card: dict) -> list[str]:
    """The card's decomposition table, where it has a ``readout_decomposition`` section."""
    section = card.get("readout_decomposition")
    return decomposition_markdown(section, fmt_estimate, md_escape) if section else []


def own_card(ctx: CardContext, sections: dict[str, Any]) -> GridCard | None:
    """A card for a dataset only the readout decomposition audited: the receipt is the canonical
    variant (Facet-Probe's template, A–D, options in source order), the score its accuracy under
    the reference readout. None where ``sections`` hold no decomposition of the dataset."""
    section: DecompositionSection | None = sections.get("readout_decomposition")
    if section is None:
        return None
    trials = ctx.trials[ctx.trials["facet"].str.startswith(CELL_PREFIX)]
    level = ctx.level
    ref = section.reference_readout
    canonical = trials[trials["condition"] == 0].drop_duplicates("item_id")
    correct = lambda rows: [  # noqa: E731
        float("nan") if c.get(ref) is None else float(c[ref]) for c in rows["correct"]
    ]
    acc = M.bootstrap_ci(correct(canonical), level=level)
    acc_all = M.bootstrap_ci(correct(trials), cluster=list(trials["item_id"]), level=level)
    return ctx.suite_card(
        n_items=int(trials["item_id"].nunique()),
        sampling="seed-42 uniform shuffle of the text multiple-choice items, first N",
        receipt=ctx.plain_receipt(
            FORMATS[0].id,
            FORMATS[0].sha256,
            {f.id: Template(id=f.id, sha256=f.sha256) for f in FORMATS},
            ScoringPath(
                primary_readout={"decomposition": ref},
                readouts=sorted({r for a in section.axes for r in a.readouts}) or [ref],
                map_back={"decomposition": "displayed label -> source option index"},
            ),
            {a.axis: a.manifest_sha256 for a in section.axes if a.manifest_sha256},
        ),
        scores=Scores(
            facet="decomposition",
            primary_readout=ref,
            accuracy_canonical=Estimate(estimate=acc[0], ci=(acc[1], acc[2])),
            accuracy_all_orderings=Estimate(estimate=acc_all[0], ci=(acc_all[1], acc_all[2])),
        ),
        scope=Scope(
            varied=[f"{a.axis} ({a.n_conditions or 0} variants per item)" for a in section.axes]
            + ["readout: " + ", ".join(sorted({r for a in section.axes for r in a.readouts}))],
            not_varied=["decoding", "model weights and precision", "few-shot exemplars (none)"],
        ),
        readout_decomposition=section,
    )
