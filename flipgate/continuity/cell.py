"""What one continuity suite test does: run the sweep, compute the estimator's uncertainty on
every input and docs/definitions.md §10 over the sources, record, report and assert
(``facet: continuity``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flipgate.calls import Auditor
from flipgate.continuity.allure import report_continuity
from flipgate.continuity.names import CONTINUITY_CELL
from flipgate.continuity.plan import ContinuityPlan
from flipgate.continuity.record import ContinuityRecord
from flipgate.continuity.run import EstimatorUnavailable, SweepRunner
from flipgate.continuity.sweeps import SWEEPS
from flipgate.metrics.continuity import continuity
from flipgate.suite.api import Gated, Measurement, SuiteCell
from flipgate.suite.cell_loop import skip_not_applicable


@dataclass
class ContinuityCell(SuiteCell):
    auditor: Auditor
    thresholds_dir: str
    plan: ContinuityPlan
    model_id: str
    sweep: str
    estimator: str
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def unmeasurable(self) -> str | None:
        """Why the model cannot take this sweep (an image sweep for a model that takes no
        images, an audio sweep for one that takes no audio)."""
        modality = SWEEPS[self.sweep].modality
        backend = self.auditor.backend(self.model_id)
        if modality == "image" and not backend.supports_images:
            return f"{self.model_id} takes no images; {self.sweep} is an image sweep"
        if modality == "audio" and not getattr(backend, "supports_audio", False):
            return f"{self.model_id} takes no audio; {self.sweep} is an audio sweep"
        return None

    def sweep_record(self) -> ContinuityRecord:
        runner = SweepRunner(self.auditor, self.plan)
        with self.live_output():
            points = runner.points(self.model_id, self.sweep, self.estimator)
        cfg = self.auditor.config
        manifest = self.auditor.store.manifests().get((CONTINUITY_CELL, self.sweep), {})
        sampled = self.estimator != "logprob"
        return ContinuityRecord(
            model_id=self.model_id,
            sweep=self.sweep,
            estimator=self.estimator,
            samples=self.plan.samples if sampled else None,
            temperature=self.plan.temperature if sampled else None,
            top_p=self.plan.top_p if sampled else None,
            manifest_sha256=manifest.get("sha256"),
            result=continuity(points, cfg.bootstrap_n, cfg.level, cfg.seed),
        )

    def measurable(self) -> ContinuityRecord:
        """:meth:`sweep_record`, or a skip (not applicable) where the model cannot take the sweep or
        the estimator is unavailable to it."""
        why = self.unmeasurable()
        if why is not None:
            for part in ("greedy", self.estimator):
                cell = f"{CONTINUITY_CELL}[{part}]"
                self.auditor.store.set_planned(self.model_id, self.sweep, cell, 0)
            skip_not_applicable(why)
        try:
            return self.sweep_record()
        except EstimatorUnavailable as exc:
            skip_not_applicable(str(exc))

    def measure(self) -> Measurement:
        """``facet: continuity`` thresholds on the record's estimates: those of its estimator
        (``readout:``, or none named). A threshold on the abstention AUC is not applied where the
        AUC is undefined (accuracy saturated: a model right on every input cannot rank its
        errors); the card and Allure give the reason."""
        record = self.measurable()
        undefined = record.result.auc_undefined is not None
        return Measurement(
            [
                Gated(
                    self.model_id,
                    self.sweep,
                    f"{CONTINUITY_CELL}[{self.estimator}]",
                    {record.estimator: record.result.metrics()},
                    record.estimator,
                    select=CONTINUITY_CELL,
                    applies=lambda t: (
                        t.readout in (None, record.estimator)
                        and not (undefined and t.metric == "abstention_auc")
                    ),
                )
            ],
            record=lambda store: store.add_record(record),
            report=lambda verdicts: report_continuity(record, verdicts),
        )
