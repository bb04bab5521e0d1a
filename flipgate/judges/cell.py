"""What one judge consensus suite test does: run the judge over the K orderings of every
candidate set, compute direct vs consensus (docs/definitions.md §9), record, report and assert
(``facet: judges``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from flipgate.calls import Auditor
from flipgate.judges.allure import report_judge
from flipgate.judges.names import JUDGE_CELL
from flipgate.judges.plan import JudgePlan
from flipgate.judges.record import JudgeRecord
from flipgate.judges.run import JudgeRunner
from flipgate.metrics.judging import judge_consensus, judge_item_values
from flipgate.suite.api import Gated, Measurement, SuiteCell


def gated(record: JudgeRecord) -> Gated:
    """``facet: judges`` thresholds on the record's estimates (a macro-accuracy threshold on a
    dataset with one source is ``missing``). A ``lower``/``upper`` threshold on a per-set mean
    (flip rate, accuracies, consensus gain, parse rate) is decided by the two one-sided tests of
    docs/definitions.md §12.1 at fixed N (the cell judges all its sets at once); the macro
    accuracies keep the bootstrap-CI rule (:func:`~flipgate.metrics.judging.judge_item_values`)."""
    values = judge_item_values(record.result)
    return Gated(
        record.model_id,
        record.dataset,
        JUDGE_CELL,
        {record.readout: record.result.metrics()},
        record.readout,
        sequences={(record.readout, metric): v for metric, v in values.items()},
    )


@dataclass
class JudgeCell(SuiteCell):
    auditor: Auditor
    thresholds_dir: str
    plan: JudgePlan
    model_id: str
    dataset: str
    capture_manager: Any = None  # pytest's CaptureManager (a private type)

    def judge(self) -> JudgeRecord:
        runner = JudgeRunner(self.auditor, self.plan)
        spec = self.plan.dataset(self.dataset)
        with self.live_output():
            judged = runner.judged(self.model_id, spec)
        cfg = self.auditor.config
        settings = self.plan.consensus
        result = judge_consensus(
            judged, settings.weights, settings.tie_tolerance, cfg.bootstrap_n, cfg.level, cfg.seed
        )
        manifest = self.auditor.store.manifests().get((JUDGE_CELL, self.dataset), {})
        failures = Counter(r.failure for j in judged for r in j.runs if r.failure is not None)
        return JudgeRecord(
            model_id=self.model_id,
            dataset=self.dataset,
            readout=self.plan.readout_for(self.auditor.model(self.model_id)),
            manifest_sha256=manifest.get("sha256"),
            result=result,
            parse_failures=dict(failures.most_common()),
        )

    def measure(self) -> Measurement:
        record = self.judge()
        return Measurement(
            [gated(record)],
            record=lambda store: store.add_record(record),
            report=lambda verdicts: report_judge(record, verdicts),
        )
