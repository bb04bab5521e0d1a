"""Content-addressed response cache (SQLite/WAL), shared by xdist workers.

The key is the sha256 of everything that determines an output: the backend's settings (weights
digest, dtype, decoding, ...) and the request (messages, answer prefix, labels; the seed only when
decoding samples). A rerun with a warm cache makes no model calls.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from flipgate.backends.base import Output, Request
from flipgate.hashing import sha256_bytes, sha256_json
from flipgate.sqlite_util import connect

SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY, model_id TEXT, output TEXT NOT NULL, created REAL NOT NULL
);
"""


def cache_key(
    settings: dict, request: Request, grammar_version: int | None = None, by_seed: bool = False
) -> str:
    """``grammar_version`` (docs/definitions.md §2 permutation grammar) is given by the auditor for
    facet cells (rendered under manifest orderings), so responses cached under an older grammar are
    cold; without it (envelope cells) the key is as before. The request's seed is part of the key
    when decoding samples, and with ``by_seed`` always: the replicates of a same-ordering control
    (docs/definitions.md §3.6) are distinct keys even under greedy decoding."""
    sampled = float(settings.get("temperature") or 0) > 0
    body = {
        "settings": settings,
        "messages": request.messages,
        "prefix": request.answer_prefix,
        "labels": request.labels,
        "seed": request.seed if sampled or by_seed else None,
        "max_new_tokens": request.max_new_tokens,
        "images": [sha256_bytes(im) for im in request.images],
        # replay answers by trial identity, so the identity is part of its key
        "key": request.key if settings.get("backend") == "replay" else None,
    }
    if request.continuations:  # only then: every other key stays as it was
        body["continuations"] = request.continuations
    if request.audios:  # likewise
        body["audios"] = [sha256_bytes(a) for a in request.audios]
    if grammar_version is not None:
        body["grammar_version"] = grammar_version
    if by_seed:
        body["replicate"] = True
    return sha256_json(body)


class ResponseCache:
    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.conn = connect(self.path, SCHEMA)

    def get_many(self, keys: list[str]) -> dict[str, Output]:
        found: dict[str, Output] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, text in self.conn.execute(
                f"SELECT key, output FROM responses WHERE key IN ({marks})", chunk
            ):
                found[key] = Output.from_dict(json.loads(text))
        return found

    def put_many(self, model_id: str, entries: dict[str, Output]) -> None:
        now = time.time()
        with self.conn:
            self.conn.executemany(
                "INSERT OR REPLACE INTO responses (key, model_id, output, created) "
                "VALUES (?, ?, ?, ?)",
                [(k, model_id, json.dumps(o.to_dict()), now) for k, o in entries.items()],
            )

    def __len__(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
