"""The order suite's Allure report: what one (facet or control, model, dataset) cell attaches to
its test (the per-item results, its card section, the flip-rate and K-ablation plots, the
flip-rate trend over runs and, for a sequential cell, where it stopped)."""

from __future__ import annotations

import pandas as pd

from flipgate.cards.disclosure import card_section, labelled_intervals, stop_line
from flipgate.gate.rules import SEQUENCE
from flipgate.gate.sequential import SequentialStop
from flipgate.plotting import png, pyplot
from flipgate.report import attach_csv, attach_json, attach_png, dumped, fmt, label_test
from flipgate.results import CellSummary, Verdict


def flip_rate_plot(name: str, by_readout: dict[str, CellSummary]) -> bytes:
    """Bar chart of flip rate, pairwise disagreement and parse rate per readout, with CIs."""
    plt = pyplot()

    metrics = ["flip_rate", "pairwise_disagreement", "parse_rate", "accuracy"]
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    width = 0.8 / max(1, len(by_readout))
    for j, (readout, summary) in enumerate(by_readout.items()):
        est, err_lo, err_hi = [], [], []
        for m in metrics:
            e = summary.metrics[m].estimate
            ci = summary.metrics[m].ci or (e, e)
            e = 0.0 if e is None else e
            est.append(e)
            err_lo.append(max(0.0, e - (ci[0] if ci[0] is not None else e)))
            err_hi.append(max(0.0, (ci[1] if ci[1] is not None else e) - e))
        xs = [i + j * width for i in range(len(metrics))]
        ax.bar(xs, est, width, yerr=[err_lo, err_hi], capsize=3, label=readout)
    ax.set_xticks([i + width * (len(by_readout) - 1) / 2 for i in range(len(metrics))], metrics)
    ax.set_ylim(0, 1.05)
    ax.set_title(name)
    ax.legend(fontsize=8)
    return png(fig)


def k_ablation_plot(name: str, by_readout: dict[str, CellSummary]) -> bytes:
    """Flip rate against the number of orderings K (Facet-Probe K-ablation), one line per
    readout."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
    for readout, summary in by_readout.items():
        curve = summary.k_ablation or {}
        ax.plot(
            [int(k) for k in curve],
            [v if v is not None else float("nan") for v in curve.values()],
            marker="o",
            label=readout,
        )
    ax.set_xlabel("K (orderings)")
    ax.set_ylabel("flip rate")
    ax.set_ylim(0, 1.05)
    ax.set_title(name, fontsize=9)
    ax.legend(fontsize=8)
    return png(fig)


def verdict_line(verdict: Verdict, summaries: dict[str, CellSummary]) -> str:
    """``threshold: verdict by <the deciding test>``; for a sequential cell, with its confidence
    sequence and, labelled apart, the fixed-N bootstrap CI of its metric on the same items (both
    shown, as the card shows them, flipgate.cards.disclosure)."""
    line = f"{verdict.threshold}: {verdict.label_text}" + (
        f" by {verdict.test}" if verdict.test and verdict.verdict in ("pass", "fail") else ""
    )
    if verdict.interval != SEQUENCE:
        return line
    summary = summaries.get(verdict.readout or "")
    m = summary.metrics.get(verdict.metric) if summary else None
    ci, level = (m.ci, m.level) if m else (None, None)
    return f"{line} ({labelled_intervals(verdict.ci, verdict.level, ci, level)})"


def report_cell(
    facet: str,
    dataset: str,
    model_id: str,
    summaries: dict[str, CellSummary],
    items: pd.DataFrame,
    verdicts: list[Verdict],
    params: dict,
    trend: list | None = None,
    stop: SequentialStop | None = None,
) -> None:
    """Label and annotate the running test (epic = facet, feature = dataset, story = model).
    ``trend``: the primary readout's flip rate per run (:func:`flipgate.trend.metric_trend`, this
    run last), plotted and attached from two runs on. ``stop``: where a sequential cell stopped
    (docs/definitions.md §12), in the description and attached."""
    allure = label_test(facet, dataset, model_id, f"{facet} · {dataset} · {model_id}", params)
    if allure is None:
        return
    primary = str(params.get("primary_readout"))
    m = summaries.get(primary) or next(iter(summaries.values()))
    flip = m.metrics["flip_rate"]
    allure.dynamic.description(
        f"flip rate {fmt(flip.estimate)} CI {list(flip.ci) if flip.ci else None}, N={m.n_items}, "
        f"K={m.k}; "
        + "; ".join(verdict_line(v, summaries) for v in verdicts)
        + (f"\n\nsequential: {stop_line(facet, card_section(stop, flip.level))}" if stop else "")
    )
    attach_csv(allure, items, "per-item results.csv")
    attach_json(
        allure,
        # the summaries as the run store keeps them and the GRID card shows them
        {
            "summaries": {r: s.model_dump(mode="json") for r, s in summaries.items()},
            "verdicts": dumped(verdicts),
        },
        "cell card section.json",
    )
    if stop is not None:
        calls = {"calls_used": stop.calls_used, "calls_saved": stop.calls_saved}
        attach_json(allure, stop.model_dump(mode="json") | calls, "sequential stop.json")
    attach_png(
        allure, flip_rate_plot(f"{facet} / {dataset} / {model_id}", summaries), "flip rate.png"
    )
    if m.k_policies:
        table = pd.DataFrame(
            [{"readout": r, **row} for r, s in summaries.items() for row in s.k_policies or []]
        )
        attach_csv(allure, table, "K-policies.csv")
        attach_png(
            allure,
            k_ablation_plot(f"K-ablation: {facet} / {dataset} / {model_id}", summaries),
            "K-ablation.png",
        )
    if trend and len(trend) >= 2:
        from flipgate.trend import trend_plot

        attach_png(
            allure,
            trend_plot(trend, f"flip rate over runs: {facet} / {dataset} / {model_id} ({primary})"),
            "flip rate trend.png",
        )
        attach_csv(allure, pd.DataFrame([p.to_dict() for p in trend]), "flip rate trend.csv")
