"""The comparison table (Markdown ready to paste into a pull request or model card, or JSON), read
from :meth:`CellComparison.to_dict` records as stored in the trials store."""

from __future__ import annotations

import json
import math

from flipgate.markdown_text import md_escape
from flipgate.regression.compare import DELTA_METRICS
from flipgate.results import label_text

#: arrows for a delta's direction judged by its CI: ▲ worse, ▼ better, ≈ CI covers 0
WORSE, BETTER, SAME = "▲ worse", "▼ better", "≈"


def _num(x, digits: int = 3, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def arrow(metric: str, ci) -> str:
    """Whether the candidate is worse, better or indistinguishable on ``metric`` at the CI's
    level."""
    if not ci or ci[0] is None or any(isinstance(c, float) and math.isnan(c) for c in ci):
        return "–"
    worse_up = DELTA_METRICS[metric]
    if ci[0] > 0:
        return WORSE if worse_up else BETTER
    if ci[1] < 0:
        return BETTER if worse_up else WORSE
    return SAME


def rows(comparison: dict) -> list[dict]:
    """One row per delta metric of the comparison's primary readout, with its verdicts."""
    block = comparison["readouts"][comparison["primary_readout"]]
    verdicts = {
        v["metric"]: v
        for v in comparison.get("verdicts", [])
        if v.get("readout") == block["readout"]
    }
    out = []
    for metric, delta in block["deltas"].items():
        test = block["mcnemar"].get(metric)
        v = verdicts.get(metric)
        out.append(
            {
                "candidate": comparison["candidate"],
                "baseline": comparison["baseline"],
                "cell": comparison["cell"],
                "dataset": comparison["dataset"],
                "readout": block["readout"],
                "metric": metric,
                "baseline_value": block["arms"][metric]["baseline"],
                "candidate_value": block["arms"][metric]["candidate"],
                "delta": delta["estimate"],
                "ci": delta["ci"],
                "n_items": delta.get("n_items"),
                "p_two_sided": test["p_two_sided"] if test else None,
                "p_regression": test["p_regression"] if test else None,
                "verdict": v["verdict"] if v else None,
                # the label with why it is undecided (docs/definitions.md §12.8)
                "label": label_text(v) if v else None,
                "outcome": v["outcome"] if v else None,
                "threshold": v["threshold"] if v else None,
                # the one-sided test that decided the verdict (docs/definitions.md §12.6)
                "test": v.get("test") if v else None,
                "arrow": arrow(metric, delta["ci"]),
            }
        )
    return out


def markdown(comparisons: list[dict], level: float | None = None) -> str:
    """A Markdown table of every comparison (primary readouts), one row per delta metric."""
    ci_head = f"{level:.0%} bootstrap CI (shown)" if level else "bootstrap CI (shown)"
    lines = [
        f"| candidate vs baseline | cell | dataset | metric | baseline | candidate | Δ | {ci_head} "
        "| N | "
        f"McNemar p (2-sided / regression) | verdict | deciding test | |",
        "|---|---|---|---|---:|---:|---:|---|---:|---|---|---|---|",
    ]
    for c in comparisons:
        for r in rows(c):
            ci = (
                f"[{_num(r['ci'][0], signed=True)}, {_num(r['ci'][1], signed=True)}]"
                if r["ci"]
                else "–"
            )
            p = (
                f"{_num(r['p_two_sided'], 4)} / {_num(r['p_regression'], 4)}"
                if r["p_two_sided"] is not None
                else "–"
            )
            verdict = f"{r['label']} ({r['threshold']})" if r["verdict"] else "not gated"
            lines.append(
                f"| {md_escape(r['candidate'])} vs {md_escape(r['baseline'])} | "
                f"{md_escape(r['cell'])} | {md_escape(r['dataset'])} | "
                f"{r['metric']} | {_num(r['baseline_value'])} | {_num(r['candidate_value'])} | "
                f"{_num(r['delta'], signed=True)} | {ci} | "
                f"{r['n_items'] if r['n_items'] is not None else '–'} | "
                f"{p} | {md_escape(verdict)} | {md_escape(r['test'] or '–')} | {r['arrow']} |"
            )
    return "\n".join(lines) + "\n"


def to_json(comparisons: list[dict]) -> str:
    """The comparisons with their flat rows, as JSON."""
    return json.dumps(
        {"comparisons": comparisons, "rows": [r for c in comparisons for r in rows(c)]}, indent=2
    )
