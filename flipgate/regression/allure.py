"""The regression suite's Allure report: what one candidate-vs-baseline cell attaches to its test
(the comparison table in Markdown, the comparison JSON and its plot)."""

from __future__ import annotations

import math

from flipgate.plotting import png, pyplot
from flipgate.regression.table import _num, arrow, markdown, rows
from flipgate.report import attach_json, attach_png, label_test

#: per-item states of the binary deltas, for the paired 2x2 panels of :func:`regression_plot`
_PAIRED_STATES = {"delta_flip_rate": ("stable", "flips"), "delta_accuracy": ("wrong", "right")}


def regression_plot(comparison: dict) -> bytes:
    """One cell's candidate-vs-baseline comparison (a :meth:`CellComparison.to_dict` record),
    primary readout: each metric's baseline and candidate value, each delta with its CI, and, where
    the record
    has per-item values, the 2x2 counts of items by (baseline state, candidate state) of the binary
    deltas (the off-diagonal cells are McNemar's discordant items)."""
    plt = pyplot()

    block = comparison["readouts"][comparison["primary_readout"]]
    metrics = list(block["deltas"])
    per_item = {
        m: v for m, v in (block.get("per_item") or {}).items() if m in _PAIRED_STATES and v["items"]
    }
    val = lambda x: float("nan") if x is None else x  # noqa: E731
    fig, axes = plt.subplots(
        1,
        2 + len(per_item),
        figsize=(9 + 2.6 * len(per_item), 3.6),
        dpi=100,
        gridspec_kw={"width_ratios": [3, 3] + [2] * len(per_item)},
    )
    ax = axes[0]
    xs = range(len(metrics))
    for shift, arm, color in ((-0.2, "baseline", "tab:gray"), (0.2, "candidate", "tab:blue")):
        ax.bar(
            [x + shift for x in xs],
            [val(block["arms"][m][arm]) for m in metrics],
            0.4,
            color=color,
            label=f"{arm}: {comparison[arm]}",
        )
    ax.axhline(0, color="black", lw=0.5)
    ax.set_xticks(list(xs), [m.removeprefix("delta_") for m in metrics], fontsize=8)
    ax.set_title("value per version", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    ax = axes[1]
    colors = {"▲ worse": "tab:red", "▼ better": "tab:green"}
    for y, m in enumerate(metrics):
        d = block["deltas"][m]
        est, ci = val(d["estimate"]), d.get("ci") or [None, None]
        lo, hi = val(ci[0]), val(ci[1])
        if not math.isnan(lo) and not math.isnan(est):
            ax.plot([lo, hi], [y, y], lw=3, alpha=0.5, color=colors.get(arrow(m, ci), "tab:gray"))
        ax.plot(est, y, "o", color=colors.get(arrow(m, ci), "tab:gray"))
    ax.axvline(0, color="black", lw=0.8, ls="--")
    ax.set_yticks(range(len(metrics)), metrics, fontsize=8)
    ax.invert_yaxis()
    ax.set_title("Δ = candidate − baseline (CI)", fontsize=9)
    for ax, (m, data) in zip(axes[2:], per_item.items()):
        states = _PAIRED_STATES[m]
        counts = [
            [
                sum(1 for a, b in zip(data["baseline"], data["candidate"]) if a == i and b == j)
                for j in (0, 1)
            ]
            for i in (0, 1)
        ]
        ax.imshow(counts, cmap="Blues", vmin=0)
        top = max(max(row) for row in counts)
        for i in (0, 1):
            for j in (0, 1):
                ax.text(
                    j,
                    i,
                    counts[i][j],
                    ha="center",
                    va="center",
                    fontsize=11,
                    color="white" if counts[i][j] > top / 2 else "black",
                )
        ax.set_xticks([0, 1], states, fontsize=8)
        ax.set_yticks([0, 1], states, fontsize=8)
        ax.set_xlabel("candidate", fontsize=8)
        ax.set_ylabel("baseline", fontsize=8)
        ax.set_title(f"items: {m.removeprefix('delta_')}", fontsize=9)
    fig.suptitle(
        f"{comparison['candidate']} vs {comparison['baseline']} · {comparison['cell']} · "
        f"{comparison['dataset']} ({block['readout']})",
        fontsize=10,
    )
    return png(fig)


def report_regression(comparison, level: float | None = None) -> None:
    """Label and annotate a regression test (epic "regression", feature "<candidate> vs <baseline>",
    story = cell × dataset): the comparison table (Markdown), the comparison JSON and its plot."""
    record = comparison.to_dict()
    cand, base, cell, dataset = (
        record["candidate"],
        record["baseline"],
        record["cell"],
        record["dataset"],
    )
    identity, overlap = record["baseline_identity"], record["overlap"]
    parameters = {
        f"baseline {key}": identity.get(key)
        for key in ("model_id", "weights_sha256", "run_id", "git_commit", "date")
    }
    parameters["primary_readout"] = record["primary_readout"]
    parameters["shared (item, ordering) pairs"] = (
        f"{overlap['shared_pairs']} (baseline {overlap['baseline_pairs']}, "
        f"candidate {overlap['candidate_pairs']})"
    )
    allure = label_test(
        "regression",
        f"{cand} vs {base}",
        f"{cell} × {dataset}",
        f"regression · {cell} · {dataset} · {cand} vs {base}",
        parameters,
    )
    if allure is None:
        return
    allure.dynamic.description(
        "; ".join(
            f"{r['metric']} {_num(r['delta'], signed=True)} "
            f"[{', '.join(_num(x, signed=True) for x in r['ci'] or [])}] "
            f"{r['arrow']}" + (f" → {r['label']}" if r["verdict"] else "")
            for r in rows(record)
        )
    )
    allure.attach(
        markdown([record], level),
        name="regression table",
        attachment_type="text/markdown",
        extension="md",
    )
    attach_json(allure, record, "comparison.json")
    attach_png(allure, regression_plot(record), "regression.png")
