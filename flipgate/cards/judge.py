"""The judge consensus suite in a GRID card (docs/definitions.md §9): the section built from the
run store's record, the card of a dataset only the judge suite audited, and the Markdown table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flipgate.cards.model import Estimate, JudgeConsensusSection, JudgeSignTest
from flipgate.judges.record import JudgeRecord

if TYPE_CHECKING:
    from collections.abc import Callable


def judge_section(record: JudgeRecord) -> JudgeConsensusSection:
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
