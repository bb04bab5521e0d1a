"""The judge consensus suite's Allure report: what one (judge model, dataset) cell attaches to its
test (accuracy against the number of orderings k, and the record as JSON)."""

from __future__ import annotations

from flipgate.judges.plots import accuracy_vs_k_plot
from flipgate.judges.record import JudgeRecord
from flipgate.report import attach_png, attach_record, fmt, label_test
from flipgate.results import Verdict


def report_judge(record: JudgeRecord, verdicts: list[Verdict]) -> None:
    """Label and annotate a judge consensus test (epic "judge consensus", feature = dataset,
    story = judge model): accuracy vs k, and the record as JSON."""
    r = record.result
    allure = label_test(
        "judge consensus",
        record.dataset,
        record.model_id,
        f"judge consensus · {record.dataset} · {record.model_id}",
        {"readout": record.readout, "K": r.k, "manifest_sha256": record.manifest_sha256},
    )
    if allure is None:
        return
    allure.dynamic.description(
        f"direct {fmt(r.direct_accuracy.estimate)}, consensus "
        f"{fmt(r.consensus_accuracy.estimate)} (N={r.n_items}); improved "
        f"{r.sign_test.improved} / regressed {r.sign_test.regressed}, sign test p "
        f"{fmt(r.sign_test.p_value)}; judge flip rate {fmt(r.judge_flip_rate.estimate)}; "
        + "; ".join(f"{v.threshold}: {v.label_text}" for v in verdicts)
    )
    attach_png(
        allure, accuracy_vs_k_plot(f"{record.dataset} / {record.model_id}", r), "accuracy vs k.png"
    )
    attach_record(allure, record, verdicts, "judge consensus card section.json")
