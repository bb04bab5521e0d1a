"""What one envelope suite test does: run every valid configuration for every roster model on one
benchmark, analyse, record, report and gate (thresholds with ``facet: envelope``)."""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any

import pandas as pd

from flipgate import FlipgateError
from flipgate.audit import Auditor
from flipgate.config import ThresholdSet, load_thresholds
from flipgate.envelope.allure import report_envelope
from flipgate.envelope.analysis import NOT_VARIED, analyse, gate_analysis, gate_metrics
from flipgate.envelope.render import TEMPLATE_SHA256
from flipgate.envelope.run import EnvelopeRunner, config_scores
from flipgate.envelope.spec import Envelope
from flipgate.envelope.suite import ENVELOPE_ANALYSES, ENVELOPE_CELL
from flipgate.gate import evaluate
from flipgate.items import DatasetSpec
from flipgate.results import Verdict, estimates
from flipgate.suite import assert_verdicts, fail_input


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
class EnvelopeCell:
    auditor: Auditor
    thresholds_dir: str
    envelope: Envelope
    benchmark: DatasetSpec
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def roster(self) -> list[str]:
        return self.envelope.roster or self.auditor.config.audited("envelope")

    def measure(self, thresholds: dict[str, ThresholdSet]) -> tuple[dict, pd.DataFrame]:
        runner = EnvelopeRunner(self.auditor, self.envelope)
        cm = self.capture_manager
        with cm.global_and_fixture_disabled() if cm is not None else contextlib.nullcontext():
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

    def run(self) -> list[Verdict]:
        try:
            thresholds = {m: load_thresholds(self.thresholds_dir, m) for m in self.roster()}
            analysis, scores = self.measure(thresholds)
        except FlipgateError as exc:
            fail_input(exc)
        store, name, cfg = self.auditor.store, self.benchmark.name, self.auditor.config
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
        store.add_analysis(ENVELOPE_ANALYSES, name, analysis)
        verdicts = []
        for model, ts in thresholds.items():
            mine = []
            for t in ts.for_cell(ENVELOPE_CELL, name):  # each CI at its threshold's level
                block = gate_metrics(analysis if t.level == cfg.level else at_level(t.level), model)
                mine += evaluate(
                    [t],
                    {"envelope": estimates(block)},
                    "envelope",
                    ts.on_inconclusive,
                    facet=ENVELOPE_CELL,
                    model=model,
                )
            store.add_verdicts(model, name, ENVELOPE_CELL, mine)
            verdicts += mine
        report_envelope(name, analysis, scores, verdicts)
        assert_verdicts(verdicts, self.auditor.allow_ungated)
        return verdicts
