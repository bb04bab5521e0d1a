"""The readout decomposition in a GRID card (docs/definitions.md §8): the section built from the
run store's records, the card of a dataset only the decomposition suite audited, and the
Markdown table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flipgate.axes.formats import FORMATS
from flipgate.axes.variant import LABEL_SETS
from flipgate.cards.model import (
    DecompositionAxis,
    DecompositionReadout,
    DecompositionSection,
    Estimate,
)
from flipgate.decomposition.record import DecompositionRecord
from flipgate.results import MetricEstimate

if TYPE_CHECKING:
    from collections.abc import Callable


def _estimate(m: MetricEstimate | None) -> Estimate | None:
    return None if m is None else Estimate.of(m)


def decomposition_section(records: list[DecompositionRecord]) -> DecompositionSection:
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
