"""A cell's metric across successive runs: each run's store keeps its cells' summaries (the
``summaries`` table), so a run can plot how e.g. its flip rate moved over the runs before it.
Allure's own history tracks statuses only; this is the per-test trend of the numbers."""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from flipgate.plotting import png, pyplot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrendPoint:
    run_id: str
    estimate: float | None
    lo: float | None
    hi: float | None
    n_items: int | None

    def to_dict(self) -> dict:
        return asdict(self)


def metric_trend(
    runs_dir: Path | str,
    model_id: str,
    dataset: str,
    cell: str,
    readout: str,
    metric: str,
    limit: int = 20,
) -> list[TrendPoint]:
    """One metric of one cell in each run under ``runs_dir`` (``<run_id>/trials.sqlite``) that
    recorded it, oldest first, at most the ``limit`` newest. Stores that cannot be read or predate
    the ``summaries`` table are skipped."""
    from flipgate.store import TrialStore

    points: list[TrendPoint] = []
    for path in sorted(
        Path(runs_dir).glob("*/trials.sqlite"), key=lambda p: p.parent.name, reverse=True
    ):
        if len(points) >= limit:
            break
        try:
            store = TrialStore.read_only(path)
        except (sqlite3.Error, OSError) as exc:  # not a SQLite file, or unreadable
            log.debug("trend: skipping %s (%s)", path, exc)
            continue
        try:
            row = store.conn.execute(
                "SELECT estimate, lo, hi, n_items FROM summaries WHERE model_id = ? AND "
                "dataset = ? AND cell = ? AND readout = ? AND metric = ?",
                (model_id, dataset, cell, readout, metric),
            ).fetchone()
        except sqlite3.Error as exc:  # no summaries table (an older run), or a damaged file
            log.debug("trend: skipping %s (%s)", path, exc)
            row = None
        finally:
            store.conn.close()
        if row is not None:
            points.append(TrendPoint(path.parent.name, *row))
    return points[::-1]


def short_run_id(run_id: str) -> str:
    """A run id's timestamp part (``20261123T174835Z-74bd9d`` -> ``2026-11-23 17:48:35``); other ids
    as they are."""
    try:
        return datetime.strptime(run_id.split("-")[0], "%Y%m%dT%H%M%SZ").strftime(
            "%Y-%m-%d %H:%M:%S"
        )
    except ValueError:
        return run_id


def trend_plot(points: list[TrendPoint], title: str) -> bytes:
    """PNG: the estimate per run (oldest left) with its CI as error bars; the newest run
    highlighted."""
    plt = pyplot()

    nan = float("nan")
    val = lambda x: nan if x is None else x  # noqa: E731
    xs = list(range(len(points)))
    est = [val(p.estimate) for p in points]
    err_lo = [
        max(0.0, e - val(p.lo)) if p.lo is not None and p.estimate is not None else 0.0
        for p, e in zip(points, est)
    ]
    err_hi = [
        max(0.0, val(p.hi) - e) if p.hi is not None and p.estimate is not None else 0.0
        for p, e in zip(points, est)
    ]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 + 0.55 * len(points)), 3.4), dpi=100)
    ax.errorbar(xs, est, yerr=[err_lo, err_hi], fmt="-o", capsize=3, color="tab:blue", lw=1)
    if points:
        ax.plot(xs[-1], est[-1], "o", ms=9, color="tab:red", label="latest run")
        ax.legend(fontsize=7, loc="upper left")
    ax.set_xticks(xs, [short_run_id(p.run_id) for p in points], rotation=45, ha="right", fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("estimate (CI)")
    ax.set_title(title, fontsize=9)
    return png(fig)
