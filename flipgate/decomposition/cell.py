"""What one decomposition suite test does: gate the inputs (paraphrase store), measure one
(model, dataset, axis) cell, decompose, record, report and assert (``facet: decomposition``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flipgate.calls import Auditor
from flipgate.decomposition.allure import report_decomposition
from flipgate.decomposition.gate import gate
from flipgate.decomposition.names import DECOMPOSITION_CELL
from flipgate.decomposition.plan import DecompositionPlan
from flipgate.decomposition.record import DecompositionRecord
from flipgate.decomposition.run import DecompositionRunner, axis_cell
from flipgate.judging.choice import judge_gate, load_agreement_set
from flipgate.metrics.decomposition import decompose
from flipgate.paraphrases import ParaphraseStore
from flipgate.results import Verdict
from flipgate.store import TrialStore
from flipgate.suite.api import Gated, Measurement, SuiteCell


@dataclass
class DecompositionCell(SuiteCell):
    auditor: Auditor
    thresholds_dir: str
    plan: DecompositionPlan
    model_id: str
    dataset: str
    axis: str
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def decomposed(self) -> DecompositionRecord:
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
            with self.live_output():
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
        with self.live_output():
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

    def measure(self) -> Measurement:
        """The record, gated by ``facet: decomposition`` thresholds
        (:func:`flipgate.decomposition.gate.gate`); a cell stopped by its paraphrase gate, or
        whose judge failed its gate, fails after it is recorded and reported."""
        record = self.decomposed()

        def report(verdicts: list[Verdict]) -> None:
            measured = [
                r.decomposition
                for r in self.auditor.store.records(DecompositionRecord, self.model_id)
                if r.dataset == self.dataset and r.decomposition is not None
            ]
            report_decomposition(record, verdicts, measured)

        def store_record(store: TrialStore) -> None:
            store.add_record(record)

        if record.decomposition is None:
            return Measurement(
                [],
                record=store_record,
                report=lambda verdicts: report_decomposition(record, []),
                failure=f"{record.stopped} (no numbers recorded for this cell)",
            )
        result = record.decomposition
        judge = record.gates.get("judge")
        return Measurement(
            [
                Gated(
                    self.model_id,
                    self.dataset,
                    f"{DECOMPOSITION_CELL}[{self.axis}]",
                    decide=lambda ts: gate(result, ts, self.dataset),
                )
            ],
            record=store_record,
            report=report,
            failure=(
                f"judge gate: {judge['reason']}; the judge readout was not measured (the other "
                "readouts were recorded)"
                if judge is not None and not judge["passed"]
                else None
            ),
        )
