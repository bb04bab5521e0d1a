"""``python -m flipgate card --into README.md``: merge a model's GRID cards into its Hugging Face
model card. A model card is one model's, as each model repository on the Hub has its own README.md:
with several models under the GRID cards directory, ``--model ID`` picks one, or ``--into DIR/``
writes ``DIR/<model id>/README.md`` for every model (every card is rendered before any is written).

The flipgate section (a summary of each dataset's card, its threshold verdicts and, where the cards
carry one, the regression table against the baseline) lives between ``<!-- flipgate:begin -->``
and ``<!-- flipgate:end -->``; a rerun replaces only that section and the metadata's
``model-index`` key, never the author's text or other metadata. ``--eval-results`` also writes
the Hugging Face ``.eval_results/`` files beside each README.md (flipgate/exports/eval_results.py,
docs/exports.md). Exit 0, or 4 with one ``flipgate: `` line on stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from flipgate import FlipgateError, storage
from flipgate.cards.build import TypedCardSuite
from flipgate.cards.load import ALLOW_SKIPPED, ALLOW_SKIPPED_HELP, load_model, model_dirs
from flipgate.cards.markdown import verdict_interval, verdict_text
from flipgate.cell import CellKey
from flipgate.cli import OK, Parser, one_line, run_command
from flipgate.files import read_user_text, user_file
from flipgate.gate.rules import SEQUENCE
from flipgate.markdown_text import md_escape

MODEL_CARD = storage.Place("model card", "--into", "delete it or give another --into")
BEGIN, END = "<!-- flipgate:begin -->", "<!-- flipgate:end -->"
NOTE = (
    "<!-- written by `python -m flipgate card`; edits between these markers are replaced on the "
    "next run -->"
)


def card_main(argv: list[str] | None = None, suites: Sequence[Any] = ()) -> int:
    """``python -m flipgate card --into README.md ...``; returns the exit status. ``suites``: the
    registered suites (flipgate.__main__ passes flipgate.registry.suites()), whose lines the
    section carries (flipgate.cards.build.TypedCardSuite.model_card_lines)."""
    return run_command(lambda args: _card(args, suites), argv)


def _card(argv: list[str], suites: Sequence[Any]) -> int:
    parser = Parser(
        prog="python -m flipgate card",
        description="Merge a model's GRID cards and model-index into its Hugging Face model card. "
        "A model card is one model's: with several models under --grid-cards-dir, name one with "
        "--model, or give --into a directory (DIR/) to write DIR/<model>/README.md for each.",
    )
    parser.add_argument(
        "--into",
        required=True,
        metavar="README.md|DIR/",
        help="the model card (README.md) to create or update; a directory (an existing one, or a "
        "path ending in /): DIR/<model id>/README.md for every model (or --model's)",
    )
    parser.add_argument(
        "--model",
        help="model id (default: the only model under --grid-cards-dir; with --into DIR/: every "
        "model)",
    )
    parser.add_argument("--grid-cards-dir", type=Path, default=Path("grid_cards"))
    parser.add_argument(ALLOW_SKIPPED, action="store_true", help=ALLOW_SKIPPED_HELP)
    parser.add_argument(
        "--eval-results",
        action="store_true",
        help="also write the Hugging Face .eval_results/ files beside each README.md (as "
        "`python -m flipgate export eval-results` does: docs/exports.md)",
    )
    parser.add_argument(
        "--source-url",
        metavar="BASE",
        help="with --eval-results: where the GRID cards are published, BASE/<model>/<dataset>.md "
        "being each result's source (default: --grid-cards-dir's path)",
    )
    args = parser.parse_args(argv)
    if args.source_url and not args.eval_results:
        raise FlipgateError("option --source-url: only with --eval-results")
    if args.eval_results:
        from flipgate.exports import eval_results

        eval_results.hub("card --eval-results")  # missing: one line, before anything is written
    into = Path(args.into)
    grid = args.grid_cards_dir
    per_model = into.is_dir() or args.into.endswith(("/", os.sep))
    if per_model:
        if into.exists() and not into.is_dir():
            raise FlipgateError(f"option --into {args.into!r}: not a directory")
        models = [args.model] if args.model else model_dirs(grid) if grid.is_dir() else []
        allow = args.allow_skipped_cards
        targets = [(into / m / "README.md", *load_model(grid, m, suites, allow)) for m in models]
        if not targets:
            load_model(grid, None, suites)  # says why: no directory, or no model's cards in it
    else:
        targets = [(into, *load_model(grid, args.model, suites, args.allow_skipped_cards))]
    # where each is written (links inside the project followed): checked before any is written
    real = {path: model_card_file(path, grid) for path, *_ in targets}
    # every card rendered before any is written: a bad one (e.g. unbalanced markers) writes none
    rendered = [
        (path, model, cards, render_card(real[path], model, cards, index, grid, suites, per_model))
        for path, model, cards, index in targets
    ]
    for path, model, cards, content in rendered:
        if per_model:  # DIR/<model>/ (org/model nests)
            storage.call(
                MODEL_CARD, path, lambda: real[path].parent.mkdir(parents=True, exist_ok=True)
            )
        storage.write_text(MODEL_CARD, real[path], content)
        n = len(cards)
        print(
            f"flipgate: {path}: GRID section of {model} ({n} dataset{'s' if n != 1 else ''}) and "
            "model-index merged"
        )
        if args.eval_results:
            from flipgate.exports.cli import write_eval_results

            write_eval_results(real[path].parent, model, cards, args.source_url or grid.as_posix())
    return OK


#: what a model card may be named: Markdown, as a Hugging Face README.md
MARKDOWN = (".md", ".markdown")
#: the folders where flipgate's own outputs live (beside --grid-cards-dir): never a model card
OUTPUTS = ("reports",)


def model_card_file(path: Path, grid: Path) -> Path:
    """The file ``card --into`` writes for ``path``: a Markdown file (never a YAML, TOML or JSON
    file, a store), not among flipgate's outputs (the GRID cards, ``reports/``), and reached
    through no link out of the project (flipgate.files.user_file; the project: the current folder,
    or the model card's folder when it lies outside it). Anything else is one line, before any
    file is written."""
    where = f"option --into {str(path)!r}"
    if path.suffix.lower() not in MARKDOWN:
        raise FlipgateError(
            f"{where}: not a Markdown model card (README.md); `flipgate card` writes only into "
            "a Markdown file, never a YAML, TOML or JSON file or a store; nothing written"
        )
    here = Path.cwd()
    project = here if path.absolute().is_relative_to(here) else path.absolute().parent
    real = user_file(path, project, where)
    for output in (grid, *(project / name for name in OUTPUTS)):
        if real.is_relative_to(output.resolve()):
            raise FlipgateError(
                f"{where}: inside {output}, where flipgate writes its own outputs; give the "
                "model's README.md; nothing written"
            )
    return real


def _fmt(m: dict | None) -> str:
    if not m or m.get("estimate") is None:
        return "–"
    ci = m.get("ci")
    return f"{m['estimate']:.3f}" + (
        f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci and ci[0] is not None else ""
    )


def grid_section(model: str, cards: list[dict], grid_dir: Path, suites: Sequence[Any] = ()) -> str:
    """The Markdown between the markers: per dataset the key metrics with CIs, the verdicts and
    the lines of ``suites`` (e.g. the regression table against the baseline, where the cards carry
    one)."""
    esc = md_escape
    lines = [
        "## Ordering robustness (flipgate GRID cards)",
        "",
        f"Measured by flipgate on {len(cards)} dataset{'s' if len(cards) != 1 else ''}; "
        "estimates with item-clustered bootstrap CIs, primary readout per facet. Full cards with "
        "the axis receipt: "
        f"`{esc(grid_dir.name)}/{esc(model)}/<dataset>.md`.",
        "",
        "| dataset | run | N | cell | readout | K | flip rate | parse rate | accuracy | Δ_order |",
        "|---|---|---:|---|---|---:|---|---|---|---|",
    ]
    for card in cards:
        primaries = card["axis_receipt"]["scoring_path"]["primary_readout"]
        head = (
            f"| {esc(card['dataset']['name'])} | {esc(card['run']['run_id'])} "
            f"| {card['dataset']['n_items']} "
        )
        cells = [
            (cell, by)
            for group in ("order_robustness", "controls")
            for cell, by in card[group].items()
        ]
        for cell, by_readout in cells:
            readout = primaries.get(CellKey.parse(cell).facet)
            readout = readout if readout in by_readout else next(iter(by_readout))
            m = by_readout[readout]
            lines.append(
                f"{head}| {esc(cell)} | {esc(readout)} | {m['k']} | {_fmt(m['flip_rate'])} "
                f"| {_fmt(m['parse_rate'])} | {_fmt(m['accuracy'])} "
                f"| {_fmt(m.get('delta_order'))} |"
            )
        if not cells:  # a dataset one suite alone audited (an envelope benchmark): its score
            label = next(
                (
                    x
                    for s in suites
                    if isinstance(s, TypedCardSuite)
                    for x in [s.own_card_label(card)]
                    if x
                ),
                "–",
            )
            lines.append(
                f"{head}| {label} "
                f"| {esc(card['scores']['primary_readout'])} | – "
                f"| – | – | {_fmt(card['scores']['accuracy_canonical'])} | – |"
            )
    verdicts = [(card, v) for card in cards for v in card["thresholds"]]
    if verdicts:
        lines += [
            "",
            "| dataset | cell | threshold | estimate | CI | deciding test | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for card, v in verdicts:
            ci = v.get("ci")
            if v.get("interval") == SEQUENCE:  # the sequence, the bootstrap CI labelled apart
                ci = verdict_interval(card, v)
            else:
                ci = (
                    f"[{ci[0]:.3f}, {ci[1]:.3f}]"
                    if ci and ci[0] is not None and ci[1] is not None
                    else "–"
                )
            estimate = "–" if v.get("estimate") is None else f"{v['estimate']:.3f}"
            verdict = verdict_text(v)
            lines.append(
                f"| {esc(card['dataset']['name'])} | {esc(v.get('facet'))} | {esc(v['threshold'])} "
                f"| {estimate} | {ci} | {esc(v.get('test') or '–')} "
                f"| {verdict} |"
            )
    for suite in suites:
        if isinstance(suite, TypedCardSuite):
            lines += suite.model_card_lines(cards)
    return "\n".join(lines) + "\n"


def merge_section(text: str, section: str, where: Path) -> str:
    """``text`` with the flipgate section replaced (or appended once); the rest is kept byte for
    byte."""
    block = f"{BEGIN}\n{NOTE}\n\n{section.strip()}\n\n{END}"
    n_begin, n_end = text.count(BEGIN), text.count(END)
    if n_begin == n_end == 0:
        return (text.rstrip("\n") + "\n\n" if text.strip() else "") + block + "\n"
    start, end = text.find(BEGIN), text.find(END)
    if n_begin != 1 or n_end != 1 or end < start:
        raise FlipgateError(
            f"{where}: expected one {BEGIN} … {END} pair, found {n_begin} begin and {n_end} end "
            f"markers; fix them by hand, nothing was written"
        )
    return text[:start] + block + text[end + len(END) :]


@contextlib.contextmanager
def _quiet_hub():
    """Silence huggingface_hub's warning about a README without a metadata block (one is added)."""
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def render_card(
    path: Path,
    model: str,
    cards: list[dict],
    index: dict,
    grid_dir: Path,
    suites: Sequence[Any] = (),
    new_dir_ok: bool = False,
) -> str:
    """The model card at ``path`` (a new one when there is none) with its flipgate section and
    ``model-index`` replaced: what the command writes there, atomically. ``path``'s directory
    must exist unless ``new_dir_ok`` (the command creates ``DIR/<model>/`` for ``--into DIR/``)."""
    from huggingface_hub import ModelCard
    from huggingface_hub.repocard_data import model_index_to_eval_results

    try:
        name, results = model_index_to_eval_results(index["model-index"])
    except (KeyError, TypeError, ValueError) as exc:
        raise FlipgateError(
            f"{grid_dir / model / 'model-index.yaml'}: not a valid model-index ({one_line(exc)})"
        ) from None
    if path.is_dir():
        raise FlipgateError(f"option --into: {path}: is a directory, not a model card file")
    if not new_dir_ok and not path.parent.is_dir():
        raise FlipgateError(f"option --into: {path.parent}: no such directory for the model card")
    with _quiet_hub():
        try:
            if path.exists():
                card = ModelCard(read_user_text(path), ignore_metadata_errors=True)
            else:
                card = ModelCard(f"---\n{yaml.safe_dump(index, sort_keys=False)}---\n\n# {model}\n")
        except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
            raise FlipgateError(
                f"{path}: unreadable model card ({type(exc).__name__}: {one_line(exc)})"
            ) from None
        # huggingface_hub types ModelCard.data as CardData; it is a ModelCardData
        card.data.model_name, card.data.eval_results = (  # type: ignore[attr-defined]
            name,
            results,
        )  # the model-index key, replaced
        card.text = merge_section(card.text, grid_section(model, cards, grid_dir, suites), path)
        return str(card)
