"""What one envelope suite test does: run every valid configuration for every roster model on one
benchmark, analyse, record, report and gate (thresholds with ``facet: envelope``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import pandas as pd

from flipgate.calls import Auditor
from flipgate.config import ThresholdSet
from flipgate.envelope.allure import report_envelope
from flipgate.envelope.analysis import NOT_VARIED, analyse, gate_analysis, gate_metrics
from flipgate.envelope.names import ENVELOPE_ANALYSES, ENVELOPE_CELL
from flipgate.envelope.render import TEMPLATE_SHA256
from flipgate.envelope.run import EnvelopeRunner, config_scores
from flipgate.envelope.spec import Envelope
from flipgate.gate.rules import evaluate
from flipgate.items import DatasetSpec
from flipgate.results import Verdict, estimates
from flipgate.suite.api import Gated, Measurement, SuiteCell


def thetas_for(threshold_sets) -> list[float]:
    """CFR verdict thresholds θ named by ``cfr@θ`` thresholds, plus 0.5 (SafetyRepro's headline)."""
    named = {
        float(t.metric.split("@")[1])
        for ts in threshold_sets
        for t in ts.thresholds
        if t.metric.startswith("cfr@")
    }
    return sorted(named | {0.5})


@dataclass
class EnvelopeCell(SuiteCell):
    auditor: Auditor
    thresholds_dir: str
    envelope: Envelope
    benchmark: DatasetSpec
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def roster(self) -> list[str]:
        return self.envelope.roster or self.auditor.config.audited("envelope")

    def analysed(self, thresholds: dict[str, ThresholdSet]) -> tuple[dict, pd.DataFrame]:
        runner = EnvelopeRunner(self.auditor, self.envelope)
        with self.live_output():
            per_seed = pd.concat(
                [runner.scores(m, self.benchmark) for m in self.roster()], ignore_index=True
            )
        scores = config_scores(per_seed)
        cfg = self.auditor.config
        anchor = self.envelope.anchor(self.benchmark.name)
        roster = self.roster()
        pairs = [
            (m, cfg.models[m]["baseline"])
            for m in roster
            if cfg.models[m].get("baseline") in roster
        ]
        analysis = analyse(
            scores,
            anchor.id,
            thetas_for(thresholds.values()),
            cfg.bootstrap_n,
            cfg.seed,
            cfg.level,
            pairs=pairs,
        )
        _, exemplars = runner.split(self.benchmark)
        analysis.update(
            {
                "envelope": self.envelope.name,
                "envelope_sha256": self.envelope.sha256,
                "tier": self.envelope.run_tier,
                "n_configs": int(scores["config"].nunique()),
                "anchor": anchor.as_dict(),
                "axes": self.envelope.axes,
                "stress_values": self.envelope.stress,
                "seeds": self.envelope.seeds,
                "n_items": int(per_seed["n"].iloc[0]),
                "exemplar_ids": [e.item_id for e in exemplars],
                "template_sha256": TEMPLATE_SHA256,
                "scope_not_varied": NOT_VARIED
                + [f"{a} beyond {v}" for a, v in self.envelope.axes.items()],
                "configs": scores.to_dict("records"),
            }
        )
        return analysis, scores

    def measure(self) -> Measurement:
        """Every roster model's configurations on the benchmark, analysed; each model gated by
        its ``facet: envelope`` thresholds, each threshold on CIs at its own level."""
        thresholds = {m: self.thresholds(m) for m in self.roster()}
        analysis, scores = self.analysed(thresholds)
        name, cfg = self.benchmark.name, self.auditor.config
        at_level = functools.cache(
            lambda level: gate_analysis(
                scores,
                self.envelope.anchor(name).id,
                thetas_for(thresholds.values()),
                cfg.bootstrap_n,
                cfg.seed,
                level,
            )
        )

        def decide(model: str, ts: ThresholdSet) -> list[Verdict]:
            verdicts = []
            for t in ts.for_cell(ENVELOPE_CELL, name):  # each CI at its threshold's level
                block = gate_metrics(analysis if t.level == cfg.level else at_level(t.level), model)
                verdicts += evaluate(
                    [t],
                    {"envelope": estimates(block)},
                    "envelope",
                    ts.on_inconclusive,
                    n_items=analysis["models"][model]["n_configs"],  # resampled: configurations
                    facet=ENVELOPE_CELL,
                    model=model,
                )
            return verdicts

        return Measurement(
            [
                Gated(model, name, ENVELOPE_CELL, decide=functools.partial(decide, model))
                for model in thresholds
            ],
            record=lambda store: store.add_analysis(ENVELOPE_ANALYSES, name, analysis),
            report=lambda verdicts: report_envelope(name, analysis, scores, verdicts),
        )
