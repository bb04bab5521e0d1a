"""Regression against the baseline in a GRID card (docs/definitions.md §11): the section of one
card built from the stored comparisons, its Markdown, ``grid_cards/<model>/regression.md`` and the
table in a Hugging Face model card (what flipgate.regression.suite gives the cards through
flipgate.cards.build.TypedCardSuite)."""

from __future__ import annotations

from typing import Any

from flipgate.cards.build import CardContext
from flipgate.cards.model import Comparison, RegressionSection
from flipgate.markdown_text import md_escape
from flipgate.regression.table import markdown
from flipgate.store import TrialStore


def card_fields(ctx: CardContext) -> dict[str, Any]:
    """The card's ``regression`` section (None where the model has no comparison on the dataset)."""
    return {
        "regression": regression_section(
            ctx.store.comparisons(ctx.model_id), ctx.dataset, ctx.level
        )
    }


def card_fields_markdown(card: dict) -> list[str]:
    """The card's regression section as Markdown, where it has one."""
    section = card.get("regression")
    return regression_markdown(section["comparisons"], section.get("level")) if section else []


def model_pages(store: TrialStore, model_id: str, run_id: str, level: float) -> dict[str, str]:
    """``regression.md``, where the model (a candidate) has comparisons with its baseline(s)."""
    comparisons = store.comparisons(model_id)
    return (
        {"regression.md": regression_page(model_id, comparisons, run_id, level)}
        if comparisons
        else {}
    )


def model_card_lines(cards: list[dict]) -> list[str]:
    """The comparison table of every card's regression section, for a Hugging Face model card."""
    comparisons = [
        c for card in cards for c in (card.get("regression") or {}).get("comparisons", [])
    ]
    if not comparisons:
        return []
    level = next(card["regression"].get("level") for card in cards if card.get("regression"))
    return regression_markdown(comparisons, level, heading="### Regression vs baseline")


def regression_section(
    comparisons: list[dict], dataset: str, level: float | None
) -> RegressionSection | None:
    """docs/definitions.md §11 for one card: the stored comparisons of this model (the candidate)
    with its baseline(s) on the dataset's cells, without their per-item values, and the comparison
    table; None when there are none."""
    mine = [_without_per_item(c) for c in comparisons if c["dataset"] == dataset]
    if not mine:
        return None
    return RegressionSection(
        level=level,
        comparisons=[Comparison.model_validate(c) for c in mine],
        markdown=markdown(mine, level),
    )


def _without_per_item(comparison: dict) -> dict:
    return {
        **comparison,
        "readouts": {
            r: {k: v for k, v in block.items() if k != "per_item"}
            for r, block in comparison["readouts"].items()
        },
    }


def _short(sha, n: int = 12) -> str | None:
    return sha[:n] if isinstance(sha, str) and len(sha) > n else sha


#: at most this many item ids per list in a regression section's Markdown
ITEMS_SHOWN = 20


def regression_markdown(
    comparisons: list[dict],
    level: float | None = None,
    heading: str | None = "## Regression vs baseline",
) -> list[str]:
    """Comparisons (:meth:`CellComparison.to_dict` records) as Markdown: each baseline's identity,
    the comparison table, the overlap where a comparison used only the shared (item, ordering)
    pairs, and the items whose flip state or correctness changed (primary readout)."""
    esc = md_escape
    lines = ["", heading, ""] if heading else [""]
    identities: dict[str, dict] = {}
    for c in comparisons:
        identities.setdefault(c["baseline"], c.get("baseline_identity") or {})
    for name, ident in identities.items():
        lines.append(
            f"Baseline {esc(name)}: model {esc(ident.get('model_id', name))}, weights sha256 "
            f"{esc(_short(ident.get('weights_sha256')))}, run {esc(ident.get('run_id'))}, git "
            "commit "
            f"{esc(_short(ident.get('git_commit')))}, {esc(ident.get('date'))}."
        )
    lines += [
        "",
        "Δ = candidate − baseline, paired per item; ▲ worse / ▼ better where the CI excludes 0; "
        "McNemar p on the discordant items.",
        "",
        markdown(comparisons, level).rstrip("\n"),
    ]
    for c in comparisons:
        what = f"{esc(c['cell'])} × {esc(c['dataset'])} vs {esc(c['baseline'])}"
        o = c["overlap"]
        if o.get("partial") and not (
            o["baseline_pairs"] == o["candidate_pairs"] == o["shared_pairs"]
        ):
            union = o["baseline_pairs"] + o["candidate_pairs"] - o["shared_pairs"]
            lines += [
                "",
                f"{what}: compared on {o['shared_pairs']} of {union} (item, ordering) pairs "
                f"(baseline {o['baseline_pairs']}, candidate {o['candidate_pairs']}; "
                f"{o['shared_items']} "
                f"shared items of {o['baseline_items']} / {o['candidate_items']}).",
            ]
        block = c["readouts"][c["primary_readout"]]
        lists = [(label.replace("_", " "), ids) for label, ids in block["items"].items() if ids]
        if lists:
            lines += ["", f"{what} ({esc(block['readout'])}):"]
            for label, ids in lists:
                shown = ", ".join(esc(i) for i in ids[:ITEMS_SHOWN])
                more = f", … and {len(ids) - ITEMS_SHOWN} more" if len(ids) > ITEMS_SHOWN else ""
                lines.append(f"- {label} ({len(ids)}): {shown}{more}")
    return lines


def regression_page(
    model_id: str, comparisons: list[dict], run_id: str, level: float | None
) -> str:
    """``grid_cards/<model>/regression.md``: the run's whole comparison table, every dataset."""
    return (
        "\n".join(
            [
                f"# Regression: {md_escape(model_id)} vs baseline",
                "",
                f"Run {md_escape(run_id)}; {len(comparisons)} compared cells.",
            ]
            + regression_markdown(comparisons, level, heading=None)
        )
        + "\n"
    )
