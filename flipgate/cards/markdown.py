"""GRID cards as Markdown: the card page (:func:`card_markdown`) and the number formats the
suites' card sections share."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flipgate.cards.build import TypedCardSuite
from flipgate.cards.disclosure import interval_text, labelled_intervals, stop_line
from flipgate.cards.model import (
    SequentialCell,
)
from flipgate.gate.rules import SEQUENCE
from flipgate.markdown_text import md_escape
from flipgate.results import Undecided

#: how an interrupted run's card (``run.interrupted``) names itself, and each of its verdicts
PARTIAL = "interrupted run, partial card"


PARTIAL_WHY = (
    "its cells and threshold verdicts are those of the cells that finished before the run "
    "stopped (or a cell's trials so far), not the audit's verdict"
)


def num(x) -> str:
    """A number as the cards print it (3 decimals), – where it is missing or NaN."""
    return "–" if x is None or x != x else f"{x:.3f}"


def ci_text(verdict: dict) -> str:
    """A verdict's interval as ``[lo, hi]`` with the level it was computed at, or – where it has
    none."""
    return interval_text(verdict.get("ci"), verdict.get("level"))


def verdict_interval(card: dict, verdict: dict) -> str:
    """A threshold verdict's interval on ``card`` (JSON data): its CI (:func:`ci_text`), or, for
    a sequential cell, the confidence sequence and, labelled apart, the fixed-N bootstrap CI of
    the same metric and readout from the cell's metrics; both shown, the deciding test is the
    verdict's ``test`` (docs/definitions.md §12.6)."""
    if verdict.get("interval") != SEQUENCE:
        return ci_text(verdict)
    cell = verdict.get("facet") or ""
    metrics = (card["order_robustness"].get(cell) or card["controls"].get(cell) or {}).get(
        verdict.get("readout") or "", {}
    )
    bootstrap = (metrics.get(verdict["metric"]) or {}).get("ci")
    level = card.get("sequential", {}).get(cell, {}).get("bootstrap_level")
    return labelled_intervals(verdict.get("ci"), verdict.get("level"), bootstrap, level)


def verdict_text(v: dict) -> str:
    """The label, why it is undecided where it is (docs/definitions.md §12.8), and what the gate
    did with it where that differs (docs/thresholds.md): e.g. "**inconclusive**
    (under-powered: 412 items would decide it (cap 64)) → fail" for an unproven ``upper``
    bound."""
    label, outcome = v["verdict"], v.get("outcome")
    why = v.get("undecided")
    return (
        f"**{md_escape(label)}**"
        + (f" ({md_escape(Undecided.model_validate(why).text())})" if why else "")
        + (f" → {md_escape(outcome)}" if outcome and outcome != label else "")
    )


def fmt_estimate(m: dict | None) -> str:
    """An estimate (JSON data) as the cards print it: the value and its CI, – where it has none."""
    if m is None or m["estimate"] is None:
        return "–"
    ci = m.get("ci")
    tail = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and ci[0] is not None else ""
    return f"{m['estimate']:.3f}{tail}"


def card_markdown(card: dict, suites: Sequence[Any] = ()) -> str:
    """The card (JSON data) as Markdown; each of ``suites`` (the registered suites, in their
    order) that is a flipgate.cards.build.TypedCardSuite adds the lines of its typed sections."""
    r = card["axis_receipt"]
    fmt = fmt_estimate
    # every string below that came from models.yaml, thresholds, envelopes or the store
    esc = md_escape
    lines = [
        f"# GRID card: {esc(card['model']['id'])} on {esc(card['dataset']['name'])}",
        "",
        f"Run {esc(card['run']['run_id'])}, {esc(card['run']['created'])}; N = "
        f"{card['dataset']['n_items']} items "
        f"({esc(card['dataset']['sampling'])}).",
    ]
    interrupted = card["run"].get("interrupted")
    if interrupted:
        lines += ["", f"**{PARTIAL}** ({esc(interrupted)}): {PARTIAL_WHY}.", ""]
    lines += [
        f"Position-reference screen ({esc(f)}): {s['excluded']} of {s['considered']} items "
        "excluded, "
        f"{s['kept']} kept."
        for f, s in card["dataset"].get("screens", {}).items()
    ]
    calls = card["run"].get("calls")
    if calls:
        lines.append(
            f"API calls: {calls['requests']} requests, {calls['retries']} retries, "
            f"{calls['timeouts']} "
            f"timeouts, {calls.get('failures', 0)} failed."
        )
    lines += [
        "",
        "## Axis receipt",
        "",
        "| field | value |",
        "|---|---|",
        f"| backend | {esc(card['model'].get('backend'))} |",
        f"| source | {esc(card['model'].get('source'))} |",
    ]
    for key in (
        "template_id",
        "template_sha256",
        "weights_sha256",
        "tokenizer_sha256",
        "chat_template_sha256",
        "quantization",
        "dtype",
        "model_revision",
        "git_commit",
    ):
        lines.append(f"| {key} | {esc(r.get(key))} |")
    if r.get("dtype_choice"):  # a local model's: declared, or auto by the hardware
        lines.append(f"| dtype chosen | {esc(r['dtype_choice'])} |")
    lines += [
        f"| decoding | {esc(json.dumps(r['decoding']))} |",
        f"| scoring path | {esc(json.dumps(r['scoring_path']))} |",
        f"| manifests | {esc(json.dumps(r['manifest_sha256']))} |",
        "",
        "## Scores",
        "",
        f"Facet {esc(card['scores']['facet'])}, primary readout "
        f"{esc(card['scores']['primary_readout'])}.",
        "",
        f"- accuracy (canonical ordering): {fmt(card['scores']['accuracy_canonical'])}",
        f"- accuracy (all orderings): {fmt(card['scores']['accuracy_all_orderings'])}",
    ]
    for suite in suites:
        if isinstance(suite, TypedCardSuite):
            lines += suite.card_fields_markdown(card)
    lines += [
        "",
        "## Threshold verdicts",
        "",
        "| cell | threshold | estimate | CI | deciding test | p | BH q | verdict | why |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for v in card["thresholds"]:
        lines.append(
            f"| {esc(v.get('facet', ''))} | {esc(v['threshold'])} | {num(v.get('estimate'))} | "
            f"{verdict_interval(card, v)} | {esc(v.get('test') or '–')} "
            f"| {num(v.get('p_value'))} | {num(v.get('q_value'))} | {verdict_text(v)}"
            f"{' (' + PARTIAL + ')' if interrupted else ''} "
            f"| {esc(v.get('why') or '')} |"
        )
    if card.get("sequential"):
        lines += [
            "",
            "## Sequential gates",
            "",
            "Items drawn in batches until every threshold its one-sided tests decide was "
            "decided or could no longer be decided, or the cap (docs/definitions.md §12):",
            "",
        ]
        lines += [
            f"- {stop_line(cell, SequentialCell.model_validate(stop), esc)}"
            for cell, stop in card["sequential"].items()
        ]
    lines += [
        "",
        "## Scope",
        "",
        "Varied: " + "; ".join(map(esc, card["scope"]["varied"])) + ".",
        "",
        "Not varied: " + "; ".join(map(esc, card["scope"]["not_varied"])) + ".",
        "",
    ]
    return "\n".join(lines)
