"""A regression case holds its candidate's facet cell (docs/definitions.md §12.4): while one of
its ``vs: baseline`` thresholds can still be decided, the candidate's sequential cell keeps
drawing, up to the items its baseline drew (or the candidate's cap), so the case is tested on
all the pairs it could have — not on the few a facet decided by its own thresholds would leave.

The case's thresholds are decided by the fixed-N paired tests once the planned pairs are in
(:func:`flipgate.regression.runs.planned_pairs`); until then they only hold the cell while
reachable, so the cell's stopping never looks at the paired differences' evidence and the
fixed-N tests keep their α.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from flipgate import FlipgateError
from flipgate.cell import CellKey
from flipgate.gate.sequential import DECIDING_RULES, Dependent
from flipgate.metrics.sequential import ItemValues
from flipgate.order.measure import order_cells
from flipgate.regression.baseline import VS, compared_cells, pairings
from flipgate.regression.compare import Arm, compare_cell
from flipgate.regression.runs import RunRecord, planned_pairs

#: bootstrap draws while a held cell measures a case (its verdict draws the run's own number)
HOLD_BOOTSTRAP = 20


def regression_dependents(
    ctx: Any, auditor: Any, model_id: str, dataset: str, cell: str
) -> list[Dependent]:
    """The regression cases that compare ``model_id``'s facet ``cell`` × ``dataset`` with a
    baseline, as dependents of that cell (flipgate.gate.sequential.Dependent)."""

    if CellKey.parse(cell).is_control or ctx.thresholds_dir is None:
        return []
    cfg = auditor.config

    def holding(candidate: str) -> list:
        return [
            t
            for t in auditor.thresholds(candidate, ctx.thresholds_dir).for_cell(cell, dataset, VS)
            if t.rule in DECIDING_RULES
        ]

    readouts, primary = auditor.readouts(model_id, cell)
    manifest = auditor.store.manifests().get((cell, dataset), {}).get("sha256")
    cells = order_cells(auditor)
    cap = cells.n_items(model_id, dataset, cell)
    out = []
    for p in pairings(ctx):
        if p.skip or model_id not in (p.candidate, p.baseline):
            continue
        if (cell, dataset) not in compared_cells(cfg, p):
            continue
        held = holding(p.candidate)  # the candidate's vs: baseline thresholds on this cell
        if not held:
            continue
        if p.baseline == model_id and p.run is None:  # an in-run baseline: all its case needs
            planned = min(cap, cells.n_items(p.candidate, dataset, cell))
            out.append(Dependent(f"{cell} as the baseline of {p.candidate}", held, None, planned))
            continue
        if p.candidate != model_id:
            continue
        if p.run is not None:
            base = RunRecord.open(p.run).arm(p.baseline, cell, dataset)
        else:  # the baseline model of this run: its own cell, measured first
            trials = cells.measured_trials(p.baseline, dataset, cell)
            base = Arm(
                p.baseline,
                trials,
                tuple(auditor.readouts(p.baseline, cell)[0]),
                manifest,
                None,
                cells.stop(p.baseline, dataset, cell) is not None,
            )
        if base is None:
            continue

        def measure(
            n: int, drawn: pd.DataFrame, base: Arm = base
        ) -> Mapping[tuple[str, str], ItemValues]:
            candidate = Arm(model_id, drawn, tuple(readouts), manifest, None, True)
            try:
                comparison = compare_cell(
                    base, candidate, cell, dataset, primary, HOLD_BOOTSTRAP, cfg.level, cfg.seed
                )
            except FlipgateError:  # incomparable: the case itself says so when it runs
                return {}
            return comparison.sequences()

        planned = planned_pairs(cap, int(base.trials["item_id"].nunique()))
        out.append(Dependent(f"{cell} vs {p.baseline}", held, measure, planned))
    return out
