"""GRID cards (docs/definitions.md §6): typed (``model.GridCard``), JSON validated by
``grid_card.schema.json`` (generated from the model), Markdown, model-index."""

from flipgate.cards.build import build_card, validate_card
from flipgate.cards.write import write_cards

__all__ = ["build_card", "validate_card", "write_cards"]
