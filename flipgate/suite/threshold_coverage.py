"""Collection-time checks of the thresholds files against the audited plan (docs/thresholds.md).

A threshold whose selectors (``facet``, ``dataset``, ``readout``, ``model``) match no cell of the
plan would gate nothing, so the run would pass however bad the model: a typo must never silently
disable a gate. The plan is models.yaml's (not the ``-k`` selection): every registered suite's
gated cells (flipgate.suite.api.Suite.gated). Thresholds of a whole suite the plan does not run
(e.g. ``facet: envelope`` when no model is in the envelope roster) are not errors: nothing runs
that they could gate. Override files must be named after a model of the roster.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from flipgate import FlipgateError
from flipgate.config import AuditConfig, Threshold, ThresholdSet, parse_thresholds, threshold_files
from flipgate.suite.api import GatedCell, Suite


def suite_of(t: Threshold, suites: Sequence[Suite]) -> str:
    """The suite whose cells ``t`` names: the one with its ``vs:`` metric, else the one whose
    ``facet:`` it is, else the one that owns its metric (the facets' metrics: the order suite)."""
    base = t.metric.partition("@")[0]
    for suite in suites:
        if t.vs is not None and any(m.name == base and m.vs == t.vs for m in suite.metrics):
            return suite.name
    for suite in suites:
        if t.vs is None and suite.facet is not None and suite.facet == t.facet:
            return suite.name
    for suite in suites:
        if any(m.name == base and not m.shared and m.vs == t.vs for m in suite.metrics):
            return suite.name
    return "?"


def gated_cells(suites: Sequence[Suite], ctx) -> list[tuple[str, GatedCell]]:
    """Every cell the plan gates, with the suite it belongs to."""
    return [(s.name, c) for s in suites for c in s.gated(ctx)]


def check_selection(cfg: AuditConfig, cells: list[tuple[str, GatedCell]]) -> None:
    """Raise a FlipgateError naming every model of models.yaml that the plan gives no cell to
    (its ``suites:``, ``facets:`` and ``datasets:`` select nothing): its cells would all be
    skipped and the run would pass without checking it. A model that only judges (``audit.judge``,
    the decomposition's judge) is exempt."""
    judges = cfg.judge_models()
    selected = {c.model for _, c in cells if not c.panel}
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


def matches(t: Threshold, c: GatedCell) -> bool:
    """Whether threshold ``t`` gates plan cell ``c``."""
    if t.model not in (None, c.model) or t.vs != c.vs:
        return False
    at = t.metric.partition("@")[2]
    if at and c.part is not None and at != c.part:  # e.g. genuine_flip_rate@paraphrase: one axis
        return False
    return t.applies(c.cell, c.dataset) and (
        t.readout is None or not c.readouts or t.readout in c.readouts
    )


def _cells_text(cells: list[GatedCell]) -> str:
    by_cell = defaultdict(set)
    for c in cells:
        by_cell[c.cell].add(c.dataset)
    return "; ".join(f"{cell} × {', '.join(sorted(ds))}" for cell, ds in sorted(by_cell.items()))


def check_thresholds(
    directory: Path | str,
    cfg: AuditConfig,
    cells: list[tuple[str, GatedCell]],
    suites: Sequence[Suite],
) -> list[str]:
    """Raise a FlipgateError naming every threshold that selects nothing, every ``model:`` and
    override file naming no roster model; return notes on thresholds of suites the plan does not
    run."""
    directory = Path(directory)
    roster = sorted(cfg.models)
    suites_run = {name for name, _ in cells}
    errors, notes = [], []
    idle: dict[tuple[Path, str], list[tuple[int, str]]] = defaultdict(list)
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
            suite = suite_of(t, suites)
            if suite not in suites_run:
                idle[(path, suite)].append((i, t.metric))
                continue
            mine = [c for _, c in cells if owner in (None, c.model)]
            if not any(matches(t, c) for c in mine):
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
    for (path, suite), found in idle.items():  # one line per file and suite not run
        which = ", ".join(f"thresholds[{i}] {metric}" for i, metric in found)
        notes.append(f"{path}: not applicable, the plan runs no {suite} suite: {which}")
    return notes


def undecidable_thresholds(
    directory: Path | str,
    cfg: AuditConfig,
    cells: list[tuple[str, GatedCell]],
    items_override: int | None,
    fixed_n: bool,
) -> list[str]:
    """One line per threshold whose deciding test cannot reject within its cell's cap even if
    every item went its way (docs/definitions.md §12.3), for the run to print before any model
    call (flipgate.metrics.decidability). It covers the order suite's facet and control cells
    and the regression cases (``vs: baseline``, fixed N on the compared items); the cap is the
    dataset's N for the model (:meth:`AuditConfig.n_items`), a control's its facet's. Cells that
    differ only in model or dataset share a line."""
    from flipgate.config import load_thresholds
    from flipgate.gate.rules import outcome
    from flipgate.gate.sequential import draws_sequentially
    from flipgate.metrics.decidability import ITEM_MEAN_METRICS, items_needed, undecidable_line

    directory = Path(directory)
    settings = None if fixed_n else cfg.sequential
    looks: tuple[int, ...] = (settings.batch_items, settings.min_items) if settings else ()
    groups: dict[tuple[str, str, str], list[GatedCell]] = defaultdict(list)
    per_model: dict[str, ThresholdSet] = {}
    for suite, c in cells:
        if (suite, c.vs) not in (("order", None), ("regression", "baseline")):
            continue
        if c.model not in per_model:
            per_model[c.model] = load_thresholds(directory, c.model)
        thresholds = per_model[c.model]
        cap = cfg.n_items(c.dataset, items_override, c.model)
        sequential = c.vs is None and draws_sequentially(settings, c.cell)
        for t in thresholds.for_cell(c.cell, c.dataset, c.vs):
            if t.rule not in ("lower", "upper") or t.metric not in ITEM_MEAN_METRICS:
                continue
            if t.readout is not None and c.readouts and t.readout not in c.readouts:
                continue
            kind, low, high = ITEM_MEAN_METRICS[t.metric]
            tests = items_needed(
                kind, low, high, t.bound, t.direction, 1 - t.level, sequential, cap, *looks
            )
            needed = tests[0] if t.rule == "lower" else tests[1]
            if needed is None or needed > cap:
                undecided = outcome("inconclusive", t.rule, thresholds.on_inconclusive)
                why = undecidable_line(t.metric, t.direction, t.rule, cap, needed, undecided)
                file = str(directory / t.source.partition("#")[0])
                groups[file, t.label, why].append(c)
    lines = []
    for (file, label, why), where in groups.items():
        models = sorted({c.model for c in where})
        whose = f"model{'s' if len(models) > 1 else ''} {', '.join(models)}"
        lines.append(f"{file}: {label} on {_cells_text(where)} ({whose}) {why}")
    return lines
