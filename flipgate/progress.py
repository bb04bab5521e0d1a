"""Live progress of a run: trials answered of trials planned, per model, with trials/s and ETA,
drawn by the controller from the run's trials store while the workers measure (docs/engine.md,
"Progress").

Three writers feed it, all through :class:`~flipgate.store.TrialStore`: every process that
collects writes the plan (each collected cell's ``Suite.planned``, table ``planned``; a cell's
count is made exact when its plan is drawn, and 0 when the model cannot take it); a worker notes
how many outputs of a backend call in flight it has (table ``live``) and, for an API model, what
the call waits on (table ``waits``: the last refusal or timeout, and since when none of its
requests was answered); a finished cell's trials land in ``trials``. A sequential cell
(docs/definitions.md §12) plans its cap, an upper bound (table ``planned_at_most``) until it
stops and its plan is lowered to the items it drew: while a model has such a cell, its total (and
the ETA) is shown as "≤ T". The controller's :class:`LiveProgress` thread polls them and draws
one bar on a terminal, or one line every ``interval`` seconds in a log; workers draw nothing. A
model none of whose calls has answered for :data:`STALLED_AFTER_S` is named at the front of the
line with why ("api: no answer in 1:05 (HTTP 429, Retry-After 30 s, 4 of 6 attempts left)"), so a
rate-limited or silent server is not only a count that does not move.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from tqdm import tqdm

from flipgate.cell import CellKey
from flipgate.config import AuditConfig
from flipgate.store import AtMost
from flipgate.suite.api import Plan

#: seconds without an answer after which a model's wait is shown: a minute's progress lines
#: (one every 30 s in a log) name it, and answers arriving every few seconds never trigger it
STALLED_AFTER_S = 20.0


@dataclass(frozen=True)
class Wait:
    """What a model's call waits on (the backend's words) and since when (Unix time) none of its
    requests was answered."""

    model_id: str
    reason: str
    since: float

    def describe(self, now: float) -> str:
        """``api: no answer in 1:05 (HTTP 429, Retry-After 30 s, 4 of 6 attempts left)``."""
        return f"{self.model_id}: no answer in {_clock(max(now - self.since, 0.0))} ({self.reason})"


@dataclass(frozen=True)
class InFlight:
    """A backend call in flight: its model, label (cell and dataset), outputs returned of its
    requests, and when it started (Unix time)."""

    model_id: str
    label: str
    done: int
    total: int
    started: float

    def describe(self, now: float) -> str:
        """``smollm2 envelope T1/greedy 40/320 in 2:10 (0.3/s)``: the call holding the time."""
        elapsed = max(now - self.started, 0.0)
        rate = f" ({self.done / elapsed:.1f}/s)" if self.done and elapsed > 0 else ""
        return f"{self.model_id} {self.label} {self.done}/{self.total} in {_clock(elapsed)}{rate}"


@dataclass(frozen=True)
class Snapshot:
    """Trials answered (stored, or returned by a call in flight) and planned, per model."""

    models: dict[str, tuple[int, int]]  # model id -> (answered, planned)
    #: models whose plan is still an upper bound (a sequential cell that has not stopped)
    at_most: frozenset[str] = frozenset()
    #: the backend calls in flight, oldest first
    in_flight: tuple[InFlight, ...] = ()
    #: what calls in flight wait on, the longest-waiting first
    waits: tuple[Wait, ...] = ()
    #: per API model, the mean number of its requests in the air over its calls in flight (every
    #: worker's together: what its ``concurrency`` bounds)
    flying: dict[str, float] = field(default_factory=dict)

    def stalled(self, now: float) -> list[Wait]:
        """Per model, its longest wait without an answer, if that is :data:`STALLED_AFTER_S` or
        more."""
        found: dict[str, Wait] = {}
        for wait in self.waits:
            if now - wait.since >= STALLED_AFTER_S:
                found.setdefault(wait.model_id, wait)
        return list(found.values())

    @property
    def answered(self) -> int:
        return sum(a for a, _ in self.models.values())

    @property
    def planned(self) -> int:
        return sum(p for _, p in self.models.values())

    @property
    def bounded(self) -> bool:
        """Whether the total is an upper bound."""
        return bool(self.at_most & self.models.keys())


def read_snapshot(conn: sqlite3.Connection) -> Snapshot:
    """The run's progress from its trials store (``conn``): per model, planned trials and the
    answered ones, each cell counted up to its plan, calls in flight added, capped at the plan;
    which models' plans are upper bounds still; what the calls in flight wait on."""
    rows = conn.execute(
        "SELECT p.model_id, SUM(p.trials), SUM(MIN(p.trials, IFNULL(t.n, 0))) FROM planned p "
        "LEFT JOIN (SELECT model_id, dataset, facet, COUNT(*) AS n FROM trials "
        "GROUP BY model_id, dataset, facet) t "
        "ON t.model_id = p.model_id AND t.dataset = p.dataset AND t.facet = p.cell "
        "GROUP BY p.model_id ORDER BY p.model_id"
    ).fetchall()
    live = dict(conn.execute("SELECT model_id, SUM(done) FROM live GROUP BY model_id").fetchall())
    at_most = frozenset(m for (m,) in conn.execute("SELECT DISTINCT model_id FROM planned_at_most"))
    calls = conn.execute(
        "SELECT model_id, label, done, total, started FROM live "
        "WHERE total IS NOT NULL AND started IS NOT NULL ORDER BY started"
    ).fetchall()
    waits = conn.execute("SELECT model_id, reason, since FROM waits ORDER BY since").fetchall()
    flying = dict(
        conn.execute("SELECT model_id, SUM(mean) FROM flights GROUP BY model_id").fetchall()
    )
    return Snapshot(
        {m: (min(int(p), int(s) + int(live.get(m) or 0)), int(p)) for m, p, s in rows if p},
        at_most,
        tuple(InFlight(m, label, int(d), int(t), float(st)) for m, label, d, t, st in calls),
        tuple(Wait(m, str(reason), float(since)) for m, reason, since in waits),
        {m: float(n) for m, n in flying.items() if n is not None},
    )


class Rate:
    """Trials per second over the last ``window`` seconds of snapshots."""

    def __init__(self, window: float = 60.0):
        self.window = window
        self.points: deque[tuple[float, int]] = deque()

    def add(self, now: float, answered: int) -> None:
        self.points.append((now, answered))
        while len(self.points) > 2 and now - self.points[1][0] >= self.window:
            self.points.popleft()

    def per_second(self) -> float | None:
        if len(self.points) < 2:
            return None
        (t0, a0), (t1, a1) = self.points[0], self.points[-1]
        return (a1 - a0) / (t1 - t0) if t1 > t0 else None


def _in_brackets(*parts: str) -> str:
    """`` (a, b)`` of the parts that say something, or nothing."""
    said = [p for p in parts if p]
    return f" ({', '.join(said)})" if said else ""


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}:{secs:02d}"


def describe(
    snapshot: Snapshot,
    rate: float | None,
    model_rates: dict[str, float] | None = None,
    now: float | None = None,
) -> str:
    """``1234/4580 trials (27%), 4.1 trials/s, ETA 13:37 · smollm2 600/1800 (2.0/s) · ...``,
    each model's own trials/s once measured (``model_rates``); while a sequential cell may stop
    early, its model's total and the run's are upper bounds, the share and the ETA with them:
    ``1234/≤4580 trials (≥27%), 4.1 trials/s, ETA ≤13:37 · smollm2 600/≤1800 · ...``; an API
    model's calls add the mean number of its requests in the air: ``api 120/600 (41.3/s, 31.6 in
    flight)``. With the
    time ``now``, the call in flight that has run longest closes the line: ``longest call:
    gemma3-270m option_order/mmlu 120/600 in 3:05 (0.6/s)``, and each model that has had no
    answer for :data:`STALLED_AFTER_S` follows the head with why (:meth:`Wait.describe`), before
    anything a narrow bar cuts off."""
    model_rates = model_rates or {}
    total, done = snapshot.planned, snapshot.answered
    up_to, at_least = ("≤", "≥") if snapshot.bounded else ("", "")
    head = (
        f"{done}/{up_to}{total} trials ({at_least}{100 * done / total:.0f}%)"
        if total
        else "planning"
    )
    if rate:
        head += f", {rate:.1f} trials/s"
        if total > done:
            head += f", ETA {up_to}{_clock((total - done) / rate)}"
    models = [
        f"{m} {a}/{'≤' if m in snapshot.at_most else ''}{p}"
        + _in_brackets(
            f"{model_rates[m]:.1f}/s" if model_rates.get(m) else "",
            f"{snapshot.flying[m]:.1f} in flight" if m in snapshot.flying else "",
        )
        for m, (a, p) in snapshot.models.items()
    ]
    longest = (
        [f"longest call: {snapshot.in_flight[0].describe(now)}"]
        if now is not None and snapshot.in_flight
        else []
    )
    stalled = [w.describe(now) for w in snapshot.stalled(now)] if now is not None else []
    return " · ".join([head, *stalled, *models, *longest])


class LiveProgress:
    """The controller's progress display: a thread that polls the trials store every ``poll``
    seconds. ``mode`` "bar": one tqdm bar (a terminal); "lines": a line every ``interval``
    seconds (a log)."""

    def __init__(
        self,
        store_path: Path,
        stream: IO[str],
        mode: str,
        poll: float = 1.0,
        interval: float = 30.0,
        mid_line: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        preamble: list[str] | None = None,
    ):
        self.clock, self.wall_clock = clock, wall_clock
        #: lines printed once, before the first progress line or bar (e.g. the dtype chosen)
        self.preamble = list(preamble or [])
        self.store_path, self.stream, self.mode = store_path, stream, mode
        self.mid_line = mid_line  # pytest's terminal has half a line of test letters
        self.poll, self.interval = poll, interval
        self.rate = Rate()
        self.model_rates: dict[str, Rate] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="flipgate-progress", daemon=True)
        self._bar: Any = None
        self._conn: sqlite3.Connection | None = None
        self._best: dict[str, int] = {}  # answered never goes back (a cell between call and store)
        self._last_line: float | None = None  # when the last line was printed

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop polling, draw the final state once, and close the bar."""
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(timeout=10)
        self.update(final=True)
        if self._bar is not None:
            self._bar.close()
        if self._conn is not None:
            self._conn.close()

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            self.update()

    def snapshot(self) -> Snapshot | None:
        """The store's progress, or None while it does not exist yet (or is busy)."""
        try:
            if self._conn is None:
                if not self.store_path.exists():
                    return None
                self._conn = sqlite3.connect(
                    f"{self.store_path.resolve().as_uri()}?mode=ro",
                    uri=True,
                    timeout=5,
                    check_same_thread=False,
                )
            snap = read_snapshot(self._conn)
        except sqlite3.Error:
            return None
        models = {}
        for m, (a, p) in snap.models.items():
            self._best[m] = max(self._best.get(m, 0), a)
            models[m] = (min(self._best[m], p), p)
        return Snapshot(models, snap.at_most, snap.in_flight, snap.waits, snap.flying)

    def update(self, final: bool = False) -> None:
        snap = self.snapshot()
        if snap is None or not snap.planned:
            return
        now = self.clock()
        self.rate.add(now, snap.answered)
        for m, (answered, _) in snap.models.items():
            self.model_rates.setdefault(m, Rate()).add(now, answered)
        per_model = {m: r.per_second() or 0.0 for m, r in self.model_rates.items()}
        text = describe(snap, self.rate.per_second(), per_model, self.wall_clock())
        if self.mode == "bar":
            self._draw_bar(snap, text)
        elif final or self._last_line is None or now - self._last_line >= self.interval:
            self._last_line = now
            lead = "\n" if self.mid_line() else ""
            lines = [*self.preamble, f"flipgate: progress {text}"]
            self.preamble = []
            print(lead + "\n".join(lines), file=self.stream, flush=True)

    def _draw_bar(self, snap: Snapshot, text: str) -> None:
        if self._bar is None:
            if self.mid_line():
                print(file=self.stream)
            for line in self.preamble:
                print(line, file=self.stream)
            self.preamble = []
            self._bar = tqdm(
                total=snap.planned,
                file=self.stream,
                bar_format="flipgate {percentage:3.0f}%|{bar:20}| {desc}",
                leave=True,
                disable=False,
            )
        width = shutil.get_terminal_size((120, 20)).columns - 37  # "flipgate 100%|", the bar, "| "
        self._bar.total = snap.planned
        self._bar.n = snap.answered
        self._bar.set_description_str(text[: max(width, 20)], refresh=False)
        self._bar.refresh()


def display_mode(option: str, fd: int) -> str:
    """``--progress auto``: a bar on a terminal, lines in a log; otherwise the option itself."""
    if option != "auto":
        return option
    return "bar" if os.isatty(fd) else "lines"


def cell_plan(
    cfg: AuditConfig,
    n_override: int | None,
    model_id: str,
    cell: str,
    dataset: str,
    sequential: bool = False,
) -> Plan:
    """A facet or control cell's planned trials (N items x K orderings or replicates); a control
    also measures the facet it is compared with. A ``sequential`` cell's N is its cap: an
    :class:`~flipgate.store.AtMost`."""
    n = cfg.n_items(dataset, n_override, model_id) * cfg.k
    if sequential:
        n = AtMost(n)
    plan = {(model_id, dataset, cell): n}
    plan[model_id, dataset, CellKey.parse(cell).facet] = n
    return plan


def without_images(plan: Plan, text_only: set[str]) -> Plan:
    """``plan`` with 0 trials for the image-facet cells of models known to take no images
    (``Auditor.unmeasurable`` skips them): the first ETA counts only what will run. (A suite
    with image inputs of its own plans them with ``SuiteContext.text_only_models``.)"""
    from flipgate.facets import FACETS

    def takes(model_id: str, dataset: str, cell: str) -> bool:
        if model_id not in text_only:
            return True
        facet = FACETS.get(CellKey.parse(cell).facet)  # None for a suite's own cell
        return facet is None or not facet.needs_images

    return {key: n if takes(*key) else 0 for key, n in plan.items()}
