"""What one decomposition suite test does: gate the inputs (paraphrase store), measure one
(model, dataset, axis) cell, decompose, record, report and assert (``facet: decomposition``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from flipgate.audit import Auditor
from flipgate.decomposition.allure import report_decomposition
from flipgate.decomposition.gate import gate
from flipgate.decomposition.plan import DecompositionPlan
from flipgate.decomposition.record import DecompositionRecord
from flipgate.decomposition.run import DecompositionRunner, axis_cell
from flipgate.decomposition.suite import DECOMPOSITION_CELL
from flipgate.judge.choice import judge_gate, load_agreement_set
from flipgate.metrics.decomposition import decompose
from flipgate.paraphrases import ParaphraseStore
from flipgate.results import Verdict
from flipgate.suite import assert_verdicts, live_output, measure_cell


@dataclass
class DecompositionCell:
    auditor: Auditor
    thresholds_dir: str
    plan: DecompositionPlan
    model_id: str
    dataset: str
    axis: str
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def measure(self) -> DecompositionRecord:
        """The cell's record; a failed gate gives a record with ``stopped`` set and no numbers."""
        store = ParaphraseStore.load(self.plan.paraphrases)
        runner = DecompositionRunner(self.auditor, self.plan, store)
        spec = self.plan.dataset(self.dataset)
        readouts, missing = runner.readouts(self.model_id)
        gates = {}
        if self.axis == "paraphrase":  # first: it needs no model call
            paraphrased = store.gate([it.item_id for it in runner.items(spec)])
            gates["paraphrase"] = paraphrased.to_dict()
            if not paraphrased.passed:
                return DecompositionRecord(
                    model_id=self.model_id,
                    dataset=self.dataset,
                    axis=self.axis,
                    not_measured=missing,
                    gates=gates,
                    stopped=f"paraphrase gate: {paraphrased.reason}",
                )
        if "judge" in readouts:
            with live_output(self.capture_manager):
                judged = judge_gate(
                    self.auditor,
                    runner.judge_id(self.model_id),
                    load_agreement_set(self.plan.agreement_set),
                    self.plan.min_agreement,
                    self.plan.min_swap_consistency,
                    self.auditor.config.judge_consensus,
                )
            gates["judge"] = judged.to_dict()
            if not judged.passed:  # the judge's numbers never reach the record
                readouts.remove("judge")
                missing["judge"] = f"judge gate: {judged.reason}"
        with live_output(self.capture_manager):
            trials = runner.trials(self.model_id, spec, self.axis, readouts)
        cfg = self.auditor.config
        result = decompose(
            trials, self.axis, readouts, "regex", cfg.bootstrap_n, cfg.level, cfg.seed
        )
        manifest = self.auditor.store.manifests().get((axis_cell(self.axis), self.dataset), {})
        return DecompositionRecord(
            model_id=self.model_id,
            dataset=self.dataset,
            axis=self.axis,
            manifest_sha256=manifest.get("sha256"),
            decomposition=result,
            not_measured=missing,
            gates=gates,
        )

    def run(self) -> list[Verdict]:
        thresholds, record = measure_cell(self.thresholds_dir, self.model_id, self.measure)
        store = self.auditor.store
        store.add_record(record)
        if record.decomposition is None:
            report_decomposition(record, [])
            pytest.fail(f"{record.stopped} (no numbers recorded for this cell)", pytrace=False)
        verdicts = gate(record.decomposition, thresholds, self.dataset)
        store.add_verdicts(
            self.model_id, self.dataset, f"{DECOMPOSITION_CELL}[{self.axis}]", verdicts
        )
        measured = [
            r.decomposition
            for r in store.records(DecompositionRecord, self.model_id)
            if r.dataset == self.dataset and r.decomposition is not None
        ]
        report_decomposition(record, verdicts, measured)
        judge = record.gates.get("judge")
        if judge is not None and not judge["passed"]:
            violated = [v.describe() for v in verdicts if v.outcome == "fail"]
            pytest.fail(
                f"judge gate: {judge['reason']}; the judge readout was not measured (the other "
                "readouts were recorded)" + "".join(f"\n  {line}" for line in violated),
                pytrace=False,
            )
        assert_verdicts(verdicts, self.auditor.allow_ungated)
        return verdicts
