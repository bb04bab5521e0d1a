"""Planted trial tables of a readout decomposition."""

from __future__ import annotations

import pandas as pd


def table(answers: dict[str, dict[str, list]]) -> pd.DataFrame:
    """Trials from ``{item: {readout: [content per condition]}}``."""
    rows = []
    for item, by_readout in answers.items():
        n = len(next(iter(by_readout.values())))
        for c in range(n):
            got = {r: a[c] for r, a in by_readout.items()}
            rows.append({"item_id": item, "condition": c, "mapped": got, "readouts": got})
    return pd.DataFrame(rows)
