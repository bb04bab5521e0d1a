"""Hub rows planted with one bad value, for the loaders' error messages."""

from __future__ import annotations

from pathlib import Path

import pytest


def rejects_row(
    loader, rows: list[dict], path: Path, row: int, field: str, value, match: str, **kw
) -> None:
    """Set ``rows[row][field] = value``, write the rows as parquet at ``path`` and expect ``loader``
    (a hub loader reading ``data_files``) to raise a FlipgateError matching ``match``."""
    import pandas as pd

    from flipgate import FlipgateError

    rows = [dict(r) for r in rows]
    rows[row][field] = value
    pd.DataFrame(rows).to_parquet(path)
    with pytest.raises(FlipgateError, match=match):
        loader(path.stem, data_files=str(path), **kw)
