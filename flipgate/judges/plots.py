"""The judge suite's picture: consensus accuracy against the number of orderings k = 1…K, with
its CI, the direct (canonical ordering) accuracy and the per-run accuracy p."""

from __future__ import annotations

from flipgate.metrics.judging import JudgeConsensusResult
from flipgate.plotting import png, pyplot


def accuracy_vs_k_plot(title: str, result: JudgeConsensusResult) -> bytes:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 3.2), dpi=100)
    ks = list(range(1, len(result.accuracy_at_k) + 1))
    est = [e.estimate if e.estimate is not None else float("nan") for e in result.accuracy_at_k]
    lo = [e.ci[0] if e.ci and e.ci[0] is not None else float("nan") for e in result.accuracy_at_k]
    hi = [e.ci[1] if e.ci and e.ci[1] is not None else float("nan") for e in result.accuracy_at_k]
    ax.fill_between(ks, lo, hi, color="tab:blue", alpha=0.2, label="consensus 95% CI")
    ax.plot(ks, est, "o-", color="tab:blue", label="consensus of the first k orderings")
    direct = result.direct_accuracy.estimate
    if direct is not None:
        ax.axhline(direct, color="tab:red", ls="--", label=f"direct (ordering 0) {direct:.2f}")
    ax.axhline(
        result.run_accuracy, color="grey", ls=":", label=f"per run p {result.run_accuracy:.2f}"
    )
    ax.set_xticks(ks)
    ax.set_xlabel("orderings k")
    ax.set_ylabel("exact top-1 accuracy")
    ax.set_ylim(0, 1)
    ax.set_title(f"{title} (N={result.n_items})", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    return png(fig)
