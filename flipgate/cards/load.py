"""A model's GRID cards as the commands read them from ``--grid-cards-dir`` (``python -m
flipgate card`` and ``export``): its valid cards, its model-index, and what to do with a card file
that cannot be read (:data:`ALLOW_SKIPPED`)."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from flipgate import FlipgateError
from flipgate.cards.write import StaleCardWarning, cards_on_disk, model_index
from flipgate.cli import one_line


def model_dirs(grid_dir: Path) -> list[str]:
    """The model ids under ``grid_dir``: every directory holding a model-index.yaml (org/model
    nests)."""
    return sorted(
        p.parent.relative_to(grid_dir).as_posix() for p in grid_dir.rglob("model-index.yaml")
    )


#: the option that lets a command go on without the card files it cannot read
ALLOW_SKIPPED = "--allow-skipped-cards"
ALLOW_SKIPPED_HELP = (
    "export the readable cards when a card file under --grid-cards-dir cannot be read or "
    "validated (a truncated or stale one), naming each left out on stderr; without it such a "
    "file stops the command (exit 4) before anything is written"
)


def _left_out(warned: list[str], allow_skipped: bool) -> None:
    """The card files :func:`~flipgate.cards.write.cards_on_disk` left out (its warnings, each
    naming the file and why): a FlipgateError naming them all, or with ``allow_skipped`` one
    stderr line each."""
    said = [
        w.removeprefix("flipgate: ").replace(" left out of model-index.yaml: ", ": ", 1)
        for w in warned
    ]
    if said and not allow_skipped:
        raise FlipgateError(
            f"{'; '.join(said)}: {len(said)} card file{'s' * (len(said) != 1)} could not be "
            f"read, so nothing was written; fix or delete {'them' if len(said) > 1 else 'it'} "
            f"(a rerun of the audit writes it again), or pass {ALLOW_SKIPPED} to go on without"
        )
    for line in said:
        print(f"flipgate: left out {line}", file=sys.stderr)


def load_model(
    grid_dir: Path, model: str | None, suites: Sequence[Any] = (), allow_skipped: bool = False
) -> tuple[str, list[dict], dict]:
    """(model id, its valid cards by dataset, its model-index) from ``grid_dir``, or a
    FlipgateError; a card file that cannot be read or validated is one too, unless
    ``allow_skipped`` (then it is named on stderr and left out)."""
    if not grid_dir.is_dir():
        raise FlipgateError(
            f"{grid_dir}: no GRID cards directory (run the audit first, or pass --grid-cards-dir)"
        )
    if model is None:
        models = model_dirs(grid_dir)
        if len(models) != 1:
            raise FlipgateError(
                f"{grid_dir}: "
                + (
                    f"holds {len(models)} models ({', '.join(models)}); a model card is one "
                    "model's: pick one with --model, or give --into DIR/ to write "
                    "DIR/<model>/README.md for each"
                    if models
                    else "holds no model's GRID cards"
                )
            )
        model = models[0]
    model_dir = grid_dir / model
    with warnings.catch_warnings(record=True) as caught:  # a stale or broken card: left out
        warnings.simplefilter("always")
        cards = cards_on_disk(model_dir, model) if model_dir.is_dir() else []
    _left_out(
        [str(w.message) for w in caught if issubclass(w.category, StaleCardWarning)],
        allow_skipped,
    )
    if not cards:
        known = model_dirs(grid_dir)
        raise FlipgateError(
            f"{model_dir}: no GRID cards of model {model!r}"
            + (f" (models there: {', '.join(known)})" if known else "")
        )
    path = model_dir / "model-index.yaml"
    if path.is_file():
        try:
            index = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise FlipgateError(
                f"{path}: unreadable ({type(exc).__name__}: {one_line(exc)})"
            ) from None
        if not isinstance(index, dict) or not isinstance(index.get("model-index"), list):
            raise FlipgateError(f"{path}: has no model-index list")
    else:
        index = model_index(model, cards, suites)
    return model, cards, index
