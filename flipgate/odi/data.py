"""ODI inputs (docs/definitions.md §4): per-trial outcomes from a trials table, and the long-format
index arrays the model reads. An item is one (facet, dataset, item_id); its cell is its (facet,
dataset)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from flipgate import FlipgateError

OUTCOMES = ("modal", "correct")
KEY = ["model_id", "facet", "dataset", "item_id"]
TRIAL_COLUMNS = [*KEY, "condition", "mapped", "correct"]


@dataclass(frozen=True)
class ODIData:
    """Long-format trials of one outcome: per trial ``model``, ``item``, ``order`` (ordering index),
    ``cell`` and ``facet`` indices and ``y``; ``item_cell`` / ``cell_facet`` map items to cells and
    cells to facets; the name lists give each index its label."""

    model: np.ndarray
    item: np.ndarray
    order: np.ndarray
    cell: np.ndarray
    facet: np.ndarray
    y: np.ndarray
    item_cell: np.ndarray
    cell_facet: np.ndarray
    models: list[str]
    items: list[tuple[str, str, str]]
    cells: list[tuple[str, str]]
    facets: list[str]
    k: int
    outcome: str = "modal"

    @property
    def n(self) -> int:
        return int(self.y.size)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def density(self) -> float:
        """Share of the model × item × ordering grid that has a trial."""
        return self.n / (len(self.models) * len(self.items) * self.k)

    @cached_property
    def grid(self) -> tuple[np.ndarray, np.ndarray]:
        """``y`` and a has-a-trial mask on the dense (model, item, ordering) grid."""
        shape = (len(self.models), len(self.items), self.k)
        y, mask = np.zeros(shape), np.zeros(shape, dtype=bool)
        y[self.model, self.item, self.order] = self.y
        mask[self.model, self.item, self.order] = True
        return y, mask

    def sizes(self) -> dict[str, int]:
        return {
            "trials": self.n,
            "models": len(self.models),
            "items": len(self.items),
            "cells": len(self.cells),
            "facets": len(self.facets),
            "k": self.k,
        }


def _key(answer) -> Hashable:
    return answer if isinstance(answer, Hashable) else json.dumps(answer, sort_keys=True)


def _modal(answers: pd.Series) -> pd.Series:
    """1.0 where the answer equals the item's untied modal answer, 0.0 where not; NaN for every
    trial of an item whose most frequent answers tie (it has no modal answer)."""
    keys = [_key(a) for a in answers]
    (top, n), *rest = Counter(keys).most_common(2)
    if rest and rest[0][1] == n:
        return pd.Series(np.nan, index=answers.index)
    return pd.Series([float(k == top) for k in keys], index=answers.index)


def outcomes(trials: pd.DataFrame, readout: str) -> pd.DataFrame:
    """Per-trial ODI outcomes under ``readout``: ``modal`` (answer equals the model's untied modal
    answer for the item over its orderings) and ``correct`` (answer is gold), each 1.0/0.0 or NaN
    where the trial does not enter that outcome. Parse failures (``mapped[readout]`` None) are
    dropped; ``correct[readout]`` None leaves ``correct`` NaN; items with a tied mode leave
    ``modal`` NaN for that model."""
    missing = [c for c in TRIAL_COLUMNS if c not in trials.columns]
    if missing:
        raise FlipgateError(f"ODI trials table lacks column(s) {missing}; it needs {TRIAL_COLUMNS}")
    if trials.empty:
        raise FlipgateError("ODI trials table is empty")
    if not any(isinstance(m, dict) and readout in m for m in trials["mapped"]):
        raise FlipgateError(f"readout {readout!r} appears in no trial's 'mapped' answers")
    df = trials[[*KEY, "condition"]].copy()
    df["answer"] = [m.get(readout) if isinstance(m, dict) else None for m in trials["mapped"]]
    df["correct"] = [
        np.nan if not isinstance(c, dict) or c.get(readout) is None else float(c[readout])
        for c in trials["correct"]
    ]
    df = df[df["answer"].notna()]
    if df.empty:
        raise FlipgateError(f"every ODI trial is a parse failure under readout {readout!r}")
    df["modal"] = df.groupby(KEY, sort=False)["answer"].transform(_modal)
    return df.reset_index(drop=True)[[*KEY, "condition", "answer", "modal", "correct"]]


def _codes(values: pd.Series | pd.MultiIndex) -> tuple[np.ndarray, list]:
    codes, uniques = pd.factorize(values, sort=True)
    return codes.astype(np.int32), list(uniques)


def build(table: pd.DataFrame, outcome: str = "modal", min_models: int = 2) -> ODIData:
    """Index arrays of ``outcome`` from an :func:`outcomes` table, dropping its NaN trials; a panel
    fit needs ``min_models`` ≥ 2 (θ is centred across models), a per-model fit 1."""
    if outcome not in OUTCOMES:
        raise FlipgateError(f"ODI outcome {outcome!r} is not one of {list(OUTCOMES)}")
    df = table[table[outcome].notna()]
    if df.empty:
        raise FlipgateError(
            f"no trials enter the ODI {outcome!r} outcome ({len(table)} before exclusions)"
        )
    cond = pd.to_numeric(df["condition"], errors="coerce")
    if cond.isna().any() or (cond < 0).any() or (cond % 1 != 0).any():
        bad = df["condition"][cond.isna() | (cond < 0) | (cond % 1 != 0)].iloc[0]
        raise FlipgateError(f"ODI 'condition' must be an ordering index 0..K-1, got {bad!r}")
    dup = df.duplicated([*KEY, "condition"])
    if dup.any():
        row = df[dup].iloc[0]
        raise FlipgateError(
            f"ODI trials repeat ordering {row['condition']} of item {row['item_id']!r} "
            f"({row['facet']}/{row['dataset']}) for model {row['model_id']!r}"
        )
    model, models = _codes(df["model_id"].astype(str))
    if len(models) < min_models:
        raise FlipgateError(
            f"ODI needs at least {min_models} models (θ is centred across models), got {models}"
        )
    item, items = _codes(pd.MultiIndex.from_frame(df[["facet", "dataset", "item_id"]].astype(str)))
    cells = sorted({(f, d) for f, d, _ in items})
    facets = sorted({f for f, _ in cells})
    item_cell = np.array([cells.index((f, d)) for f, d, _ in items], dtype=np.int32)
    cell_facet = np.array([facets.index(f) for f, _ in cells], dtype=np.int32)
    return ODIData(
        model=model,
        item=item,
        order=cond.to_numpy(dtype=np.int32),
        cell=item_cell[item],
        facet=cell_facet[item_cell[item]],
        y=df[outcome].to_numpy(dtype=np.float64),
        item_cell=item_cell,
        cell_facet=cell_facet,
        models=models,
        items=[tuple(i) for i in items],
        cells=cells,
        facets=facets,
        k=int(cond.max()) + 1,
        outcome=outcome,
    )


def from_trials(
    trials: pd.DataFrame, readout: str, outcome: str = "modal", min_models: int = 2
) -> ODIData:
    """:func:`build` over :func:`outcomes`."""
    return build(outcomes(trials, readout), outcome, min_models)
