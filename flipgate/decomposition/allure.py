"""The decomposition suite's Allure report: what one (axis, model, dataset) cell attaches to its
test (the genuine/artifact split per readout, the flip surface and the record as JSON)."""

from __future__ import annotations

from flipgate.decomposition.plots import split_plot, surface_plot
from flipgate.decomposition.record import DecompositionRecord
from flipgate.metrics.decomposition import AxisDecomposition
from flipgate.report import attach_png, attach_record, fmt, label_test
from flipgate.results import Verdict


def report_decomposition(
    record: DecompositionRecord,
    verdicts: list[Verdict],
    measured: list[AxisDecomposition] | None = None,
) -> None:
    """Label and annotate a decomposition test (epic "readout decomposition", feature = dataset,
    story = model): the split per readout, the flip surface (items × the axes of ``measured``:
    this run's axes of the model and dataset so far, so the group's last cell shows them all)
    and the record as JSON."""
    allure = label_test(
        "readout decomposition",
        record.dataset,
        record.model_id,
        f"readout decomposition · {record.axis} · {record.dataset} · {record.model_id}",
        {"axis": record.axis, "manifest_sha256": record.manifest_sha256},
    )
    if allure is None:
        return
    result = record.decomposition
    if result is None:
        allure.dynamic.description(f"stopped: {record.stopped}")
    else:
        parts = [
            f"{r}: total {fmt(s.flip_rate.estimate)}"
            + (f", artifact {fmt(s.artifact.estimate)}" if s.artifact is not None else "")
            for r, s in result.readouts.items()
        ]
        allure.dynamic.description(
            f"genuine {fmt(result.genuine.estimate)} (N={result.genuine.n_items}); "
            + "; ".join(parts)
            + "; "
            + "; ".join(f"{v.threshold}: {v.label_text}" for v in verdicts)
        )
        name = f"{record.axis} / {record.dataset} / {record.model_id}"
        attach_png(allure, split_plot(name, result), "genuine and artifact.png")
        axes = measured or [result]
        attach_png(
            allure,
            surface_plot(f"{record.dataset} / {record.model_id}", axes),
            f"flip surface ({len(axes)} axes).png",
        )
    attach_record(allure, record, verdicts, "decomposition card section.json")
