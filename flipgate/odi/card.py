"""The ODI fit in a GRID card (docs/definitions.md §4): the section of one card built from the
run's panel-wide analysis, and its Markdown (what flipgate.odi.suite gives the cards through
flipgate.cards.build.TypedCardSuite)."""

from __future__ import annotations

import json
from typing import Any

from flipgate.cards.build import CardContext
from flipgate.cards.markdown import ci_text, num, verdict_text
from flipgate.cards.model import OdiSection
from flipgate.markdown_text import md_escape
from flipgate.odi.names import ODI_FITS, ORDER_PANEL
from flipgate.results import Verdict


def card_fields(ctx: CardContext) -> dict[str, Any]:
    """The card's ``odi`` section, where the panel's fit has the model and a cell of the card."""
    odi = ctx.store.analysis(ODI_FITS, ORDER_PANEL)
    if not odi or ctx.model_id not in odi["roster"]:
        return {}
    if all(c["dataset"] != ctx.dataset for c in odi["cells"].values()):
        return {}  # the panel's fit has no cell of this card
    verdicts = ctx.store.verdicts(ctx.model_id, "odi")
    return {"odi": odi_section(odi, ctx.model_id, ctx.dataset, verdicts)}


def card_fields_markdown(card: dict) -> list[str]:
    """The card's ODI section as Markdown, where it has one."""
    return odi_markdown(card["odi"]) if card.get("odi") else []


def odi_section(analysis: dict, model_id: str, dataset: str, verdicts: list[Verdict]) -> OdiSection:
    """docs/definitions.md §4 for one card: the model's own fit (``own``: σ_δ of its facets, mean
    |δ| of its cells on the card's dataset, its diagnostics; what its verdicts are decided on), and
    the panel's pooled fits, narrowed to the facets and cells the model ran: σ_π / σ_δ, mean |δ|,
    the model's θ centred over the panel, the panel checks; its Δθ against its baselines
    (docs/definitions.md §11) and its ODI verdicts."""
    ran = set(analysis["readouts"].get(model_id, {}))  # the facets this model ran
    cells = {
        c: v for c, v in analysis["cells"].items() if v["dataset"] == dataset and v["facet"] in ran
    }
    facets = sorted({v["facet"] for v in cells.values()})
    model = analysis["models"].get(model_id) or {}
    own: Any = model.get("own")  # validated into OdiOwnFit / OdiOwnMissing
    if own and "facets" in own:
        own = {
            **own,
            "facets": {f: v for f, v in own["facets"].items() if f in facets},
            "cells": {c: v for c, v in own["cells"].items() if v["dataset"] == dataset},
        }
    targets = {*facets, *cells, *(own or {}).get("diagnostics", {})}
    return OdiSection(
        profile=analysis["profile"],
        panel=analysis["roster"],
        hdi_prob=analysis["hdi_prob"],
        ci_level=analysis.get("ci_level"),
        readouts=analysis["readouts"].get(model_id, {}),
        sizes=analysis["sizes"],
        draws_per_chain=analysis.get("draws_per_chain"),
        facets={f: analysis["facets"][f] for f in facets},
        cells=cells,
        theta=model.get("theta"),
        versions=[v for v in analysis.get("versions", []) if v["candidate"] == model_id],
        diagnostics=analysis["diagnostics"],
        passed=analysis["passed"],
        unmeasured=analysis.get("unmeasured", []),
        verdicts=[
            Verdict.model_validate(v.model_dump(exclude={"q_value"}))  # ODI estimates: no p-value
            for v in verdicts
            if v.target in targets
        ],
        own=own,
        panel_checks=[
            v
            for v in analysis.get("panel_checks", [])
            if v["target"] in {*facets, *analysis["diagnostics"]}
        ]
        or None,
    )


def odi_markdown(odi: dict) -> list[str]:
    """The card's ODI section (docs/definitions.md §4) as Markdown."""

    def hdi(m: dict) -> str:
        median = num(m.get("median", m.get("estimate")))
        return f"{median} [{num(m['hdi'][0])}, {num(m['hdi'][1])}]"

    pct = f"{odi['hdi_prob']:.0%}"
    esc = md_escape
    lines = ["", "## ODI: ordering-decomposed IRT", ""]
    lines += _own_markdown(odi.get("own"), hdi, pct)
    lines += [
        "",
        "### Panel (pooled over every order-suite model; gates no model)",
        "",
        f"Panel {', '.join(map(esc, odi['panel']))}; profile {esc(odi['profile'])} (draws per "
        "chain "
        f"{json.dumps(odi.get('draws_per_chain'))}); posterior medians with {pct} HDIs. "
        "σ_π is per-item ordering noise shared across the panel (median over the facet's items), "
        "σ_δ the facet's scale of per-ordering offsets, mean |δ| the cell's average offset "
        "(centred within the cell). Another model's answers move these.",
        "",
        f"| facet | panel σ_π [{pct} HDI] | panel σ_δ [{pct} HDI] |",
        "|---|---|---|",
    ]
    lines += [
        f"| {esc(f)} | {hdi(v['sigma_pi'])} | {hdi(v['sigma_delta'])} |"
        for f, v in odi["facets"].items()
    ]
    lines += ["", f"| cell | panel mean abs δ [{pct} HDI] |", "|---|---|"]
    lines += [f"| {esc(c)} | {hdi(v['mean_abs_delta'])} |" for c, v in odi["cells"].items()]
    if odi.get("theta"):
        lines += ["", f"Panel θ (correct outcome, centred over the panel): {hdi(odi['theta'])}."]
    for v in odi.get("versions", []):
        d = v.get("delta_theta")
        lines += [
            "",
            f"Δθ vs {esc(v['baseline'])} (correct outcome, the two versions' own fit): "
            + (
                f"median {num(d['median'])}, {pct} HDI [{num(d['hdi'][0])}, {num(d['hdi'][1])}]."
                if d
                else f"not estimated: {esc(v.get('missing'))}."
            ),
        ]
    lines += [
        "",
        "Panel diagnostics: "
        + "; ".join(
            f"{esc(o)}: R̂ max {num(d['rhat_max'])}, ESS bulk min {d['ess_bulk_min']:.0f}, tail "
            f"min {d['ess_tail_min']:.0f}, "
            f"{d['divergences']} divergences"
            for o, d in odi["diagnostics"].items()
        )
        + f" → {'passed' if odi['passed'] else 'FAILED'}.",
    ]
    for title, rows in (
        ("ODI threshold (own fit)", odi["verdicts"]),
        ("panel check (gates no model)", odi.get("panel_checks") or []),
    ):
        if rows:
            lines += ["", f"| {title} | estimate | CI | verdict | why |", "|---|---|---|---|---|"]
            lines += [
                f"| {esc(v['threshold'])} | {num(v.get('estimate'))} | {ci_text(v)} | "
                f"{verdict_text(v)} | {esc(v.get('why') or '')} |"
                for v in rows
            ]
    return lines


def _own_markdown(own: dict | None, hdi, pct: str) -> list[str]:
    """The model's own fit (what gates it) as Markdown."""
    if not own:
        return []
    if "missing" in own:
        return [f"Own fit: none ({md_escape(own['missing'])})."]
    d = own["diagnostics"]["modal"]
    lines = [
        "Own fit (this model's trials alone; its ODI verdicts are decided on it): "
        f"{own['sizes']['trials']} trials, R̂ max {num(d['rhat_max'])}, ESS bulk min "
        f"{d['ess_bulk_min']:.0f}, tail min {d['ess_tail_min']:.0f}, {d['divergences']} "
        f"divergences → {'passed' if own['passed'] else 'FAILED'}.",
        "",
        f"| facet / cell | own σ_δ or mean abs δ [{pct} HDI] |",
        "|---|---|",
    ]
    lines += [f"| {md_escape(f)} | {hdi(v['sigma_delta'])} |" for f, v in own["facets"].items()]
    lines += [f"| {md_escape(c)} | {hdi(v['mean_abs_delta'])} |" for c, v in own["cells"].items()]
    return lines


def model_index_metrics(card: dict) -> list[dict]:
    """σ_π of each facet of the card in the panel's fit (named a panel quantity), for the model's
    Hugging Face ``model-index``."""
    odi = card.get("odi")
    if not odi:
        return []
    return [
        {
            "type": "odi_sigma_pi",
            "name": f"ODI σ_π {f} (panel of {len(odi['panel'])})",
            "value": v["sigma_pi"]["median"],
        }
        for f, v in odi["facets"].items()
    ]
