"""The ODI suite's Allure report: what the ODI test attaches (the posterior table, its card
section and the σ_π / σ_δ / θ panels)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from flipgate.plotting import png, pyplot
from flipgate.report import attach_csv, attach_json, attach_png, dumped, label_test
from flipgate.results import Verdict


def odi_plot(analysis: dict) -> bytes:
    """ODI panels with HDIs: σ_π and σ_δ per facet, mean |δ| per (facet, dataset) cell, θ per
    model."""
    plt = pyplot()

    def panel(
        ax,
        rows: list[tuple[str, dict]],
        key: str,
        title: str,
        color: str,
        shift: float = 0.0,
        label=None,
    ):
        for y, (name, m) in enumerate(rows):
            lo, hi = m["hdi"]
            ax.plot(
                [lo, hi],
                [y + shift] * 2,
                lw=3,
                alpha=0.5,
                color=color,
                label=label if y == 0 else None,
            )
            ax.plot(m[key], y + shift, "o", color=color)
        ax.set_yticks(range(len(rows)), [name for name, _ in rows], fontsize=8)
        ax.set_title(title, fontsize=9)

    facets, cells, models = analysis["facets"], analysis["cells"], analysis["models"]
    height = 1.2 + 0.35 * max(len(facets), len(cells), len(models))
    fig, axes = plt.subplots(1, 3, figsize=(13, height), dpi=100)
    panel(
        axes[0],
        [(f, v["sigma_pi"]) for f, v in facets.items()],
        "median",
        "panel: per-facet σ_π (noise), σ_δ (offsets)",
        "tab:red",
        0.12,
        "σ_π",
    )
    panel(
        axes[0],
        [(f, v["sigma_delta"]) for f, v in facets.items()],
        "median",
        "panel: per-facet σ_π (noise), σ_δ (offsets)",
        "tab:blue",
        -0.12,
        "σ_δ",
    )
    axes[0].legend(fontsize=7)
    panel(
        axes[1],
        [(c, v["mean_abs_delta"]) for c, v in cells.items()],
        "estimate",
        "panel: mean |δ| per cell (bias)",
        "tab:purple",
    )
    panel(
        axes[2],
        [(m, v["theta"]) for m, v in models.items() if v.get("theta")],
        "median",
        "panel: θ (correct outcome, centred)",
        "tab:green",
    )
    for ax in axes:
        ax.set_xlabel(f"posterior median, {analysis['hdi_prob']:.0%} HDI", fontsize=8)
    return png(fig)


def report_odi(analysis: dict, verdicts: list[Verdict], panel: Sequence[Verdict] = ()) -> None:
    """Label and annotate the ODI test (epic "ODI", feature "order facets", story = the roster):
    each model's verdicts (on its own fit) and the ``panel`` checks, which gate no model."""
    roster = ", ".join(analysis["roster"])
    allure = label_test(
        "ODI",
        "order facets",
        roster,
        f"ODI · {len(analysis['facets'])} facets · {roster}",
        {k: analysis.get(k) for k in ("profile", "hdi_prob", "ci_level", "passed")},
    )
    if allure is None:
        return
    allure.dynamic.description(
        "; ".join(f"{v.model}: {v.threshold}: {v.label_text}" for v in verdicts)
        + "; panel checks (gate no model): "
        + ("; ".join(f"{v.threshold}: {v.label_text}" for v in panel) or "none")
    )
    fits = {"panel": analysis} | {
        m: v["own"] for m, v in analysis["models"].items() if "facets" in v.get("own", {})
    }
    rows = [
        {
            "fit": fit,
            "facet": f,
            "quantity": q,
            "median": v[q]["median"],
            "hdi_lo": v[q]["hdi"][0],
            "hdi_hi": v[q]["hdi"][1],
        }
        for fit, summary in fits.items()
        for f, v in summary["facets"].items()
        for q in ("sigma_pi", "sigma_delta")
        if q in v
    ]
    rows += [
        {
            "fit": fit,
            "facet": c,
            "quantity": "mean_abs_delta",
            "median": v["mean_abs_delta"]["estimate"],
            "hdi_lo": v["mean_abs_delta"]["hdi"][0],
            "hdi_hi": v["mean_abs_delta"]["hdi"][1],
        }
        for fit, summary in fits.items()
        for c, v in summary["cells"].items()
    ]
    attach_csv(allure, pd.DataFrame(rows), "ODI posterior.csv")
    attach_json(
        allure,
        {"analysis": analysis, "verdicts": dumped(verdicts), "panel_checks": dumped(list(panel))},
        "ODI card section.json",
    )
    attach_png(allure, odi_plot(analysis), "ODI sigma_pi and delta.png")
