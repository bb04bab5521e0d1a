"""SQLite connections in WAL mode, safe to share between xdist worker processes."""
from __future__ import annotations

import sqlite3
from pathlib import Path


def connect(path: Path | str, schema: str) -> sqlite3.Connection:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=60, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=60000")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(schema)
    return conn
