"""The continuity suite's picture (the continuity paper's Figures 4–6): the mean uncertainty at
each sweep position over the sources, with its CI, the transition point between I+ and I−
marked, and the greedy answer's accuracy per position."""

from __future__ import annotations

from flipgate.metrics.continuity import PLUS, ContinuityResult
from flipgate.plotting import png, pyplot


def trajectory_plot(title: str, results: dict[str, ContinuityResult]) -> bytes:
    """One line per estimator (name -> result) over the sweep positions."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 4.0), dpi=100)
    first = next(iter(results.values()))
    xs = list(range(len(first.trajectory)))
    for name, result in results.items():
        est = [t.u.estimate for t in result.trajectory]
        lo = [
            t.u.ci[0] if t.u.ci and t.u.ci[0] is not None else e
            for t, e in zip(result.trajectory, est)
        ]
        hi = [
            t.u.ci[1] if t.u.ci and t.u.ci[1] is not None else e
            for t, e in zip(result.trajectory, est)
        ]
        line = ax.plot(xs, est, "o-", label=f"{name} (L_global {result.l_global.estimate:.2f})")
        ax.fill_between(xs, lo, hi, color=line[0].get_color(), alpha=0.15)
    acc = [t.accuracy for t in first.trajectory]
    ax.plot(xs, acc, "s:", color="grey", label="greedy accuracy")
    n_plus = sum(t.branch == PLUS for t in first.trajectory)
    ax.axvline(n_plus - 0.5, color="tab:red", ls="--", label="transition (d = 0 on both sides)")
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{t.branch}{t.step}\nd={t.d}" for t in first.trajectory], fontsize=7)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("mean uncertainty u (95% CI)")
    ax.set_title(f"{title} (N={first.n_sources} sweeps)", fontsize=9)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    return png(fig)
