"""The envelope suite's Allure report: what one benchmark's envelope test attaches (the
configuration scores, its card section and the score neighbourhood plot)."""

from __future__ import annotations

import pandas as pd

from flipgate.plotting import png, pyplot
from flipgate.report import attach_csv, attach_json, attach_png, dumped, label_test
from flipgate.results import Verdict


def neighbourhood_plot(name: str, analysis: dict) -> bytes:
    """Per model: the score range over the envelope (min–max bar), its mean and the anchor point."""
    plt = pyplot()

    models = analysis["models"]
    fig, ax = plt.subplots(figsize=(6, 0.6 + 0.5 * len(models)), dpi=100)
    for y, (model, m) in enumerate(models.items()):
        ax.plot([m["min"], m["max"]], [y, y], lw=6, alpha=0.4, color="tab:blue")
        ax.plot(m["mean"], y, "|", ms=14, color="tab:blue", label="mean" if y == 0 else None)
        if m["point_score"] is not None:
            ax.plot(
                m["point_score"], y, "o", color="tab:red", label="anchor config" if y == 0 else None
            )
    ax.set_yticks(range(len(models)), list(models))
    ax.set_xlim(0, 1)
    ax.set_xlabel("score over the envelope's configurations")
    ax.set_title(name, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return png(fig)


def report_envelope(
    benchmark: str, analysis: dict, scores: pd.DataFrame, verdicts: list[Verdict]
) -> None:
    """Label and annotate an envelope test (epic "configuration envelope", feature = benchmark)."""
    allure = label_test(
        "configuration envelope",
        benchmark,
        None,
        f"configuration envelope · {benchmark} · {', '.join(analysis['models'])}",
        {
            k: analysis.get(k)
            for k in ("envelope", "envelope_sha256", "tier", "n_configs", "anchor")
        },
    )
    if allure is None:
        return
    allure.dynamic.description(
        "; ".join(f"{v.model}: {v.threshold}: {v.label_text}" for v in verdicts)
    )
    attach_csv(allure, scores, "configuration scores.csv")
    attach_json(
        allure, {"analysis": analysis, "verdicts": dumped(verdicts)}, "envelope card section.json"
    )
    attach_png(
        allure,
        neighbourhood_plot(f"score neighbourhood / {benchmark}", analysis),
        "score neighbourhood.png",
    )
