"""The trials store: one SQLite file per run (``reports/runs/<run_id>/trials.sqlite``).

Workers append trials, model fingerprints, manifests and threshold verdicts; the controller reads
them at session end to build cards. Every number in a card is recomputable from this file.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

import pandas as pd

from flipgate import storage
from flipgate.results import TRIAL_COLUMNS, CellSummary, Trial, Verdict

#: the meta key of why a run ended interrupted (TrialStore.record_end)
INTERRUPTED_META = "interrupted"

SCHEMA = """
CREATE TABLE IF NOT EXISTS trials (
    run_id TEXT, model_id TEXT, model_fingerprint TEXT, dataset TEXT, item_id TEXT, facet TEXT,
    condition INTEGER, permutation TEXT, sample INTEGER, prompt_sha256 TEXT, raw_output TEXT,
    readouts TEXT, mapped TEXT, correct TEXT, gold TEXT, n_classes INTEGER, tokens_in INTEGER,
    tokens_out INTEGER, latency_s REAL, cost_usd REAL, from_cache INTEGER,
    PRIMARY KEY (run_id, model_id, dataset, item_id, facet, condition, sample)
);
CREATE TABLE IF NOT EXISTS models (model_id TEXT PRIMARY KEY, fingerprint TEXT, config TEXT);
CREATE TABLE IF NOT EXISTS manifests (facet TEXT, dataset TEXT, k INTEGER, sha256 TEXT, path TEXT,
    PRIMARY KEY (facet, dataset));
CREATE TABLE IF NOT EXISTS screens (facet TEXT, dataset TEXT, excluded INTEGER, considered INTEGER,
    PRIMARY KEY (facet, dataset));
CREATE TABLE IF NOT EXISTS judgements (model_id TEXT, dataset TEXT, facet TEXT, item_id TEXT,
    judge_id TEXT, verdict TEXT, PRIMARY KEY (model_id, dataset, facet, item_id));
CREATE TABLE IF NOT EXISTS verdicts (model_id TEXT, dataset TEXT, facet TEXT, threshold TEXT,
    result TEXT, PRIMARY KEY (model_id, dataset, facet, threshold));
CREATE TABLE IF NOT EXISTS calls (model_id TEXT, source TEXT, requests INTEGER, retries INTEGER,
    timeouts INTEGER, failures INTEGER, PRIMARY KEY (model_id, source));
CREATE TABLE IF NOT EXISTS model_calls (model_id TEXT, source TEXT, prompts INTEGER,
    PRIMARY KEY (model_id, source));
CREATE TABLE IF NOT EXISTS answer_copies (model_id TEXT, source TEXT, copies INTEGER,
    PRIMARY KEY (model_id, source));
CREATE TABLE IF NOT EXISTS planned (model_id TEXT, dataset TEXT, cell TEXT, trials INTEGER,
    PRIMARY KEY (model_id, dataset, cell));
CREATE TABLE IF NOT EXISTS planned_at_most (model_id TEXT, dataset TEXT, cell TEXT,
    PRIMARY KEY (model_id, dataset, cell));
CREATE TABLE IF NOT EXISTS live (source TEXT, model_id TEXT, label TEXT, done INTEGER,
    total INTEGER, started REAL, PRIMARY KEY (source, model_id, label));
CREATE TABLE IF NOT EXISTS waits (source TEXT, model_id TEXT, label TEXT, reason TEXT,
    since REAL, PRIMARY KEY (source, model_id, label));
CREATE TABLE IF NOT EXISTS flights (source TEXT, model_id TEXT, label TEXT, mean REAL,
    PRIMARY KEY (source, model_id, label));
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS suite_records (suite TEXT, model_id TEXT, dataset TEXT, key TEXT,
    record TEXT, PRIMARY KEY (suite, model_id, dataset, key));
CREATE TABLE IF NOT EXISTS comparisons (model_id TEXT, dataset TEXT, cell TEXT, baseline TEXT,
    result TEXT, PRIMARY KEY (model_id, dataset, cell, baseline));
CREATE TABLE IF NOT EXISTS summaries (model_id TEXT, dataset TEXT, cell TEXT, readout TEXT,
    metric TEXT, estimate REAL, lo REAL, hi REAL, n_items INTEGER,
    PRIMARY KEY (model_id, dataset, cell, readout, metric));
CREATE TABLE IF NOT EXISTS cell_summaries (model_id TEXT, dataset TEXT, cell TEXT, readout TEXT,
    summary TEXT, PRIMARY KEY (model_id, dataset, cell, readout));
CREATE TABLE IF NOT EXISTS item_tables (model_id TEXT, dataset TEXT, cell TEXT, items TEXT,
    PRIMARY KEY (model_id, dataset, cell));
"""
CALL_COUNTS = ("requests", "retries", "timeouts", "failures")

_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,62}\Z")


class StoredRecord(Protocol):
    """A suite's typed record (e.g. flipgate.judges.record.JudgeRecord): the store keeps one per
    key in the table the type names, as its JSON, and reads it back through ``from_json``."""

    #: its table in the store
    TABLE: ClassVar[str]
    #: the fields that key a row, ``model_id`` first (each a column of the table)
    KEY: ClassVar[tuple[str, ...]]

    def to_json(self) -> str: ...

    @classmethod
    def from_json(cls, text: str) -> Any: ...


R = TypeVar("R", bound=StoredRecord)


class AtMost(int):
    """A planned count that is an upper bound, not a promise: a sequential cell's cap × K, which
    its stop lowers (docs/definitions.md §12; :meth:`TrialStore.add_planned`)."""


@dataclass(frozen=True)
class AnalysisTable:
    """A suite's table of analyses (JSON data), one per key: e.g. the configuration envelope's,
    one per benchmark (``AnalysisTable("envelope", "dataset")``)."""

    name: str
    #: the key's column
    key: str


def _analysis_table(table: AnalysisTable) -> tuple[str, str]:
    bad = [n for n in (table.name, table.key) if not _IDENTIFIER.match(n)]
    if bad:
        raise ValueError(f"{table}: the table and its key must be identifiers")
    return table.name, table.key


def _record_table(kind: type[StoredRecord]) -> tuple[str, tuple[str, ...]]:
    """The table and key columns of a record type, checked (they become SQL identifiers)."""
    names = (kind.TABLE, *kind.KEY)
    bad = [n for n in names if not _IDENTIFIER.match(n)]
    if bad or kind.KEY[:1] != ("model_id",):
        raise ValueError(f"{kind.__name__}: TABLE and KEY must be identifiers, KEY model_id first")
    return kind.TABLE, kind.KEY


class TrialStore:
    def __init__(self, path: Path | str, conn: sqlite3.Connection | None = None):
        self.path = Path(path)
        self.conn = conn if conn is not None else storage.connect(storage.RUNS, self.path, SCHEMA)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """A transaction; a full disk or an unwritable file is one error line naming the store."""
        with storage.guarded(storage.RUNS, self.path), self.conn:
            yield

    @classmethod
    def read_only(cls, path: Path | str) -> "TrialStore":
        """An existing store opened for reading (a baseline run): nothing is created or written.
        Raises sqlite3.DatabaseError when the file is not a SQLite database."""
        path = Path(path).resolve()
        # without a pending write-ahead log the file is complete: ``immutable`` reads it without
        # creating the -shm / -wal files a WAL database otherwise gets next to it
        flags = "mode=ro" if Path(f"{path}-wal").exists() else "mode=ro&immutable=1"
        conn = sqlite3.connect(f"{path.as_uri()}?{flags}", uri=True, timeout=60)
        conn.execute(
            "SELECT name FROM sqlite_master"
        ).fetchall()  # fails here on a non-database file
        return cls(path, conn)

    def tables(self) -> dict[str, list[str]]:
        """Table name -> column names (to check a foreign file's schema)."""
        names = [
            r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        return {n: [c[1] for c in self.conn.execute(f"PRAGMA table_info('{n}')")] for n in names}

    def add_trials(self, trials: list[Trial]) -> None:
        """Record trials; a trial this run already recorded keeps its first record (a reader that
        waited for another worker to measure a cell, then read it from the cache, must not turn
        the measured trials into cached ones)."""
        marks = ",".join("?" * len(TRIAL_COLUMNS))
        with self.writing():
            self.conn.executemany(
                f"INSERT OR IGNORE INTO trials VALUES ({marks})",
                [[_cell(v) for v in t.model_dump().values()] for t in trials],
            )

    def add_model(self, model_id: str, fingerprint: dict, config: dict) -> None:
        """A model's fingerprint and models.yaml entry, secrets redacted before they are stored
        (:func:`flipgate.redact.redact_fields`: URL credentials, key-like query parameters, fields
        named like secrets such as ``extra_body.api_key``)."""
        from flipgate.redact import redacted_json

        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO models VALUES (?, ?, ?)",
                (
                    model_id,
                    redacted_json(fingerprint, sort_keys=True),
                    redacted_json(config, default=str),
                ),
            )

    def add_calls(self, model_id: str, source: str, counts: dict[str, int]) -> None:
        """API call counts of one process (``source``: "pilot", an xdist worker id, "main"),
        cumulative."""
        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?, ?)",
                (model_id, source, *(int(counts.get(k, 0)) for k in CALL_COUNTS)),
            )

    def calls(self) -> dict[str, dict[str, int]]:
        """Per model: API requests, retried attempts, timed-out attempts and failed calls, over the
        run."""
        rows = self.conn.execute(
            f"SELECT model_id, {', '.join(f'SUM({k})' for k in CALL_COUNTS)} FROM calls "
            "GROUP BY model_id ORDER BY model_id"
        )
        return {m: dict(zip(CALL_COUNTS, map(int, counts))) for m, *counts in rows}

    def add_model_calls(self, model_id: str, source: str, prompts: int) -> None:
        """Prompts one process (``source``) sent to a model, local or API: cache misses of trials,
        judge calls and pilot calls alike; cumulative."""
        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO model_calls VALUES (?, ?, ?)", (model_id, source, prompts)
            )

    def add_answer_copies(self, model_id: str, source: str, copies: int) -> None:
        """Of those prompts, how many the backend answered as copies of an equal input's greedy
        answer without computing them (a same-ordering control's replicates); cumulative."""
        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO answer_copies VALUES (?, ?, ?)", (model_id, source, copies)
            )

    def answer_copies(self) -> dict[str, int]:
        """Per model: prompts answered as copies, not computed (empty for a run before they
        were counted)."""
        if "answer_copies" not in self.tables():
            return {}
        rows = self.conn.execute(
            "SELECT model_id, SUM(copies) FROM answer_copies GROUP BY model_id ORDER BY model_id"
        )
        return {m: int(n or 0) for m, n in rows}

    def model_calls(self) -> dict[str, int]:
        """Per model: prompts a model answered over the run (0 on a warm rerun)."""
        rows = self.conn.execute(
            "SELECT model_id, SUM(prompts) FROM model_calls GROUP BY model_id ORDER BY model_id"
        )
        return {m: int(n or 0) for m, n in rows}

    # -- live progress (flipgate/progress.py) -----------------------------------------------------
    def add_planned(self, plan: dict[tuple[str, str, str], int]) -> None:
        """The trials a process's collection plans per (model, dataset, cell); a cell already
        planned keeps its count (every worker collects the same plan). A count that is an
        :class:`AtMost` (a sequential cell's cap) is marked as an upper bound."""
        with self.writing():
            for key, n in plan.items():
                added = self.conn.execute(
                    "INSERT OR IGNORE INTO planned VALUES (?, ?, ?, ?)", (*key, n)
                )
                if added.rowcount and isinstance(n, AtMost):
                    self.conn.execute("INSERT OR IGNORE INTO planned_at_most VALUES (?, ?, ?)", key)

    def set_planned(
        self, model_id: str, dataset: str, cell: str, trials: int, at_most: bool = False
    ) -> None:
        """A cell's exact plan, once drawn (0: the model cannot take the cell); ``at_most``: an
        upper bound still (a sequential cell before its stop, docs/definitions.md §12)."""
        key = (model_id, dataset, cell)
        with self.writing():
            self.conn.execute("INSERT OR REPLACE INTO planned VALUES (?, ?, ?, ?)", (*key, trials))
            self.conn.execute(
                "INSERT OR IGNORE INTO planned_at_most VALUES (?, ?, ?)"
                if at_most
                else "DELETE FROM planned_at_most WHERE model_id = ? AND dataset = ? AND cell = ?",
                key,
            )

    def set_live(
        self,
        source: str,
        model_id: str,
        label: str,
        done: int | None,
        total: int | None = None,
        started: float | None = None,
        in_flight: float | None = None,
    ) -> None:
        """Outputs a backend call in flight has returned so far, of ``total`` requests, since
        ``started`` (Unix time), and the mean number of its requests in the air (an API
        backend's, when known); ``done`` None when it has ended (its wait is cleared too)."""
        with self.writing():
            if done is None:
                for table in ("live", "waits", "flights"):
                    self.conn.execute(
                        f"DELETE FROM {table} WHERE source = ? AND model_id = ? AND label = ?",
                        (source, model_id, label),
                    )
            else:
                self.conn.execute(
                    "INSERT OR REPLACE INTO live VALUES (?, ?, ?, ?, ?, ?)",
                    (source, model_id, label, done, total, started),
                )
                if in_flight is not None:
                    self.conn.execute(
                        "INSERT OR REPLACE INTO flights VALUES (?, ?, ?, ?)",
                        (source, model_id, label, in_flight),
                    )

    def set_wait(self, source: str, model_id: str, label: str, reason: str, since: float) -> None:
        """What a backend call in flight waits on (the last refusal or timeout) and since when
        (Unix time) none of its requests was answered (``StreamingBackend.complete``'s
        ``on_wait``); cleared with the call's :meth:`set_live`."""
        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO waits VALUES (?, ?, ?, ?, ?)",
                (source, model_id, label, reason, since),
            )

    def add_manifest(self, facet: str, dataset: str, k: int, sha256: str, path: str) -> None:
        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO manifests VALUES (?, ?, ?, ?, ?)",
                (facet, dataset, k, sha256, path),
            )

    def add_screen(self, facet: str, dataset: str, excluded: int, considered: int) -> None:
        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO screens VALUES (?, ?, ?, ?)",
                (facet, dataset, excluded, considered),
            )

    def screens(self, dataset: str) -> dict[str, dict]:
        rows = self.conn.execute(
            "SELECT facet, excluded, considered FROM screens WHERE dataset = ?", (dataset,)
        )
        return {f: {"excluded": e, "considered": c, "kept": c - e} for f, e, c in rows}

    def add_judgements(
        self, model_id: str, dataset: str, facet: str, judge_id: str, verdicts: dict[str, str]
    ) -> None:
        with self.writing():
            self.conn.executemany(
                "INSERT OR REPLACE INTO judgements VALUES (?, ?, ?, ?, ?, ?)",
                [(model_id, dataset, facet, i, judge_id, v) for i, v in verdicts.items()],
            )

    def judgements(self, model_id: str, dataset: str, facet: str) -> dict[str, str]:
        rows = self.conn.execute(
            "SELECT item_id, verdict FROM judgements WHERE model_id = ? AND dataset = ? "
            "AND facet = ?",
            (model_id, dataset, facet),
        )
        return dict(rows.fetchall())

    def add_verdicts(
        self, model_id: str, dataset: str, facet: str, verdicts: list[Verdict]
    ) -> None:
        with self.writing():
            self.conn.executemany(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)",
                [(model_id, dataset, facet, v.threshold, v.to_json()) for v in verdicts],
            )

    def add_analysis(self, table: AnalysisTable, key: str, analysis: dict) -> None:
        """A suite's analysis (JSON data) under ``key`` in its table (created on the first
        write); a rerun of the same key replaces it."""
        name, column = _analysis_table(table)
        with self.writing():
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {name} ({column} TEXT PRIMARY KEY, analysis TEXT)"
            )
            self.conn.execute(
                f"INSERT OR REPLACE INTO {name} VALUES (?, ?)", (key, json.dumps(analysis))
            )

    def analysis(self, table: AnalysisTable, key: str) -> dict | None:
        """The analysis :meth:`add_analysis` stored under ``key``; None when there is none."""
        name, column = _analysis_table(table)
        if not self._has_table(name):
            return None
        row = self.conn.execute(
            f"SELECT analysis FROM {name} WHERE {column} = ?", (key,)
        ).fetchone()
        return json.loads(row[0]) if row else None

    def add_record(self, record: StoredRecord) -> None:
        """A suite's typed record, one row of its own table (``TABLE``, created on the first
        write), keyed by its ``KEY`` fields: a rerun of the same key replaces it."""
        table, key = _record_table(type(record))
        with self.writing():
            self.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(f'{k} TEXT' for k in key)}, "
                f"record TEXT, PRIMARY KEY ({', '.join(key)}))"
            )
            self.conn.execute(
                f"INSERT OR REPLACE INTO {table} VALUES ({', '.join('?' * (len(key) + 1))})",
                (*(getattr(record, k) for k in key), record.to_json()),
            )

    def records(self, kind: type[R], model_id: str | None = None) -> list[R]:
        """Every record of type ``kind`` (of ``model_id``), in key order; none when this store
        holds none (its table was never written)."""
        table, key = _record_table(kind)
        if not self._has_table(table):
            return []
        rows = self.conn.execute(
            f"SELECT record FROM {table} WHERE ? IS NULL OR model_id = ? ORDER BY {', '.join(key)}",
            (model_id, model_id),
        )
        return [kind.from_json(r[0]) for r in rows]

    def _has_table(self, table: str) -> bool:
        return (
            self.conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            ).fetchone()
            is not None
        )

    def answered(self) -> dict[str, tuple[int, int]]:
        """Per model: (trials a model answered, trials the response cache answered)."""
        rows = self.conn.execute(
            "SELECT model_id, SUM(from_cache = 0), SUM(from_cache = 1) FROM trials "
            "GROUP BY model_id ORDER BY model_id"
        )
        return {m: (int(a or 0), int(c or 0)) for m, a, c in rows}

    def add_suite_record(
        self, suite: str, model_id: str, dataset: str, record: dict, key: str = ""
    ) -> None:
        """A result of a suite another package registered (flipgate.suite.api), as JSON data:
        one per (suite, model, dataset, ``key``), a rerun replacing it."""
        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO suite_records VALUES (?, ?, ?, ?, ?)",
                (suite, model_id, dataset, key, json.dumps(record)),
            )

    def suite_records(
        self, suite: str, model_id: str | None = None, dataset: str | None = None
    ) -> list[dict]:
        """The records :meth:`add_suite_record` stored for ``suite`` (of one model and dataset
        when given), in key order; none from a store written before suites could add records."""
        if not self._has_table("suite_records"):
            return []
        rows = self.conn.execute(
            "SELECT record FROM suite_records WHERE suite = ? AND model_id = COALESCE(?, model_id) "
            "AND dataset = COALESCE(?, dataset) ORDER BY model_id, dataset, key",
            (suite, model_id, dataset),
        )
        return [json.loads(r[0]) for r in rows]

    def set_meta(self, values: dict) -> None:
        """Run identity (run id, git commit, date, seed, K, grammar version): what a later run that
        names this one as its baseline checks and discloses (docs/definitions.md §11)."""
        with self.writing():
            self.conn.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in values.items()],
            )

    def meta(self) -> dict:
        return {k: json.loads(v) for k, v in self.conn.execute("SELECT key, value FROM meta")}

    def record_end(self, finished: str, exit_status: int, interrupted: str | None) -> None:
        """How the run ended: when (``finished``), its exit status (flipgate.exitcodes) and, for
        a run that ended interrupted, why (``interrupted``: the signal, SIGINT or SIGTERM, or
        another stop); a run with no ``finished`` never ended (killed), and ``flipgate baseline``
        promotes neither (flipgate.regression.cli)."""
        self.set_meta({"finished": finished, "exit_status": int(exit_status)})
        with self.writing():
            if interrupted is None:
                self.conn.execute("DELETE FROM meta WHERE key = ?", (INTERRUPTED_META,))
            else:
                self.conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    (INTERRUPTED_META, json.dumps(interrupted)),
                )

    def interruption(self) -> str | None:
        """Why the run ended interrupted (:meth:`record_end`), None for a run that was not (or has
        not ended)."""
        row = self.conn.execute(
            "SELECT value FROM meta WHERE key = ?", (INTERRUPTED_META,)
        ).fetchone()
        return None if row is None else str(json.loads(row[0]))

    def add_comparison(
        self, model_id: str, dataset: str, cell: str, baseline: str, result: dict
    ) -> None:
        """A paired comparison of ``model_id`` against ``baseline`` on one cell
        (docs/definitions.md §11)."""
        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO comparisons VALUES (?, ?, ?, ?, ?)",
                (model_id, dataset, cell, baseline, json.dumps(result)),
            )

    def comparisons(self, model_id: str | None = None) -> list[dict]:
        rows = self.conn.execute(
            "SELECT result FROM comparisons WHERE ? IS NULL OR model_id = ? "
            "ORDER BY model_id, dataset, cell, baseline",
            (model_id, model_id),
        )
        return [json.loads(r[0]) for r in rows]

    def add_summaries(
        self, model_id: str, dataset: str, cell: str, summaries: dict[str, CellSummary]
    ) -> None:
        """A cell's summary per readout, as its test computed it: whole (what cards and Allure
        show, :meth:`cell_summaries`) and one row per ``{estimate, ci}`` metric, which later runs
        read to plot each metric's trend across runs (:mod:`flipgate.trend`)."""
        rows = [
            (
                model_id,
                dataset,
                cell,
                readout,
                metric,
                _num(v.estimate),
                *(_num(x) for x in v.ci or (None, None)),
                s.n_items,
            )
            for readout, s in summaries.items()
            for metric, v in s.metrics.items()
        ]
        whole = [
            (model_id, dataset, cell, readout, s.to_json()) for readout, s in summaries.items()
        ]
        with self.writing():
            self.conn.executemany(
                "INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            self.conn.executemany(
                "INSERT OR REPLACE INTO cell_summaries VALUES (?, ?, ?, ?, ?)", whole
            )

    def cell_summaries(self, model_id: str, dataset: str) -> dict[str, dict[str, CellSummary]]:
        """cell -> readout -> summary, as the cells' tests stored them (:meth:`add_summaries`)."""
        out: dict[str, dict[str, CellSummary]] = {}
        rows = self.conn.execute(
            "SELECT cell, readout, summary FROM cell_summaries WHERE model_id = ? AND dataset = ?",
            (model_id, dataset),
        )
        for cell, readout, summary in rows:
            out.setdefault(cell, {})[readout] = CellSummary.from_json(summary)
        return out

    def add_item_table(self, model_id: str, dataset: str, cell: str, items: pd.DataFrame) -> None:
        """A cell's per-item table (one row per item, ``<readout>:<column>`` columns), as its test
        computed it and attached it to the Allure result."""
        with self.writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO item_tables VALUES (?, ?, ?, ?)",
                (model_id, dataset, cell, json.dumps(items.to_dict(orient="split", index=False))),
            )

    def item_table(self, model_id: str, dataset: str, cell: str) -> pd.DataFrame | None:
        """The per-item table :meth:`add_item_table` stored, or None."""
        row = self.conn.execute(
            "SELECT items FROM item_tables WHERE model_id = ? AND dataset = ? AND cell = ?",
            (model_id, dataset, cell),
        ).fetchone()
        if row is None:
            return None
        table = json.loads(row[0])
        return pd.DataFrame(table["data"], columns=table["columns"])

    def summaries(self, model_id: str, dataset: str, cell: str) -> dict[str, dict]:
        """readout -> {metric: {estimate, ci}, "n_items": N}, as :meth:`add_summaries` stored them
        (a NaN is read back as None)."""
        out: dict[str, dict] = {}
        rows = self.conn.execute(
            "SELECT readout, metric, estimate, lo, hi, n_items FROM summaries WHERE model_id = ? "
            "AND dataset = ? AND cell = ? ORDER BY readout, metric",
            (model_id, dataset, cell),
        )
        for readout, metric, est, lo, hi, n in rows:
            block = out.setdefault(readout, {"n_items": n})
            block[metric] = {"estimate": est, "ci": None if lo is None and hi is None else [lo, hi]}
        return out

    def trials(self, **where) -> pd.DataFrame:
        clause = " AND ".join(f"{k} = ?" for k in where) or "1"
        df = pd.read_sql_query(
            f"SELECT * FROM trials WHERE {clause}", self.conn, params=list(where.values())
        )
        for col in ("permutation", "readouts", "mapped", "correct"):
            df[col] = df[col].map(json.loads)
        return df

    def models(self) -> dict[str, dict]:
        return {
            m: {"fingerprint": json.loads(f), "config": json.loads(c)}
            for m, f, c in self.conn.execute("SELECT model_id, fingerprint, config FROM models")
        }

    def manifests(self) -> dict[tuple[str, str], dict]:
        return {
            (f, d): {"k": k, "sha256": s, "path": p}
            for f, d, k, s, p in self.conn.execute("SELECT * FROM manifests")
        }

    def all_verdicts(self) -> list[tuple[str, str, Verdict]]:
        """(model_id, dataset, verdict) for every gated threshold of the run."""
        rows = self.conn.execute(
            "SELECT model_id, dataset, result FROM verdicts ORDER BY model_id, dataset, facet, "
            "threshold"
        )
        return [(m, d, Verdict.from_json(r)) for m, d, r in rows]

    def adjust_q_values(self) -> list[float]:
        """Benjamini–Hochberg q-values over every stored verdict with a p-value (the run's gated
        thresholds), computed once all cells have run and written into each verdict (None where
        a verdict has no p-value); returns them."""
        from flipgate.metrics import benjamini_hochberg

        rows = [
            (i, Verdict.from_json(r))
            for i, r in self.conn.execute(
                "SELECT rowid, result FROM verdicts ORDER BY model_id, dataset, facet, threshold"
            )
        ]
        tested = [(i, v.p_value) for i, v in rows if v.p_value is not None]
        q = dict(zip((i for i, _ in tested), benjamini_hochberg([p for _, p in tested])))
        with self.writing():
            self.conn.executemany(
                "UPDATE verdicts SET result = ? WHERE rowid = ?",
                [(v.with_context(q_value=q.get(i)).to_json(), i) for i, v in rows],
            )
        return list(q.values())

    def verdicts(self, model_id: str, dataset: str) -> list[Verdict]:
        rows = self.conn.execute(
            "SELECT result FROM verdicts WHERE model_id = ? AND dataset = ? "
            "ORDER BY facet, threshold",
            (model_id, dataset),
        )
        return [Verdict.from_json(r[0]) for r in rows]


def _num(value) -> float | None:
    """A metric value as a plain float; None for a missing or NaN one."""
    if value is None:
        return None
    value = float(value)
    return None if value != value else value


def _cell(value):
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value)
    return value


def export_replay(store: TrialStore, out: Path | str, model_id: str) -> int:
    """Write a model's trials as a replay JSONL (see :mod:`flipgate.backends.replay`)."""
    df = store.trials(model_id=model_id)
    with open(out, "w") as f:
        for r in df.itertuples():
            raw = json.loads(r.raw_output)
            f.write(
                json.dumps(
                    {
                        "dataset": r.dataset,
                        "item_id": r.item_id,
                        "facet": r.facet,
                        "condition": int(r.condition),
                        "sample": int(r.sample),
                        "prompt_sha256": r.prompt_sha256,  # the replay serves this prompt only
                        **raw,
                    }
                )
                + "\n"
            )
    return len(df)
