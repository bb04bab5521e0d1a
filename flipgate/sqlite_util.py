"""SQLite connections in WAL mode, safe to share between xdist worker processes."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

#: how long a process waits for another to release the database (seconds)
BUSY_TIMEOUT_S = 60


def connect(path: Path | str, schema: str) -> sqlite3.Connection:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
    _wal(conn)
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(schema)
    return conn


def _wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL unless it is on already. Two workers opening a new file at once can get
    "database is locked" from the switch itself (SQLite does not wait on a journal-mode change), so
    it is retried until the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
