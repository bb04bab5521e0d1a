"""The order suite's part of the GRID card (docs/definitions.md §6): the facet card of a
(model, dataset) that a facet or control cell ran on — its cells' metrics per readout, the scores
of its first facet, its receipt, scope and sequential stops — its Markdown (the order robustness
table, the floors not measured, the K-policies) and its model-index flip rates. Given to the cards
through the order suite (flipgate.cards.build.TypedCardSuite); the cards name no facet."""

from __future__ import annotations

from typing import Any

from flipgate import metrics as M
from flipgate.cards.build import (
    CardContext,
    decoding_receipt,
    identity_fields,
    run_info,
    threshold_entry,
    validate_card,
)
from flipgate.cards.disclosure import card_section
from flipgate.cards.markdown import fmt_estimate, num
from flipgate.cards.model import (
    SCHEMA_VERSION,
    AxisReceipt,
    DatasetInfo,
    Estimate,
    FewShot,
    GridCard,
    MetricBlock,
    ModelInfo,
    Scope,
    Scores,
    ScoringPath,
    SequentialCell,
    Template,
)
from flipgate.cell import CellKey
from flipgate.facets import CONTROLS, FACETS, readouts_for
from flipgate.gate.sequential import SequentialStop
from flipgate.markdown_text import md_escape
from flipgate.results import CellSummary
from flipgate.store import TrialStore
from flipgate.summary import answers_frame, control_summary, facet_summary

#: what the facet card's scope says was held fixed
NOT_VARIED = [
    "prompt template (one template per facet; see template_sha256)",
    "decoding settings (see decoding)",
    "few-shot count (0)",
    "quantization / dtype",
    "label set (A, B, C, ...)",
    "system prompt (the model's chat template default)",
    "item sample (seed-42 shuffle; see dataset.sampling)",
]


def is_order_cell(cell: str) -> bool:
    """A facet or control cell of the order suite (``option_order``,
    ``same_ordering:option_order``), not another suite's (``envelope[...]``, ``judge``)."""
    parsed = CellKey.parse(cell)
    return parsed.facet in FACETS and (parsed.control is None or parsed.control in CONTROLS)


def own_card(ctx: CardContext, sections: dict[str, Any]) -> GridCard | None:
    """The facet card of ``ctx.model_id`` on ``ctx.dataset`` (docs/definitions.md §6): its
    facet and control cells' metrics per readout, the scores of its first facet, the receipt and
    the verdicts, with the typed ``sections`` the suites filled; None where no facet or control
    cell ran on the pair."""
    store, model_id, dataset, run_id = ctx.store, ctx.model_id, ctx.dataset, ctx.run_id
    n_boot, level, seed, root = ctx.n_boot, ctx.level, ctx.seed, ctx.root
    trials = ctx.trials[ctx.trials["facet"].map(is_order_cell)] if len(ctx.trials) else ctx.trials
    fp, cfg = ctx.model["fingerprint"], ctx.model["config"]
    model_readouts = cfg.get("readouts", ["letter_logprob"])
    model_primary = cfg.get("primary_readout", model_readouts[0])
    order: dict[str, dict[str, MetricBlock]] = {}
    controls: dict[str, dict[str, MetricBlock]] = {}
    primaries: dict[str, str] = {}
    # each cell's summaries as its test computed, asserted and reported them; a cell whose test
    # did not run (trials only asked for by a control or the ODI fit) is summarised here
    stored = store.cell_summaries(model_id, dataset)
    for cell in sorted(trials["facet"].unique()):
        parsed = CellKey.parse(cell)
        control, facet = parsed.control, parsed.facet
        readouts, primaries[facet] = readouts_for(facet, model_readouts, model_primary)
        part = trials[trials["facet"] == cell]
        perm = trials[trials["facet"] == facet]
        judged = control is None and FACETS[facet].judged
        judgements = store.judgements(model_id, dataset, cell) if judged else None

        def summarise(readout: str) -> CellSummary:
            if control is None or not len(perm):
                return facet_summary(part, readout, n_boot, level, seed, judgements)[0]
            return control_summary(perm, part, readout, n_boot, level, seed)[0]

        summaries = {
            r: MetricBlock.model_validate(
                (stored.get(cell, {}).get(r) or summarise(r)).model_dump(mode="json")
            )
            for r in readouts
        }
        (order if control is None else controls)[cell] = summaries
    if not order and not controls:  # no facet or control cell ran on the pair
        return None
    main = sorted(order)[0] if order else CellKey.parse(sorted(controls)[0]).facet
    primary = primaries[main]
    scored = trials[trials["facet"] == main]
    df = answers_frame(scored, primary) if len(scored) else scored.assign(correct=[])
    canon = df[df["condition"] == 0] if len(df) else df
    to_float = lambda s: s.map(lambda c: float("nan") if c is None else float(c))  # noqa: E731
    acc_canon = (
        M.bootstrap_ci(
            to_float(canon["correct"]), cluster=canon["item_id"], n=n_boot, level=level, seed=seed
        )
        if len(canon)
        else (float("nan"),) * 3
    )
    acc_all = (
        M.bootstrap_ci(
            to_float(df["correct"]), cluster=df["item_id"], n=n_boot, level=level, seed=seed
        )
        if len(df)
        else (float("nan"),) * 3
    )
    manifests = {f: m["sha256"] for (f, d), m in store.manifests().items() if d == dataset}
    template = FACETS[main]
    templates = {
        f: Template(id=FACETS[f].template_id, sha256=FACETS[f].template_sha256) for f in primaries
    }
    card = GridCard(
        schema_version=SCHEMA_VERSION,
        model=ModelInfo(
            id=model_id,
            backend=fp.get("backend", cfg.get("backend", "?")),
            source=fp.get("source"),
        ),
        dataset=DatasetInfo.model_validate(
            {
                "name": dataset,
                "n_items": int(trials["item_id"].nunique()),
                "sampling": f"seed-{seed} uniform shuffle, facet filter, first N",
                "screens": store.screens(dataset),
            }
        ),
        run=run_info(store, model_id, run_id),
        axis_receipt=AxisReceipt(
            template_id=template.template_id,
            template_sha256=template.template_sha256,
            templates=templates,
            decoding=decoding_receipt(cfg),
            few_shot=FewShot(count=0, exemplar_ids=[]),
            scoring_path=ScoringPath(
                primary_readout=primaries,
                readouts=model_readouts,
                map_back={f: FACETS[f].scoring for f in primaries},
            ),
            quantization=fp.get("quantization"),
            manifest_sha256=manifests,
            **identity_fields(fp, root),
            **ctx.receipt,
        ),
        scores=Scores(
            facet=main,
            primary_readout=primary,
            accuracy_canonical=Estimate(estimate=acc_canon[0], ci=(acc_canon[1], acc_canon[2])),
            accuracy_all_orderings=Estimate(estimate=acc_all[0], ci=(acc_all[1], acc_all[2])),
        ),
        order_robustness=order,
        controls=controls,
        thresholds=[threshold_entry(v) for v in store.verdicts(model_id, dataset)],
        scope=Scope(
            varied=[
                f"{f} (K={next(iter(order[f].values())).k} orderings per item, "
                "docs/definitions.md §2 grammar)"
                for f in order
            ]
            + [f"{c}: canonical ordering repeated K times with fresh seeds" for c in controls],
            not_varied=NOT_VARIED,
        ),
        sequential=_sequential(store, model_id, dataset, level, {*order, *controls}),
        **sections,
    )
    validate_card(card.to_data())
    return card


def _sequential(
    store: TrialStore, model_id: str, dataset: str, level: float, cells: set[str]
) -> dict[str, SequentialCell] | None:
    """Where each of ``cells`` that ran sequentially stopped (docs/definitions.md §12); None at
    fixed N, so the card has no ``sequential`` section."""
    stops = {
        s.cell: card_section(s, level)
        for s in store.records(SequentialStop, model_id)
        if s.dataset == dataset and s.cell in cells
    }
    return stops or None


def card_fields_markdown(card: dict) -> list[str]:
    """The card's order robustness table (each facet and control cell per readout; a table with
    no rows on a card no order cell ran on), the floors not measured and each facet's K-policies
    (docs/definitions.md §5), as Markdown lines."""
    esc, fmt = md_escape, fmt_estimate
    lines = [
        "",
        "## Order robustness",
        "",
        "| facet | readout | N | K | flip rate | OSI | pairwise disagr. | parse rate | accuracy | "
        "acc swing | Δ_order |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for group in ("order_robustness", "controls"):
        for facet, by_readout in card[group].items():
            for readout, m in by_readout.items():
                lines.append(
                    f"| {esc(facet)} | {esc(readout)} | {m['n_items']} | {m['k']} | "
                    f"{fmt(m['flip_rate'])} | {fmt(m['osi'])} "
                    f"| {fmt(m['pairwise_disagreement'])} | {fmt(m['parse_rate'])} | "
                    f"{fmt(m['accuracy'])} "
                    f"| {fmt(m['acc_swing'])} | {fmt(m.get('delta_order'))}"
                    + (f" (floor {esc(m['floor'])})" if m.get("floor") else "")
                    + " |"
                )
    unmeasured = [
        c for c, by in card["controls"].items() if any(m.get("floor") for m in by.values())
    ]
    if unmeasured:  # docs/definitions.md §12.5
        lines += [
            "",
            f"Floor not measured ({', '.join(map(esc, unmeasured))}): the backend answered the K "
            "replicates as copies of one computation, so the control's flip rate is 0 by "
            "construction, its thresholds are not applicable and Δ_order is the facet's flip rate "
            "against that floor (docs/suites/order.md).",
        ]
    for facet, by_readout in card["order_robustness"].items():
        primary = card["axis_receipt"]["scoring_path"]["primary_readout"].get(facet)
        m = by_readout.get(primary) or next(iter(by_readout.values()))
        if not m.get("k_policies"):
            continue
        lines += [
            "",
            f"### K-policies: {esc(facet)} ({esc(primary)})",
            "",
            f"K=2 screen recall against K={m['k']} flip: {num(m.get('k2_screen_recall'))}; "
            "flip rate by K: "
            + ", ".join(f"K={k}: {num(v)}" for k, v in m["k_ablation"].items())
            + ".",
            "",
            "| policy | cost (calls/item) | accuracy | selective accuracy | coverage |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {esc(r['policy'])} | {r['cost']} | {num(r['accuracy'])} | "
            f"{num(r['selective_accuracy'])} "
            f"| {num(r['coverage'])} |"
            for r in m["k_policies"]
        ]
    return lines


def model_index_metrics(card: dict) -> list[dict]:
    """Each facet and control cell's flip rate (its facet's primary readout) for the model's
    Hugging Face ``model-index``."""
    primaries = card["axis_receipt"]["scoring_path"]["primary_readout"]
    metrics: list[dict] = []
    for group in ("order_robustness", "controls"):
        for facet, by_readout in card[group].items():
            m = by_readout.get(primaries.get(CellKey.parse(facet).facet)) or next(
                iter(by_readout.values())
            )
            metrics.append(
                {
                    "type": "flip_rate",
                    "name": f"{facet} flip rate (K={m['k']})",
                    "value": m["flip_rate"]["estimate"],
                }
            )
    return metrics
