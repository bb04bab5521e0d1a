"""The continuity suite's Allure report: what one (sweep, estimator, model) cell attaches to its
test (the uncertainty trajectory with its transition point, and the record as JSON)."""

from __future__ import annotations

from flipgate.continuity.plots import trajectory_plot
from flipgate.continuity.record import ContinuityRecord
from flipgate.report import attach_png, attach_record, fmt, label_test
from flipgate.results import Verdict


def report_continuity(record: ContinuityRecord, verdicts: list[Verdict]) -> None:
    """Label and annotate a continuity test (epic "continuity", feature = sweep, story = model):
    the uncertainty trajectory with the transition point, and the record as JSON."""
    allure = label_test(
        "continuity",
        record.sweep,
        record.model_id,
        f"continuity · {record.sweep} · {record.estimator} · {record.model_id}",
        {
            "estimator": record.estimator,
            "samples": record.samples,
            "manifest_sha256": record.manifest_sha256,
        },
    )
    if allure is None:
        return
    r = record.result
    auc = r.auc_undefined or fmt(r.abstention_auc.estimate)
    allure.dynamic.description(
        f"L_local {fmt(r.l_local.estimate)}, L_global {fmt(r.l_global.estimate)}, "
        f"abstention AUC {auc}, accuracy {fmt(r.accuracy.estimate)} "
        f"(N={r.n_sources} sweeps, {r.n_inputs} inputs); "
        + "; ".join(f"{v.threshold}: {v.label_text}" for v in verdicts)
    )
    attach_png(
        allure,
        trajectory_plot(f"{record.sweep} / {record.model_id}", {record.estimator: r}),
        "uncertainty trajectory.png",
    )
    attach_record(allure, record, verdicts, "continuity card section.json")
