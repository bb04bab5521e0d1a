"""Pictures of the readout decomposition: genuine + artifact bars per readout (flipbench's
figure 1) and the per-item flip surface (items × axes, one panel per readout)."""

from __future__ import annotations

import numpy as np

from flipgate.metrics.decomposition import AxisDecomposition
from flipgate.plotting import png, pyplot


def split_plot(title: str, result: AxisDecomposition) -> bytes:
    """Per readout: the genuine flip rate (the reference's, blue) with the readout's artifact
    stacked on it (orange, negative when the readout is steadier), total CI as an error bar."""
    plt = pyplot()
    readouts = list(result.readouts)
    fig, ax = plt.subplots(figsize=(1.6 + 1.2 * len(readouts), 3.4), dpi=100)
    genuine = result.genuine.estimate or 0.0
    for x, r in enumerate(readouts):
        split = result.readouts[r]
        total = split.flip_rate.estimate
        art = split.artifact.estimate if split.artifact is not None else 0.0
        ax.bar(x, genuine, color="tab:blue", label="genuine (e*)" if x == 0 else None)
        if art:
            ax.bar(x, art or 0.0, bottom=genuine, color="tab:orange", label="artifact")
        lo, hi = split.flip_rate.ci or (None, None)
        if total is not None and lo is not None and hi is not None:
            ax.errorbar(x, total, yerr=[[total - lo], [hi - total]], color="black", capsize=3)
    ax.set_xticks(range(len(readouts)), readouts)
    ax.set_ylim(0, 1)
    ax.set_ylabel("flip rate")
    ax.set_title(title, fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(dict(zip(labels, handles)).values(), dict(zip(labels, handles)).keys(), fontsize=7)
    return png(fig)


def surface_plot(title: str, results: list[AxisDecomposition]) -> bytes:
    """Items × axes, one panel per readout: 1 flipped (bright), 0 stable, grey unparsed."""
    plt = pyplot()
    readouts = list(dict.fromkeys(r for res in results for r in res.surface))
    items = sorted({i for res in results for s in res.surface.values() for i in s})
    fig, axes = plt.subplots(
        1,
        len(readouts),
        figsize=(1.2 + 1.6 * len(readouts) * max(1, len(results)) / 3, 1.2 + 0.14 * len(items)),
        dpi=100,
        squeeze=False,
    )
    cmap = plt.get_cmap("magma").with_extremes(bad="lightgrey")
    for ax, readout in zip(axes[0], readouts):
        grid = np.full((len(items), len(results)), np.nan)
        for j, res in enumerate(results):
            for i, item in enumerate(items):
                value = res.surface.get(readout, {}).get(item)
                grid[i, j] = np.nan if value is None else value
        ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(results)), [r.axis for r in results], rotation=45, fontsize=7)
        ax.set_yticks([])
        ax.set_title(readout, fontsize=9)
    axes[0][0].set_ylabel(f"{len(items)} items")
    from matplotlib.patches import Patch

    fig.legend(
        [Patch(color=cmap(1.0)), Patch(color=cmap(0.0)), Patch(color="lightgrey")],
        ["flipped", "stable", "parsed < 2 conditions"],
        loc="lower center",
        ncol=3,
        fontsize=7,
        frameon=False,
    )
    fig.suptitle(title, fontsize=9)
    fig.subplots_adjust(bottom=0.2)
    return png(fig)
