"""What the ODI suite test does: gather the order suites' trials of every model (through the cache,
like any test), fit ODI on each model's primary readout (each model alone, and the panel
together), record, report, gate each model on its own fit and report the panel checks
(``facet: odi``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from flipgate import FlipgateError
from flipgate.analysis_cache import AnalysisCache, analysis_key, table_sha256
from flipgate.calls import Auditor
from flipgate.odi.allure import report_odi
from flipgate.odi.fit import odi
from flipgate.odi.gate import diagnostic_bounds, gate, gate_levels, panel_checks
from flipgate.odi.names import ODI_FITS, ORDER_PANEL
from flipgate.order.measure import order_cells
from flipgate.report import dumped
from flipgate.suite.api import Gated, Measurement, SuiteCell
from flipgate.suite.cell_loop import skip_not_applicable

#: the readout name of the panel table: each (model, facet)'s own primary readout
PRIMARY = "primary"


def primary_view(trials: pd.DataFrame, readout: str) -> pd.DataFrame:
    """``trials`` with ``mapped`` / ``correct`` narrowed to ``readout``, renamed :data:`PRIMARY`."""
    return trials[["model_id", "facet", "dataset", "item_id", "condition"]].assign(
        mapped=[{PRIMARY: m.get(readout)} for m in trials["mapped"]],
        correct=[{PRIMARY: c.get(readout)} for c in trials["correct"]],
    )


@dataclass
class ODICell(SuiteCell):
    auditor: Auditor
    thresholds_dir: str
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def roster(self) -> list[str]:
        return self.auditor.config.audited("order")

    def panel(self) -> tuple[pd.DataFrame, dict, list[str]]:
        """Every order-facet trial of every roster model (primary readouts), the readout used per
        model and facet, and the cells a model could not take (with the reason)."""
        frames: list[pd.DataFrame] = []
        used: dict[str, dict[str, str]] = {m: {} for m in self.roster()}
        unmeasured: list[str] = []
        cells = order_cells(self.auditor)
        with self.live_output():
            for facet, specs in self.auditor.config.facets.items():
                for spec in specs:
                    for model_id in self.roster():
                        if (facet, spec.name) not in self.auditor.config.cells(model_id):
                            continue  # the model's facets: / datasets: leave this cell out
                        why = cells.unmeasurable(model_id, spec.name, facet)
                        if why:
                            unmeasured.append(why)
                            continue
                        used[model_id][facet] = self.auditor.readouts(model_id, facet)[1]
                        trials = cells.measured_trials(model_id, spec.name, facet)
                        frames.append(primary_view(trials, used[model_id][facet]))
        if not frames:
            raise FlipgateError(
                "ODI: no order-facet cell could be measured for any model: " + "; ".join(unmeasured)
            )
        return pd.concat(frames, ignore_index=True), used, unmeasured

    def fitted(self, bounds: dict, level: float, levels=()) -> dict:
        settings = dict(self.auditor.config.plans.get("odi") or {})
        profile, seed = settings.pop("profile", "fast"), settings.pop("seed", 0)
        trials, used, unmeasured = self.panel()
        roster, models = self.roster(), self.auditor.config.models
        versions = [
            (m, models[m]["baseline"]) for m in roster if models[m].get("baseline") in roster
        ]
        fit_args = dict(
            profile=profile,
            seed=seed,
            thresholds=bounds,
            ci_level=level,
            gate_levels=list(levels),
            versions=versions,
            **settings,
        )
        paths = self.auditor.paths
        cache = AnalysisCache(None if paths.cache is None else paths.cache.parent / "analyses")
        key = analysis_key(
            "odi",
            {"trials": table_sha256(trials), **fit_args},
            Path(__file__).parent,
            ["numpyro", "jax", "jaxlib", "arviz", "numpy", "pandas"],
        )
        analysis = cache.get(key)
        if analysis is None:  # the same panel, settings and code replay the stored fits
            analysis = odi(trials, PRIMARY, **fit_args)
            cache.put(key, analysis)
        analysis.update(roster=self.roster(), unmeasured=unmeasured, ci_level=level, readouts=used)
        return analysis

    def measure(self) -> Measurement:
        """The panel's fits; each roster model gated on its own fit only (its ``facet: odi``
        thresholds), the panel checks reported with the analysis (they gate no model)."""
        roster = self.roster()
        if len(roster) < 2:
            skip_not_applicable(
                f"ODI centres θ across a panel: it needs ≥ 2 models in the order suites, "
                f"{self.auditor.config.path} lists {roster}"
            )
        thresholds = {m: self.thresholds(m) for m in roster}
        level = max(ts.level for ts in thresholds.values())
        analysis = self.fitted(
            diagnostic_bounds(thresholds.values()), level, gate_levels(thresholds.values())
        )
        panel = panel_checks(analysis, thresholds.values())  # gate no model: reported only
        analysis["panel_checks"] = dumped(panel)
        return Measurement(
            [
                Gated(
                    model_id,
                    "odi",
                    "odi",
                    decide=functools.partial(gate, analysis, model_id=model_id),
                )
                for model_id in thresholds
            ],
            record=lambda store: store.add_analysis(ODI_FITS, ORDER_PANEL, analysis),
            report=lambda verdicts: report_odi(analysis, verdicts, panel),
        )
