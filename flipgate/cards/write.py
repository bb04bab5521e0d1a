"""Write GRID cards (JSON and Markdown, with each suite's section) and each model's
model-index.yaml and pages; read back the valid cards on disk."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from flipgate import storage
from flipgate.cards.build import NoCard, TypedCardSuite, build_card, validate_card
from flipgate.cards.markdown import card_markdown
from flipgate.cards.model import (
    GridCard,
)
from flipgate.store import TrialStore


def model_index(model_id: str, cards: list[dict], suites: Sequence[Any] = ()) -> dict:
    """A Hugging Face ``model-index`` block with each card's facet metrics, and the headline
    metrics of the suites' sections (``TypedCardSuite.model_index_metrics``)."""
    results = []
    for card in cards:
        metrics = [
            {
                "type": "accuracy",
                "name": "accuracy (canonical ordering)",
                "value": card["scores"]["accuracy_canonical"]["estimate"],
            }
        ]
        for suite in suites:
            if isinstance(suite, TypedCardSuite):
                metrics += suite.model_index_metrics(card)
        results.append(
            {
                "task": {"type": "multiple-choice", "name": "ordering robustness"},
                "dataset": {"name": card["dataset"]["name"], "type": card["dataset"]["name"]},
                "metrics": [m for m in metrics if m["value"] is not None],
            }
        )
    return {"model-index": [{"name": model_id, "results": results}]}


class StaleCardWarning(UserWarning):
    """A card JSON on disk that cannot enter its model's model-index.yaml (unreadable or not
    schema-valid)."""


def cards_on_disk(model_dir: Path, model_id: str) -> list[dict]:
    """Every valid card of ``model_id`` under ``model_dir`` (this run's and earlier runs'), by
    dataset name; a file that does not parse or validate is skipped with a StaleCardWarning."""
    cards = []
    for path in sorted(Path(model_dir).rglob("*.json")):
        try:
            card = json.loads(path.read_text())
            validate_card(card)
        except (OSError, ValueError, jsonschema.ValidationError) as exc:
            reason = (
                exc.message
                if isinstance(exc, jsonschema.ValidationError)
                else f"{type(exc).__name__}: {exc}"
            )
            warnings.warn(
                f"flipgate: {path} left out of model-index.yaml: {reason}",
                StaleCardWarning,
                stacklevel=2,
            )
            continue
        if (
            card["model"]["id"] == model_id
        ):  # a nested model id's directory (org/model) is not this model's
            cards.append(card)
    return sorted(cards, key=lambda c: c["dataset"]["name"])


@dataclass(frozen=True)
class WrittenCard:
    """A card this run built, and the two files it was written to."""

    card: GridCard
    json_path: Path
    markdown_path: Path


@dataclass
class WrittenCards:
    """What :func:`write_cards` wrote: the cards (as built, for the Allure results and the
    terminal) and every file, model indexes and regression pages included."""

    cards: list[WrittenCard] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)
    #: the (model, dataset) pairs with trials but no card (:class:`NoCard`), one line each
    missing: list[str] = field(default_factory=list)


def write_cards(
    store: TrialStore,
    out_dir: Path,
    run_id: str,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 42,
    root: Path | None = None,
    suites: Sequence[Any] = (),
) -> WrittenCards:
    """One card (JSON + MD) per (model, dataset) in the store, plus model-index.yaml per model. The
    index is rebuilt from every card on disk in the model's directory, so a partial run (``-k arc``)
    keeps the datasets it did not audit; it returns what this run wrote. ``suites`` are the
    registered suites (flipgate.registry.suites()): flipgate's own fill their typed card fields
    and write their pages next to a model's cards (flipgate.cards.build.TypedCardSuite); every suite
    adds its section to the cards it has one for (the card's ``suites``). A pair with no card to
    build (:class:`NoCard`: a suite's cell that did not finish) is listed in ``missing``, and the
    other pairs' cards are written."""
    pairs = store.conn.execute(
        "SELECT DISTINCT model_id, dataset FROM trials ORDER BY 1, 2"
    ).fetchall()
    written = WrittenCards()
    store.adjust_q_values()
    for model_id, dataset in pairs:
        try:
            card = build_card(store, model_id, dataset, run_id, n_boot, level, seed, root, suites)
        except NoCard as exc:
            written.missing.append(str(exc))
            continue
        markdown = card_markdown(card.to_data(), suites)
        sections = {s: s.card_section(store, model_id, dataset) for s in suites}
        sections = {s: section for s, section in sections.items() if section is not None}
        if sections:
            card = card.model_copy(update={"suites": {s.name: x for s, x in sections.items()}})
            validate_card(card.to_data())
            markdown += "\n" + "\n".join(
                line for s, x in sections.items() for line in s.card_markdown(x)
            )
        base = Path(out_dir) / model_id / dataset
        done = WrittenCard(card, base.with_suffix(".json"), base.with_suffix(".md"))
        storage.write_text(storage.CARDS, done.json_path, card.to_json())
        storage.write_text(storage.CARDS, done.markdown_path, markdown)
        written.cards.append(done)
        written.paths += [done.json_path, done.markdown_path]
    for model_id in dict.fromkeys(c.card.model.id for c in written.cards):
        cards = cards_on_disk(Path(out_dir) / model_id, model_id)
        path = Path(out_dir) / model_id / "model-index.yaml"
        index = yaml.safe_dump(model_index(model_id, cards, suites), sort_keys=False)
        storage.write_text(storage.CARDS, path, index)
        written.paths.append(path)
        for suite in suites:
            if not isinstance(suite, TypedCardSuite):
                continue
            for name, page in suite.model_pages(store, model_id, run_id, level).items():
                path = Path(out_dir) / model_id / name
                storage.write_text(storage.CARDS, path, page)
                written.paths.append(path)
    return written
