"""Collection-time checks of the thresholds files against the audited plan (docs/thresholds.md).

A threshold whose selectors (``facet``, ``dataset``, ``readout``, ``model``) match no cell of the
plan would gate nothing, so the run would pass however bad the model: a typo must never silently
disable a gate. The plan is models.yaml's (not the ``-k`` selection): every model's order cells
(facets and controls × datasets × the readouts the model gives on that facet), the ODI panel, the
envelope's benchmarks for its roster, the decomposition, judge consensus and continuity cells,
and each
regression candidate's order cells (``vs: baseline``). Thresholds of a whole suite the plan does
not run (e.g. ``facet: envelope`` when no model is in the envelope roster) are not errors: nothing
runs that they could gate. Override files must be named after a model of the roster.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from flipgate import FlipgateError
from flipgate.cell import Cell
from flipgate.config import (
    CONTINUITY_CELL,
    DECOMPOSITION_CELL,
    ENVELOPE_CELL,
    JUDGE_CELL,
    ODI_CELL,
    AuditConfig,
    Threshold,
    parse_thresholds,
    suite_cells,
    threshold_files,
)
from flipgate.facets import readouts_for


@dataclass(frozen=True)
class PlanCell:
    """One gated cell of the plan: a model's facet/control/suite cell on a dataset."""

    model: str
    cell: str
    dataset: str
    readouts: tuple[str, ...]
    #: "baseline" for a regression comparison of the cell (docs/definitions.md §11)
    vs: str | None = None
    #: the perturbation axis of a decomposition cell (docs/definitions.md §8)
    axis: str | None = None


def _suite(cell_or_facet: str | None, vs: str | None = None) -> str:
    if vs is not None:
        return "regression"
    return cell_or_facet if cell_or_facet in suite_cells() else "order"


def plan_cells(
    cfg: AuditConfig,
    envelope_roster: Sequence[str] = (),
    envelope_benchmarks: Sequence[str] = (),
    compared: Sequence[str] = (),
    external: Sequence[PlanCell] = (),
) -> list[PlanCell]:
    """Every cell the plan gates (see module docstring); ``compared``: the candidates of the
    regression suite; ``external``: the cells of suites other packages registered."""
    out = []
    for model_id in cfg.audited("order"):
        model = cfg.models[model_id]
        for cell, dataset in cfg.cells(model_id):
            try:
                readouts = readouts_for(
                    Cell.parse(cell).facet, model["readouts"], model["primary_readout"]
                )[0]
            except FlipgateError:  # the cell itself reports this when it runs
                readouts = model["readouts"]
            out.append(PlanCell(model_id, cell, dataset, tuple(readouts)))
            if model_id in compared:
                out.append(PlanCell(model_id, cell, dataset, tuple(readouts), "baseline"))
        out.append(PlanCell(model_id, ODI_CELL, ODI_CELL, ()))
    for model_id in envelope_roster:
        out += [PlanCell(model_id, ENVELOPE_CELL, b, ()) for b in envelope_benchmarks]
    plan = cfg.plans.get("readouts")
    if plan is not None:
        out += [
            PlanCell(model_id, DECOMPOSITION_CELL, spec.name, plan.readouts, axis=axis)
            for model_id in cfg.audited("readouts")
            for spec in plan.datasets
            for axis in plan.axes
        ]
    judges = cfg.plans.get("judges")
    if judges is not None:
        out += [
            PlanCell(m, JUDGE_CELL, spec.name, (judges.readout_for(cfg.models[m]),))
            for m in cfg.audited("judges")
            for spec in judges.datasets
        ]
    sweeps = cfg.plans.get("continuity")
    if sweeps is not None:  # an estimator is the cell's "readout"
        out += [
            PlanCell(m, CONTINUITY_CELL, sweep, sweeps.estimators)
            for m in cfg.audited("continuity")
            for sweep in sweeps.sweeps
        ]
    return out + list(external)


def check_selection(cfg: AuditConfig, cells: list[PlanCell]) -> None:
    """Raise a FlipgateError naming every model of models.yaml that the plan gives no cell to
    (its ``suites:``, ``facets:`` and ``datasets:`` select nothing): its cells would all be
    skipped and the run would pass without checking it. A model that only judges (``audit.judge``,
    the decomposition's judge) is exempt."""
    decomposition = cfg.plans.get("readouts")
    judges = {cfg.judge} | ({decomposition.judge_model} if decomposition is not None else set())
    selected = {c.model for c in cells if c.cell != ODI_CELL}
    unselected = [
        f"field models[{i}] (id {m!r}): suites {cfg.models[m]['suites']}"
        + "".join(
            f", {key} {cfg.models[m][key]}"
            for key in ("facets", "datasets")
            if cfg.models[m].get(key)
        )
        + " select no cell of the audit plan"
        for i, m in enumerate(cfg.models)
        if m not in selected and m not in judges
    ]
    if unselected:
        raise FlipgateError(
            f"{cfg.path}: models that nothing would check (every cell of theirs would be "
            "skipped):\n  " + "\n  ".join(unselected) + "\n  (fix the selection, or remove the "
            "model)"
        )


def matches(t: Threshold, c: PlanCell, order_datasets: set[str]) -> bool:
    """Whether threshold ``t`` gates plan cell ``c``."""
    if t.model not in (None, c.model) or t.vs != c.vs:
        return False
    if t.facet == ODI_CELL:  # ODI narrows by dataset inside the fit (mean |δ| per cell)
        return c.cell == ODI_CELL and (t.dataset is None or t.dataset in order_datasets)
    if t.facet == DECOMPOSITION_CELL and t.metric.partition("@")[2] not in ("", c.axis):
        return False
    return t.applies(c.cell, c.dataset) and (
        t.readout is None or not c.readouts or t.readout in c.readouts
    )


def _cells_text(cells: list[PlanCell]) -> str:
    by_cell = defaultdict(set)
    for c in cells:
        by_cell[c.cell].add(c.dataset)
    return "; ".join(f"{cell} × {', '.join(sorted(ds))}" for cell, ds in sorted(by_cell.items()))


def check_thresholds(directory: Path | str, cfg: AuditConfig, cells: list[PlanCell]) -> list[str]:
    """Raise a FlipgateError naming every threshold that selects nothing, every ``model:`` and
    override file naming no roster model; return notes on thresholds of suites the plan does not
    run."""
    directory = Path(directory)
    roster = sorted(cfg.models)
    order_datasets = {c.dataset for c in cells if c.cell not in suite_cells()}
    suites_run = {_suite(c.cell, c.vs) for c in cells}
    errors, notes = [], []
    files: list[tuple[Path, str | None]] = [(directory / "default.yaml", None)]
    for path in threshold_files(directory):
        if path.stem not in cfg.models:
            errors.append(
                f"{path}: override file for model {path.stem!r}, which is not in {cfg.path} "
                f"(models: {', '.join(roster)}); name it <model id>.yaml"
            )
            continue
        files.append((path, path.stem))
    for path, owner in files:
        thresholds, _ = parse_thresholds(path)
        for i, t in enumerate(thresholds):
            where = f"{path}: field thresholds[{i}] ({t.label})"
            if t.model is not None and t.model not in cfg.models:
                errors.append(
                    f"{where}.model: no model with this id (value: {t.model!r}); "
                    f"models: {', '.join(roster)}"
                )
                continue
            if _suite(t.facet, t.vs) not in suites_run:
                notes.append(
                    f"{where}: not applicable, the plan runs no {_suite(t.facet, t.vs)} suite"
                )
                continue
            mine = [c for c in cells if owner in (None, c.model)]
            if not any(matches(t, c, order_datasets) for c in mine):
                errors.append(
                    f"{where}: selects no cell of this audit (selectors: "
                    f"{', '.join(f'{k}={v!r}' for k, v in t.selectors.items()) or 'none'}); "
                    f"cells: {_cells_text(mine)}"
                )
    if errors:
        raise FlipgateError(
            "thresholds that would gate nothing (a typo must not disable a gate):\n  "
            + "\n  ".join(errors)
        )
    return notes
