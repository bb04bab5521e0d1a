"""A run named as a baseline or candidate (``reports/runs/<run_id>`` or its ``trials.sqlite``),
opened read-only and checked before anything is compared: a missing, corrupt or foreign file, or
a run drawn under another permutation grammar or seed, is one clean error and nothing is written
(docs/definitions.md §11). A run that did not finish says so (:attr:`RunRecord.unfinished`), so
that what it never recorded is not mistaken for a pass or for another grammar."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from flipgate import FlipgateError, storage
from flipgate.backends.floor import NOT_MEASURED_FLOOR
from flipgate.cell import CellKey
from flipgate.exitcodes import BUDGET_REFUSED, INTERNAL_ERROR, INTERRUPTED, MEANING, NO_TESTS
from flipgate.facets import FACETS, readouts_for
from flipgate.gate.sequential import SequentialStop
from flipgate.grammar import GRAMMAR_VERSION, Manifest
from flipgate.regression.compare import Arm
from flipgate.store import INTERRUPTED_META, TRIAL_COLUMNS, TrialStore

STORE_NAME = "trials.sqlite"
#: the UTC start time a run id begins with (flipgate.session.new_run_id)
RUN_ID_STAMP = "%Y%m%dT%H%M%SZ"
#: tables (and their columns) a trials store must have to be compared
REQUIRED = {
    "trials": TRIAL_COLUMNS,
    "models": ["model_id", "fingerprint", "config"],
    "manifests": ["facet", "dataset", "k", "sha256", "path"],
}
#: exit statuses of a run that ended before its plan was done (its cells may be partial or absent)
CUT_SHORT = (INTERRUPTED, INTERNAL_ERROR, NO_TESTS, BUDGET_REFUSED)


def store_path(path: Path | str, role: str = "baseline") -> Path:
    """The trials store of a run directory, or ``path`` itself when it is the store file; errors
    name the path's ``role`` ("baseline", "candidate", ...)."""
    path = Path(path)
    if path.is_dir():
        path = path / STORE_NAME
    if not path.is_file():
        where = (
            "run directory has no " + STORE_NAME
            if path.name == STORE_NAME and path.parent.is_dir()
            else "no such run directory or trials store"
        )
        raise FlipgateError(
            f"{role} {path}: {where} (give reports/runs/<run_id> or its {STORE_NAME})"
        )
    return path


def recorded_start(store: Path) -> dt.datetime | None:
    """When the run whose trials store is ``store`` started: the UTC time its recorded run id
    begins with (the store's meta, else its trials), not its folder's name; None when the store
    records no run id that starts with one. An unreadable store is a FlipgateError."""
    try:
        conn = TrialStore.read_only(store).conn
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            row = None
            if "meta" in tables:
                row = conn.execute("SELECT value FROM meta WHERE key = 'run_id'").fetchone()
                row = (json.loads(row[0]),) if row else None
            if row is None and "trials" in tables:
                row = conn.execute("SELECT run_id FROM trials LIMIT 1").fetchone()
        finally:
            conn.close()
    except (sqlite3.DatabaseError, ValueError) as exc:
        raise FlipgateError(
            f"run {store}: unreadable, so when it started is unknown ({exc}); name the run to "
            "promote, or move this one out of --runs-dir"
        ) from None
    run_id = row[0] if row else None
    try:
        stamp = str(run_id).split("-", 1)[0]
        return dt.datetime.strptime(stamp, RUN_ID_STAMP).replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def _place(role: str) -> storage.Place:
    """How storage errors name a recorded run in ``role`` ("baseline", "candidate", ...)."""
    return storage.Place(
        role,
        f"the {role} path" if role != "baseline" else "--baseline",
        f"the file is damaged: give another run"
        f"{' with --baseline' if role == 'baseline' else ''}, or run it again to record a new one",
    )


@dataclass
class RunRecord:
    """A run's trials store, read-only: its identity, how it ended, its models, manifests and cell
    trials."""

    path: Path
    store: TrialStore
    #: how errors name the run ("baseline", "candidate", ...)
    role: str = "baseline"

    @classmethod
    def open(cls, path: Path | str, role: str = "baseline") -> "RunRecord":
        file = store_path(path, role)
        try:
            store = TrialStore.read_only(file)
            tables = store.tables()
        except sqlite3.DatabaseError as exc:
            raise FlipgateError(
                f"{role} {file}: not a flipgate trials store (SQLite says: {exc})"
            ) from None
        storage.check(_place(role), file, store.conn)  # a damaged page fails here, not in a cell
        for table, columns in REQUIRED.items():
            missing = [c for c in columns if c not in tables.get(table, [])]
            if missing:
                raise FlipgateError(
                    f"{role} {file}: not a flipgate trials store (table {table!r} "
                    f"{'lacks columns ' + ', '.join(missing) if table in tables else 'is missing'})"
                )
        record = cls(file, store, role)
        if not record.models:
            raise FlipgateError(
                f"{role} {file}: the run recorded no model (was it interrupted before any trial?)"
            )
        return record

    @cached_property
    def meta(self) -> dict:
        """Run identity written at the run's end (empty for a run that never ended, and for runs
        made before flipgate recorded it)."""
        return self.store.meta() if "meta" in self.tables else {}

    @cached_property
    def tables(self) -> set[str]:
        return set(self.store.tables())

    @property
    def run_id(self) -> str:
        return self.meta.get("run_id") or self.path.parent.name

    @cached_property
    def n_trials(self) -> int:
        return int(self.store.conn.execute("SELECT COUNT(*) FROM trials").fetchone()[0])

    @cached_property
    def unfinished(self) -> str | None:
        """Why the run may hold fewer trials than it planned, None for a run whose end is recorded
        as complete (TrialStore.record_end): it has no end (killed, still running, or made before
        flipgate recorded one), was interrupted, crashed, or collected nothing."""
        meta = self.meta
        if "finished" not in meta:
            return (
                "has not finished (still running, or killed before its end)"
                if "meta" in self.tables
                else "records no end (made before flipgate recorded one)"
            )
        status = meta.get("exit_status")
        if meta.get(INTERRUPTED_META) is not None:  # its cards are partial (flipgate.interrupts)
            return f"was interrupted ({meta[INTERRUPTED_META]}; exit status {status})"
        if status in CUT_SHORT:
            return f"ended with exit status {status} ({MEANING[status]})"
        return None

    @property
    def holding(self) -> str:
        """What the run recorded, against its plan where it recorded one (the ``planned`` table of
        live progress): ``holds 48 of 96 planned trials``."""
        n = f"{self.n_trials} trial{'s' * (self.n_trials != 1)}"
        if "planned" not in self.tables:
            return f"holds {n}"
        planned = self.store.conn.execute("SELECT SUM(trials) FROM planned").fetchone()[0]
        if not planned or planned < self.n_trials:
            return f"holds {n}"
        at_most = (
            "planned_at_most" in self.tables
            and self.store.conn.execute("SELECT 1 FROM planned_at_most LIMIT 1").fetchone()
        )
        bound = (
            "at most " if at_most else ""
        )  # a sequential cell's cap, not yet lowered by its stop
        return f"holds {self.n_trials} of {bound}{planned} planned trials"

    def describe_end(self) -> str:
        """One clause naming the run, where it is and how it ended, for an error or a note:
        ``candidate runs/x/trials.sqlite: run x has not finished (...) and holds 8 of 16 planned
        trials``."""
        return f"{self.role} {self.path}: run {self.run_id} {self.unfinished} and {self.holding}"

    def planned(self, model_id: str, cell: str, dataset: str) -> bool:
        """Whether the run planned trials of ``model_id`` in ``cell`` × ``dataset`` (its
        ``planned`` table; False for a store without one)."""
        if "planned" not in self.tables:
            return False
        row = self.store.conn.execute(
            "SELECT trials FROM planned WHERE model_id = ? AND dataset = ? AND cell = ?",
            (model_id, dataset, cell),
        ).fetchone()
        return bool(row and row[0])

    def n_items(self, model_id: str, cell: str, dataset: str) -> int:
        """The items ``model_id`` has trials of in ``cell`` × ``dataset``."""
        return int(
            self.store.conn.execute(
                "SELECT COUNT(DISTINCT item_id) FROM trials WHERE model_id = ? AND facet = ? AND "
                "dataset = ?",
                (model_id, cell, dataset),
            ).fetchone()[0]
        )

    @cached_property
    def models(self) -> dict[str, dict]:
        return self.store.models()

    @cached_property
    def manifests(self) -> dict[tuple[str, str], dict]:
        return self.store.manifests()

    @cached_property
    def cells(self) -> set[tuple[str, str, str]]:
        """(model, facet or control cell, dataset) triples that have trials."""
        rows = self.store.conn.execute("SELECT DISTINCT model_id, facet, dataset FROM trials")
        return {tuple(r) for r in rows}

    def trials(self, model_id: str, dataset: str, cell: str) -> pd.DataFrame:
        try:
            return storage.call(
                _place(self.role),
                self.path,
                lambda: self.store.trials(model_id=model_id, dataset=dataset, facet=cell),
            )
        except (ValueError, TypeError) as exc:  # a row that is not JSON where JSON was stored
            raise storage.error(
                _place(self.role), self.path, sqlite3.DatabaseError(f"unreadable trial: {exc}")
            ) from None

    def identity(self, model_id: str) -> dict:
        """What a regression section discloses about the baseline (docs/definitions.md §11, issue:
        model id, weights sha256, run id, git commit, date)."""
        fp = self.models.get(model_id, {}).get("fingerprint", {})
        return {
            "model_id": model_id,
            "weights_sha256": fp.get("weights_sha256"),
            "run_id": self.run_id,
            "git_commit": self.meta.get("git_commit"),
            "date": self.meta.get("created"),
            "trials_store": str(self.path),
        }

    def check_grammar(self, seed: int, allow_unfinished: bool = False) -> None:
        """Refuse a run whose orderings were drawn under another grammar version or seed: none of
        its cells could be paired with ours. Runs without recorded metadata are checked by redrawing
        their manifests from their own items; an unfinished one may hold only some of a manifest's
        items, so a redraw that differs is blamed on that, never on a grammar, and with
        ``allow_unfinished`` it is not redrawn (each cell's manifest sha256 is compared instead)."""
        version, their_seed = self.meta.get("grammar_version"), self.meta.get("seed")
        if version is not None or their_seed is not None:
            if (version, their_seed) != (GRAMMAR_VERSION, seed):
                raise FlipgateError(
                    f"baseline {self.path}: run {self.run_id} drew its orderings under grammar "
                    f"version {version} "
                    f"with seed {their_seed}; this audit uses grammar version {GRAMMAR_VERSION} "
                    f"with seed {seed}, "
                    f"so no cell pairs up (re-run the baseline with this flipgate and seed)"
                )
            return
        if allow_unfinished and self.unfinished:
            return
        for (facet, dataset), manifest in sorted(self.manifests.items()):
            units = self.store.conn.execute(
                "SELECT item_id, permutation FROM trials WHERE facet = ? AND dataset = ? AND "
                "condition = 0 "
                "GROUP BY item_id",
                (facet, dataset),
            ).fetchall()
            if not units:
                continue
            redrawn = Manifest.build(
                facet, dataset, {i: len(json.loads(p)) for i, p in units}, manifest["k"], seed
            )
            if redrawn.sha256 != manifest["sha256"] and self.unfinished:
                raise FlipgateError(
                    f"{self.describe_end()}: its {facet} × {dataset} manifest cannot be "
                    "redrawn from the items it holds, and it records no grammar version or seed "
                    "to check instead; name a finished run"
                )
            if redrawn.sha256 != manifest["sha256"]:
                raise FlipgateError(
                    f"baseline {self.path}: run {self.run_id} records no grammar version, and its "
                    f"{facet} × {dataset} "
                    f"orderings are not those of grammar version {GRAMMAR_VERSION} with seed "
                    f"{seed} (manifest "
                    f"{manifest['sha256'][:12]}, redrawn {redrawn.sha256[:12]}): it was drawn "
                    "under another grammar "
                    f"or seed; re-run the baseline with this flipgate"
                )

    def arm(self, model_id: str, cell: str, dataset: str) -> Arm | None:
        """The recorded side of a cell for :func:`~flipgate.regression.compare.compare_cell`, or
        None when the run has no trials of it."""
        trials = self.trials(model_id, dataset, cell)
        if trials.empty:
            return None
        facet = CellKey.parse(cell).facet
        config = self.models.get(model_id, {}).get("config", {})
        readouts = config.get("readouts") or sorted({r for rs in trials["readouts"] for r in rs})
        readouts = readouts_for(facet, readouts, config.get("primary_readout", readouts[0]))[0]
        perm = self.trials(model_id, dataset, facet) if cell != facet else None
        manifest = self.manifests.get((facet, dataset), {}).get("sha256")
        sequential = any(
            (stop.dataset, stop.cell) == (dataset, cell)
            for stop in self.store.records(SequentialStop, model_id)
        )
        return Arm(model_id, trials, tuple(readouts), manifest, perm, sequential)

    def floor_not_measured(self, model_id: str, cell: str, dataset: str) -> bool:
        """Whether ``model_id``'s control ``cell`` on ``dataset`` was recorded with a floor of 0
        by construction (its backend copied the replicates, docs/definitions.md §12.5)."""
        if "cell_summaries" not in self.store.tables():
            return False
        summaries = self.store.cell_summaries(model_id, dataset).get(cell, {})
        return any(s.floor == NOT_MEASURED_FLOOR for s in summaries.values())

    def planned_pairs(self, model_id: str, cell: str, dataset: str, baseline: Arm) -> int | None:
        """The pairs this run's sequential facet cell was held for by its regression case
        (flipgate.regression.hold), as the case in the run decided: None for a fixed-N cell or
        a control."""
        if CellKey.parse(cell).is_control:
            return None
        for stop in self.store.records(SequentialStop, model_id):
            if (stop.dataset, stop.cell) == (dataset, cell):
                return planned_pairs(stop.cap, int(baseline.trials["item_id"].nunique()))
        return None

    def primary_readout(self, model_id: str, cell: str) -> str:
        config = self.models.get(model_id, {}).get("config") or {}
        if not config.get("readouts") or not config.get("primary_readout"):
            raise FlipgateError(
                f"{self.role} {self.path}: model {model_id!r} has no readouts / primary_readout in "
                f"its stored config"
            )
        facet = CellKey.parse(cell).facet
        return readouts_for(facet, config["readouts"], config["primary_readout"])[1]

    def order_cells(self, model_id: str) -> list[tuple[str, str]]:
        """(facet or control cell, dataset) of every order cell the run measured for
        ``model_id``."""
        return sorted(
            (c, d) for m, c, d in self.cells if m == model_id and CellKey.parse(c).facet in FACETS
        )


def planned_pairs(candidate_cap: int, baseline_items: int) -> int:
    """The pairs a regression case of a sequential candidate is tested on: the items its
    baseline drew, at most the candidate's cap."""
    return min(candidate_cap, baseline_items)
