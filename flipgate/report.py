"""Allure reporting: labels, parameters, attachments, environment, card results
(Facet-Probe/SafetyRepro disclosure)."""

from __future__ import annotations

import io
import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from flipgate.results import CellSummary, Verdict

if TYPE_CHECKING:
    from flipgate.cards.build import WrittenCard
    from flipgate.continuity.record import ContinuityRecord
    from flipgate.decomposition.record import DecompositionRecord
    from flipgate.judge.record import JudgeRecord
    from flipgate.metrics.decomposition import AxisDecomposition


def _allure():
    try:
        import allure
    except ImportError:  # allure-pytest is a dependency; tolerate running without it
        return None
    return allure


def _dumped(verdicts: list[Verdict]) -> list[dict]:
    return [v.model_dump(mode="json") for v in verdicts]


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def flip_rate_plot(name: str, by_readout: dict[str, CellSummary]) -> bytes:
    """Bar chart of flip rate, pairwise disagreement and parse rate per readout, with CIs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    return _png(fig)


def k_ablation_plot(name: str, by_readout: dict[str, CellSummary]) -> bytes:
    """Flip rate against the number of orderings K (Facet-Probe K-ablation), one line per
    readout."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    return _png(fig)


def report_cell(
    facet: str,
    dataset: str,
    model_id: str,
    summaries: dict[str, CellSummary],
    items: pd.DataFrame,
    verdicts: list[Verdict],
    params: dict,
    trend: list | None = None,
) -> None:
    """Label and annotate the running test (epic = facet, feature = dataset, story = model).
    ``trend``: the primary readout's flip rate per run (:func:`flipgate.trend.metric_trend`, this
    run last),
    plotted and attached from two runs on."""
    allure = _allure()
    if allure is None:
        return
    allure.dynamic.epic(facet)
    allure.dynamic.feature(dataset)
    allure.dynamic.story(model_id)
    allure.dynamic.title(f"{facet} · {dataset} · {model_id}")
    for key, value in params.items():
        allure.dynamic.parameter(key, value)
    primary = str(params.get("primary_readout"))
    m = summaries.get(primary) or next(iter(summaries.values()))
    flip = m.metrics["flip_rate"]
    flip_text = "–" if flip.estimate is None else f"{flip.estimate:.3f}"
    allure.dynamic.description(
        f"flip rate {flip_text} CI {list(flip.ci) if flip.ci else None}, N={m.n_items}, "
        f"K={m.k}; " + "; ".join(f"{v.threshold}: {v.verdict}" for v in verdicts)
    )
    allure.attach(
        items.to_csv(index=False),
        name="per-item results.csv",
        attachment_type=allure.attachment_type.CSV,
    )
    allure.attach(
        # the summaries as the run store keeps them and the GRID card shows them
        json.dumps(
            {
                "summaries": {r: s.model_dump(mode="json") for r, s in summaries.items()},
                "verdicts": _dumped(verdicts),
            },
            indent=2,
        ),
        name="cell card section.json",
        attachment_type=allure.attachment_type.JSON,
    )
    allure.attach(
        flip_rate_plot(f"{facet} / {dataset} / {model_id}", summaries),
        name="flip rate.png",
        attachment_type=allure.attachment_type.PNG,
    )
    if m.k_policies:
        table = pd.DataFrame(
            [{"readout": r, **row} for r, s in summaries.items() for row in s.k_policies or []]
        )
        allure.attach(
            table.to_csv(index=False),
            name="K-policies.csv",
            attachment_type=allure.attachment_type.CSV,
        )
        allure.attach(
            k_ablation_plot(f"K-ablation: {facet} / {dataset} / {model_id}", summaries),
            name="K-ablation.png",
            attachment_type=allure.attachment_type.PNG,
        )
    if trend and len(trend) >= 2:
        from flipgate.trend import trend_plot

        allure.attach(
            trend_plot(trend, f"flip rate over runs: {facet} / {dataset} / {model_id} ({primary})"),
            name="flip rate trend.png",
            attachment_type=allure.attachment_type.PNG,
        )
        allure.attach(
            pd.DataFrame([p.to_dict() for p in trend]).to_csv(index=False),
            name="flip rate trend.csv",
            attachment_type=allure.attachment_type.CSV,
        )


def neighbourhood_plot(name: str, analysis: dict) -> bytes:
    """Per model: the score range over the envelope (min–max bar), its mean and the anchor point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    return _png(fig)


def report_envelope(
    benchmark: str, analysis: dict, scores: pd.DataFrame, verdicts: list[Verdict]
) -> None:
    """Label and annotate an envelope test (epic "configuration envelope", feature = benchmark)."""
    allure = _allure()
    if allure is None:
        return
    allure.dynamic.epic("configuration envelope")
    allure.dynamic.feature(benchmark)
    allure.dynamic.title(f"configuration envelope · {benchmark} · {', '.join(analysis['models'])}")
    for key in ("envelope", "envelope_sha256", "tier", "n_configs", "anchor"):
        allure.dynamic.parameter(key, analysis.get(key))
    allure.dynamic.description(
        "; ".join(f"{v.model}: {v.threshold}: {v.verdict}" for v in verdicts)
    )
    allure.attach(
        scores.to_csv(index=False),
        name="configuration scores.csv",
        attachment_type=allure.attachment_type.CSV,
    )
    allure.attach(
        json.dumps({"analysis": analysis, "verdicts": _dumped(verdicts)}, indent=2, default=str),
        name="envelope card section.json",
        attachment_type=allure.attachment_type.JSON,
    )
    allure.attach(
        neighbourhood_plot(f"score neighbourhood / {benchmark}", analysis),
        name="score neighbourhood.png",
        attachment_type=allure.attachment_type.PNG,
    )


def odi_plot(analysis: dict) -> bytes:
    """ODI panels with HDIs: σ_π and σ_δ per facet, mean |δ| per (facet, dataset) cell, θ per
    model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        "per-facet σ_π (noise), σ_δ (offsets)",
        "tab:red",
        0.12,
        "σ_π",
    )
    panel(
        axes[0],
        [(f, v["sigma_delta"]) for f, v in facets.items()],
        "median",
        "per-facet σ_π (noise), σ_δ (offsets)",
        "tab:blue",
        -0.12,
        "σ_δ",
    )
    axes[0].legend(fontsize=7)
    panel(
        axes[1],
        [(c, v["mean_abs_delta"]) for c, v in cells.items()],
        "estimate",
        "mean |δ| per cell (bias)",
        "tab:purple",
    )
    panel(
        axes[2],
        [(m, v["theta"]) for m, v in models.items()],
        "median",
        "θ (correct outcome)",
        "tab:green",
    )
    for ax in axes:
        ax.set_xlabel(f"posterior median, {analysis['hdi_prob']:.0%} HDI", fontsize=8)
    return _png(fig)


def report_odi(analysis: dict, verdicts: list[Verdict]) -> None:
    """Label and annotate the ODI test (epic "ODI", feature "order facets", story = the roster)."""
    allure = _allure()
    if allure is None:
        return
    allure.dynamic.epic("ODI")
    allure.dynamic.feature("order facets")
    allure.dynamic.story(", ".join(analysis["roster"]))
    allure.dynamic.title(
        f"ODI · {len(analysis['facets'])} facets · {', '.join(analysis['roster'])}"
    )
    for key in ("profile", "hdi_prob", "ci_level", "passed"):
        allure.dynamic.parameter(key, analysis.get(key))
    allure.dynamic.description(
        "; ".join(f"{v.model}: {v.threshold}: {v.verdict}" for v in verdicts)
    )
    rows = [
        {
            "facet": f,
            "quantity": q,
            "median": v[q]["median"],
            "hdi_lo": v[q]["hdi"][0],
            "hdi_hi": v[q]["hdi"][1],
        }
        for f, v in analysis["facets"].items()
        for q in ("sigma_pi", "sigma_delta")
    ]
    rows += [
        {
            "facet": c,
            "quantity": "mean_abs_delta",
            "median": v["mean_abs_delta"]["estimate"],
            "hdi_lo": v["mean_abs_delta"]["hdi"][0],
            "hdi_hi": v["mean_abs_delta"]["hdi"][1],
        }
        for c, v in analysis["cells"].items()
    ]
    allure.attach(
        pd.DataFrame(rows).to_csv(index=False),
        name="ODI posterior.csv",
        attachment_type=allure.attachment_type.CSV,
    )
    allure.attach(
        json.dumps({"analysis": analysis, "verdicts": _dumped(verdicts)}, indent=2, default=str),
        name="ODI card section.json",
        attachment_type=allure.attachment_type.JSON,
    )
    allure.attach(
        odi_plot(analysis),
        name="ODI sigma_pi and delta.png",
        attachment_type=allure.attachment_type.PNG,
    )


#: per-item states of the binary deltas, for the paired 2x2 panels of :func:`regression_plot`
_PAIRED_STATES = {"delta_flip_rate": ("stable", "flips"), "delta_accuracy": ("wrong", "right")}


def regression_plot(comparison: dict) -> bytes:
    """One cell's candidate-vs-baseline comparison (a :meth:`CellComparison.to_dict` record),
    primary readout: each metric's baseline and candidate value, each delta with its CI, and, where
    the record
    has per-item values, the 2x2 counts of items by (baseline state, candidate state) of the binary
    deltas (the off-diagonal cells are McNemar's discordant items)."""
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from flipgate.regression.table import arrow

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
    return _png(fig)


def report_regression(comparison, level: float | None = None) -> None:
    """Label and annotate a regression test (epic "regression", feature "<candidate> vs <baseline>",
    story = cell × dataset): the comparison table (Markdown), the comparison JSON and its plot."""
    allure = _allure()
    if allure is None:
        return
    from flipgate.regression.table import _num, markdown, rows

    record = comparison.to_dict()
    cand, base, cell, dataset = (
        record["candidate"],
        record["baseline"],
        record["cell"],
        record["dataset"],
    )
    allure.dynamic.epic("regression")
    allure.dynamic.feature(f"{cand} vs {base}")
    allure.dynamic.story(f"{cell} × {dataset}")
    allure.dynamic.title(f"regression · {cell} · {dataset} · {cand} vs {base}")
    identity, overlap = record["baseline_identity"], record["overlap"]
    for key in ("model_id", "weights_sha256", "run_id", "git_commit", "date"):
        allure.dynamic.parameter(f"baseline {key}", identity.get(key))
    allure.dynamic.parameter("primary_readout", record["primary_readout"])
    allure.dynamic.parameter(
        "shared (item, ordering) pairs",
        f"{overlap['shared_pairs']} (baseline {overlap['baseline_pairs']}, "
        f"candidate {overlap['candidate_pairs']})",
    )
    allure.dynamic.description(
        "; ".join(
            f"{r['metric']} {_num(r['delta'], signed=True)} "
            f"[{', '.join(_num(x, signed=True) for x in r['ci'] or [])}] "
            f"{r['arrow']}" + (f" → {r['verdict']}" if r["verdict"] else "")
            for r in rows(record)
        )
    )
    allure.attach(
        markdown([record], level),
        name="regression table",
        attachment_type="text/markdown",
        extension="md",
    )
    allure.attach(
        json.dumps(record, indent=2, default=str),
        name="comparison.json",
        attachment_type=allure.attachment_type.JSON,
    )
    allure.attach(
        regression_plot(record), name="regression.png", attachment_type=allure.attachment_type.PNG
    )


def write_environment(results_dir: Path, props: dict[str, str]) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{k}={str(v).replace(chr(10), ' ')}\n" for k, v in sorted(props.items()))
    (results_dir / "environment.properties").write_text(text)


def add_card_results(results_dir: Path, cards: list[WrittenCard]) -> None:
    """One Allure result per GRID card (epic "GRID card"), with the JSON and Markdown attached."""
    results_dir.mkdir(parents=True, exist_ok=True)
    now = int(time.time() * 1000)
    for written in cards:
        card = written.card
        failed = [v for v in card.thresholds if v.verdict in ("fail", "missing")]
        attachments = []
        for path, mime in (
            (written.json_path, "application/json"),
            (written.markdown_path, "text/markdown"),
        ):
            source = f"{uuid.uuid4()}-attachment{path.suffix}"
            (results_dir / source).write_bytes(path.read_bytes())
            attachments.append({"name": path.name, "source": source, "type": mime})
        name = f"GRID card: {card.model.id} / {card.dataset.name}"
        result = {
            "uuid": str(uuid.uuid4()),
            "historyId": name,
            "name": name,
            "fullName": name,
            "status": "failed" if failed else "passed",
            "stage": "finished",
            "start": now,
            "stop": now,
            "statusDetails": {"message": "; ".join(v.threshold for v in failed)} if failed else {},
            "labels": [
                {"name": "epic", "value": "GRID card"},
                {"name": "feature", "value": card.dataset.name},
                {"name": "story", "value": card.model.id},
            ],
            "attachments": attachments,
        }
        (results_dir / f"{result['uuid']}-result.json").write_text(json.dumps(result))


def report_decomposition(
    record: DecompositionRecord,
    verdicts: list[Verdict],
    measured: list[AxisDecomposition] | None = None,
) -> None:
    """Label and annotate a decomposition test (epic "readout decomposition", feature = dataset,
    story = model): the split per readout, the flip surface (items × the axes of ``measured``:
    this run's axes of the model and dataset so far, so the group's last cell shows them all)
    and the record as JSON."""
    allure = _allure()
    if allure is None:
        return
    from flipgate.decomposition.plots import split_plot, surface_plot

    allure.dynamic.epic("readout decomposition")
    allure.dynamic.feature(record.dataset)
    allure.dynamic.story(record.model_id)
    allure.dynamic.title(
        f"readout decomposition · {record.axis} · {record.dataset} · {record.model_id}"
    )
    allure.dynamic.parameter("axis", record.axis)
    allure.dynamic.parameter("manifest_sha256", record.manifest_sha256)
    result = record.decomposition
    if result is None:
        allure.dynamic.description(f"stopped: {record.stopped}")
    else:
        parts = [
            f"{r}: total {_fmt(s.flip_rate.estimate)}"
            + (f", artifact {_fmt(s.artifact.estimate)}" if s.artifact is not None else "")
            for r, s in result.readouts.items()
        ]
        allure.dynamic.description(
            f"genuine {_fmt(result.genuine.estimate)} (N={result.genuine.n_items}); "
            + "; ".join(parts)
            + "; "
            + "; ".join(f"{v.threshold}: {v.verdict}" for v in verdicts)
        )
        name = f"{record.axis} / {record.dataset} / {record.model_id}"
        allure.attach(
            split_plot(name, result),
            name="genuine and artifact.png",
            attachment_type=allure.attachment_type.PNG,
        )
        axes = measured or [result]
        allure.attach(
            surface_plot(f"{record.dataset} / {record.model_id}", axes),
            name=f"flip surface ({len(axes)} axes).png",
            attachment_type=allure.attachment_type.PNG,
        )
    allure.attach(
        json.dumps(
            {"record": record.model_dump(mode="json"), "verdicts": _dumped(verdicts)}, indent=2
        ),
        name="decomposition card section.json",
        attachment_type=allure.attachment_type.JSON,
    )


def report_judge(record: JudgeRecord, verdicts: list[Verdict]) -> None:
    """Label and annotate a judge consensus test (epic "judge consensus", feature = dataset,
    story = judge model): accuracy vs k, and the record as JSON."""
    allure = _allure()
    if allure is None:
        return
    from flipgate.judge.plots import accuracy_vs_k_plot

    r = record.result
    allure.dynamic.epic("judge consensus")
    allure.dynamic.feature(record.dataset)
    allure.dynamic.story(record.model_id)
    allure.dynamic.title(f"judge consensus · {record.dataset} · {record.model_id}")
    allure.dynamic.parameter("readout", record.readout)
    allure.dynamic.parameter("K", r.k)
    allure.dynamic.parameter("manifest_sha256", record.manifest_sha256)
    allure.dynamic.description(
        f"direct {_fmt(r.direct_accuracy.estimate)}, consensus "
        f"{_fmt(r.consensus_accuracy.estimate)} (N={r.n_items}); improved "
        f"{r.sign_test.improved} / regressed {r.sign_test.regressed}, sign test p "
        f"{_fmt(r.sign_test.p_value)}; judge flip rate {_fmt(r.judge_flip_rate.estimate)}; "
        + "; ".join(f"{v.threshold}: {v.verdict}" for v in verdicts)
    )
    allure.attach(
        accuracy_vs_k_plot(f"{record.dataset} / {record.model_id}", r),
        name="accuracy vs k.png",
        attachment_type=allure.attachment_type.PNG,
    )
    allure.attach(
        json.dumps(
            {"record": record.model_dump(mode="json"), "verdicts": _dumped(verdicts)}, indent=2
        ),
        name="judge consensus card section.json",
        attachment_type=allure.attachment_type.JSON,
    )


def report_continuity(record: ContinuityRecord, verdicts: list[Verdict]) -> None:
    """Label and annotate a continuity test (epic "continuity", feature = sweep, story = model):
    the uncertainty trajectory with the transition point, and the record as JSON."""
    allure = _allure()
    if allure is None:
        return
    from flipgate.continuity.plots import trajectory_plot

    r = record.result
    allure.dynamic.epic("continuity")
    allure.dynamic.feature(record.sweep)
    allure.dynamic.story(record.model_id)
    allure.dynamic.title(f"continuity · {record.sweep} · {record.estimator} · {record.model_id}")
    allure.dynamic.parameter("estimator", record.estimator)
    allure.dynamic.parameter("samples", record.samples)
    allure.dynamic.parameter("manifest_sha256", record.manifest_sha256)
    auc = r.auc_undefined or _fmt(r.abstention_auc.estimate)
    allure.dynamic.description(
        f"L_local {_fmt(r.l_local.estimate)}, L_global {_fmt(r.l_global.estimate)}, "
        f"abstention AUC {auc}, accuracy {_fmt(r.accuracy.estimate)} "
        f"(N={r.n_sources} sweeps, {r.n_inputs} inputs); "
        + "; ".join(f"{v.threshold}: {v.verdict}" for v in verdicts)
    )
    allure.attach(
        trajectory_plot(f"{record.sweep} / {record.model_id}", {record.estimator: r}),
        name="uncertainty trajectory.png",
        attachment_type=allure.attachment_type.PNG,
    )
    allure.attach(
        json.dumps(
            {"record": record.model_dump(mode="json"), "verdicts": _dumped(verdicts)}, indent=2
        ),
        name="continuity card section.json",
        attachment_type=allure.attachment_type.JSON,
    )


def _fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"
