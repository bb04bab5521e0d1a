"""``python -m flipgate export FORMAT``: a model's GRID cards in a format others read
(docs/exports.md).

``export eval-results --out DIR`` writes ``DIR/.eval_results/flipgate_<dataset>.yaml`` (Hugging
Face's evaluation results, DIR being the model repository) for each card whose dataset is a Hub
benchmark; the others are named on stderr. ``export every-eval-ever --out DIR`` writes one Every
Eval Ever log per card under DIR, the datastore's ``data/`` directory. Both read the cards as
``python -m flipgate card`` does (every valid card under ``--grid-cards-dir``/<model>). Exit 0, or
4 with one ``flipgate: `` line on stderr (a format's package missing, no cards, an unknown model,
a card file that cannot be read, unless ``--allow-skipped-cards``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from flipgate.cards.load import ALLOW_SKIPPED, ALLOW_SKIPPED_HELP, load_model, model_dirs
from flipgate.cli import OK, Parser, run_command
from flipgate.exports import eval_results, every_eval_ever

FORMATS = ("eval-results", "every-eval-ever")


def export_main(argv: list[str] | None = None) -> int:
    """``python -m flipgate export FORMAT ...``; returns the exit status."""
    return run_command(_export, argv)


def _parser() -> Parser:
    parser = Parser(
        prog="python -m flipgate export",
        description="Write GRID cards as Hugging Face .eval_results files or Every Eval Ever "
        "evaluation logs, through those formats' own packages.",
    )
    sub = parser.add_subparsers(dest="format", required=True, metavar="{" + ",".join(FORMATS) + "}")
    for name, help_ in (
        ("eval-results", "DIR/.eval_results/flipgate_<dataset>.yaml per Hub benchmark card"),
        ("every-eval-ever", "one Every Eval Ever log per card under DIR (the data/ directory)"),
    ):
        p = sub.add_parser(name, help=help_)
        p.prog = f"python -m flipgate export {name}"
        p.add_argument("--grid-cards-dir", type=Path, default=Path("grid_cards"))
        p.add_argument(ALLOW_SKIPPED, action="store_true", help=ALLOW_SKIPPED_HELP)
        p.add_argument(
            "--model",
            help=(
                "model id (default: the only model under --grid-cards-dir)"
                if name == "eval-results"
                else "model id (default: every model under --grid-cards-dir)"
            ),
        )
        p.add_argument(
            "--out",
            type=Path,
            required=True,
            metavar="DIR",
            help=(
                "the model repository: DIR/.eval_results/ is written"
                if name == "eval-results"
                else "the datastore's data/ directory: DIR/<dataset>/<developer>/<model>/"
                "<uuid>.json is written"
            ),
        )
        p.add_argument(
            "--source-url",
            metavar="BASE",
            help="where the GRID cards are published: BASE/<model>/<dataset>.md is each result's "
            "source (default: the cards' path, --grid-cards-dir)",
        )
    ever = sub.choices["every-eval-ever"]
    ever.add_argument(
        "--developer",
        help="the developer a model id without an org/ prefix is filed under",
    )
    ever.add_argument(
        "--source-organization",
        default="unknown",
        help="who ran the audit (source_metadata.source_organization_name; default: unknown)",
    )
    ever.add_argument(
        "--evaluator-relationship",
        default="third_party",
        choices=every_eval_ever.RELATIONSHIPS,
        help="the auditor's relationship to the model's developer (default: third_party)",
    )
    return parser


def _export(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    grid: Path = args.grid_cards_dir
    base = args.source_url or grid.as_posix()
    if args.format == "eval-results":
        eval_results.hub()  # the package first: its absence is the one thing to say
        model, cards, _ = load_model(grid, args.model, allow_skipped=args.allow_skipped_cards)
        write_eval_results(args.out, model, cards, base)
        return OK
    every_eval_ever.eee()
    models = [args.model] if args.model else model_dirs(grid) if grid.is_dir() else []
    if not models:
        load_model(grid, None)  # says why: no directory, or no model's cards in it
    allow = args.allow_skipped_cards
    cards = [card for m in models for card in load_model(grid, m, allow_skipped=allow)[1]]
    paths = every_eval_ever.write(
        args.out,
        cards,
        args.developer,
        args.source_organization,
        args.evaluator_relationship,
        base,
    )
    for path in paths:
        print(f"flipgate: {path}: Every Eval Ever log")
    return OK


def write_eval_results(repo_dir: Path, model: str, cards: list[dict], source_base: str) -> None:
    """``repo_dir/.eval_results/`` for ``model``'s cards, each file written and each card
    skipped said so (on stdout, the skipped ones on stderr)."""
    paths, skipped = eval_results.write(repo_dir, cards, source_base)
    for path in paths:
        print(f"flipgate: {path}: Hugging Face evaluation result of {model}")
    for s in skipped:
        print(f"flipgate: {model}/{s.dataset}: not in .eval_results: {s.why}", file=sys.stderr)
