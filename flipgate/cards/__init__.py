"""GRID cards (docs/definitions.md §6): JSON validated by ``grid_card.schema.json``, Markdown,
model-index."""

from flipgate.cards.build import build_card, validate_card, write_cards

__all__ = ["build_card", "validate_card", "write_cards"]
