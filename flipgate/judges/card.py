"""The judge consensus suite in a GRID card (docs/definitions.md §9): the section built from the
run store's record, the card of a dataset only the judge suite audited, and the Markdown table
(what flipgate.judges.suite gives the cards through flipgate.cards.build.TypedCardSuite)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flipgate import metrics as M
from flipgate.cards.build import CardContext
from flipgate.cards.markdown import fmt_estimate
from flipgate.cards.model import (
    Estimate,
    GridCard,
    JudgeConsensusSection,
    JudgeSignTest,
    Scope,
    Scores,
    ScoringPath,
    Template,
)
from flipgate.hashing import sha256_text
from flipgate.judges.names import JUDGE_CELL
from flipgate.judges.record import JudgeRecord
from flipgate.markdown_text import md_escape

if TYPE_CHECKING:
    from collections.abc import Callable


def _record(ctx: CardContext) -> JudgeRecord | None:
    """The judge record of the card's model on its dataset, None where it judged none."""
    records = ctx.store.records(JudgeRecord, ctx.model_id)
    return next((r for r in records if r.dataset == ctx.dataset), None)


def card_fields(ctx: CardContext) -> dict[str, Any]:
    """The card's ``judge_consensus`` section, where the model judged the dataset."""
    record = _record(ctx)
    return {"judge_consensus": judge_section(record)} if record is not None else {}


def card_fields_markdown(card: dict) -> list[str]:
    """The card's judge table, where it has a ``judge_consensus`` section."""
    section = card.get("judge_consensus")
    return judge_markdown(section, fmt_estimate, md_escape) if section else []


def own_card(ctx: CardContext, sections: dict[str, Any]) -> GridCard | None:
    """A card for a candidate-set dataset only the judge suite audited: the model is the judge,
    the score its direct (ordering 0) and per-run accuracy over all K orderings; it carries the
    readout decomposition of the dataset where ``sections`` hold one. None where the model judged
    no candidate set of the dataset."""
    from flipgate.judging.listwise import INSTRUCTION

    record = _record(ctx)
    if record is None:
        return None
    r = record.result
    hits = [[float(p is not None and p == v.gold) for p in v.picks] for v in r.items.values()]
    per_run = M.bootstrap_ci(
        [h for row in hits for h in row], cluster=[i for i, row in enumerate(hits) for _ in row]
    )
    template = Template(id="pcfjudge-listwise-v1", sha256=sha256_text(INSTRUCTION))
    return ctx.suite_card(
        n_items=r.n_items,
        sampling="seed-42 uniform shuffle of the candidate sets with a gold candidate, first N",
        receipt=ctx.plain_receipt(
            template.id,
            template.sha256,
            {template.id: template},
            ScoringPath(
                primary_readout={JUDGE_CELL: record.readout},
                readouts=[record.readout],
                map_back={JUDGE_CELL: "candidate number -> source candidate index"},
            ),
            {JUDGE_CELL: record.manifest_sha256} if record.manifest_sha256 else {},
        ),
        scores=Scores(
            facet=JUDGE_CELL,
            primary_readout=record.readout,
            accuracy_canonical=Estimate(
                estimate=r.direct_accuracy.estimate, ci=r.direct_accuracy.ci
            ),
            accuracy_all_orderings=Estimate(estimate=per_run[0], ci=(per_run[1], per_run[2])),
        ),
        scope=Scope(
            varied=[f"candidate order (K={r.k} orderings shared by every set)"],
            not_varied=["judge prompt", "decoding", "model weights and precision"],
        ),
        readout_decomposition=sections.get("readout_decomposition"),
        judge_consensus=judge_section(record),
    )


def judge_section(record: JudgeRecord) -> JudgeConsensusSection:
    """One judge record as the card's section."""
    r = record.result
    return JudgeConsensusSection(
        readout=record.readout,
        k=r.k,
        weights=r.weights,
        tie_tolerance=r.tie_tolerance,
        manifest_sha256=record.manifest_sha256,
        n_items=r.n_items,
        parse_rate=r.parse_rate,
        parse_failures=record.parse_failures,
        judge_flip_rate=Estimate.of(r.judge_flip_rate),
        direct_accuracy=Estimate.of(r.direct_accuracy),
        consensus_accuracy=Estimate.of(r.consensus_accuracy),
        consensus_gain=Estimate.of(r.consensus_gain),
        sign_test=JudgeSignTest(**r.sign_test.model_dump()),
        consensus_tie_rate=r.consensus_tie_rate,
        run_accuracy=r.run_accuracy,
        majority_error=r.majority_error,
        majority_bound=r.majority_bound,
        accuracy_at_k=[Estimate.of(e) for e in r.accuracy_at_k],
        by_source=r.by_source,
        direct_macro_accuracy=(
            Estimate.of(r.direct_macro_accuracy) if r.direct_macro_accuracy else None
        ),
        consensus_macro_accuracy=(
            Estimate.of(r.consensus_macro_accuracy) if r.consensus_macro_accuracy else None
        ),
    )


def judge_markdown(
    section: dict[str, Any], fmt: Callable[[dict | None], str], esc: Callable[[Any], str]
) -> list[str]:
    """The card's judge table: direct vs consensus, the sign test, flips and the bound."""
    sign = section["sign_test"]
    p = sign.get("p_value")
    bound = section.get("majority_bound")
    lines = [
        "",
        "## Judge consensus (docs/definitions.md §9)",
        "",
        f"This model judged {section['n_items']} candidate sets over K={section['k']} orderings "
        f"(readout `{section['readout']}`, weights {tuple(section['weights'])}); exact top-1 "
        "accuracy, a tie or a parse failure counts as a miss.",
        "",
        "| metric | value |",
        "|---|---|",
        f"| direct accuracy (ordering 0) | {fmt(section['direct_accuracy'])} |",
        f"| consensus accuracy | {fmt(section['consensus_accuracy'])} |",
        f"| consensus − direct (paired) | {fmt(section['consensus_gain'])} |",
        f"| improved / regressed | {sign['improved']} / {sign['regressed']} |",
        f"| sign test p (two-sided, exact) | {'–' if p is None else f'{p:.3g}'} |",
        f"| judge flip rate | {fmt(section['judge_flip_rate'])} |",
        f"| per-run accuracy p | {section['run_accuracy']:.3f} |",
        f"| majority-vote error (observed) | {section['majority_error']:.3f} |",
        f"| bound exp(−2K(p−½)²) | {'– (p ≤ ½)' if bound is None else f'{bound:.3f}'} |",
        f"| parse rate | {section['parse_rate']:.3f} |",
    ]
    if section.get("consensus_macro_accuracy"):
        lines += [
            f"| direct macro accuracy | {fmt(section['direct_macro_accuracy'])} |",
            f"| consensus macro accuracy | {fmt(section['consensus_macro_accuracy'])} |",
        ]
    for reason, count in section["parse_failures"].items():
        lines.append(f"\nParse failures: {count} × {esc(reason)}")
    return lines
