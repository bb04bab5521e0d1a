"""``python -m flipgate.cards.schema [--check]`` (``make schema``): write
``flipgate/cards/grid_card.schema.json`` from :class:`flipgate.cards.model.GridCard`; with
``--check``, exit 1 where the checked-in file differs from the generated schema."""

from __future__ import annotations

import sys

from flipgate.cards.model import SCHEMA_PATH, schema_text


def main(argv: list[str]) -> int:
    text = schema_text()
    if "--check" in argv:
        same = SCHEMA_PATH.exists() and SCHEMA_PATH.read_text() == text
        print(f"{SCHEMA_PATH}: {'up to date' if same else 'differs from the model; make schema'}")
        return 0 if same else 1
    SCHEMA_PATH.write_text(text)
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
