"""Content-addressed response cache (SQLite/WAL), shared by xdist workers.

The key is the sha256 of everything that determines an output: the backend's settings (weights
digest, dtype, decoding, ...) and the request (messages, answer prefix, labels; the seed only when
decoding samples). A rerun with a warm cache makes no model calls. An API model's weights are its
identity (flipgate.backends.identity): declared, or what its server says; an endpoint that cannot
say who it is is keyed on the run as well, so its answers are never reused by another run.

The cache only saves calls: every answer is also recorded in the run's trials store. So a cache
that cannot be written or read mid-run (a full disk, a file gone bad) is reported once, as a
:class:`~flipgate.storage.StorageWarning`, and the run goes on without it; a corrupt cache found
when it is opened is one error line naming ``--reset-cache``, which moves it aside.
"""

from __future__ import annotations

import json
import sqlite3
import time
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from flipgate import storage
from flipgate.backends.base import Output, Request
from flipgate.hashing import sha256_bytes, sha256_json

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
    """The cache at ``path``; ``check`` reads every page first (a corrupt file is then one
    :class:`~flipgate.FlipgateError` line instead of a failure in the middle of a run)."""

    def __init__(self, path: Path | str, check: bool = False):
        self.path = Path(path)
        self.conn = storage.connect(storage.CACHE, self.path, SCHEMA)
        if check:
            storage.check(storage.CACHE, self.path, self.conn)
        #: False once a read or write failed: the run goes on without the cache
        self.usable = True

    def _lost(self, exc: Exception, doing: str) -> None:
        """Warn once that the cache failed (its answers stay in the trials store); go on
        without it."""
        if not storage.is_storage_error(exc):
            raise exc
        if self.usable:
            self.usable = False
            warnings.warn(
                f"flipgate: {storage.describe(storage.CACHE, self.path, exc)} (could not {doing} "
                "it; this process goes on without the response cache, every answer is kept in "
                "the run's trials store)",
                storage.StorageWarning,
                stacklevel=3,
            )

    def get_many(self, keys: list[str]) -> dict[str, Output]:
        found: dict[str, Output] = {}
        if not self.usable:
            return found
        try:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, text in self.conn.execute(
                    f"SELECT key, output FROM responses WHERE key IN ({marks})", chunk
                ):
                    try:
                        found[key] = Output.from_dict(json.loads(text))
                    except (ValueError, KeyError, TypeError) as exc:
                        raise sqlite3.DatabaseError(f"entry {key[:12]}: {exc}") from exc
        except Exception as exc:
            self._lost(exc, "read")
            return {}
        return found

    def put_many(self, model_id: str, entries: dict[str, Output]) -> None:
        if not self.usable:
            return
        now = time.time()
        try:
            with self.conn:
                self.conn.executemany(
                    "INSERT OR REPLACE INTO responses (key, model_id, output, created) "
                    "VALUES (?, ?, ?, ?)",
                    [(k, model_id, json.dumps(o.to_dict()), now) for k, o in entries.items()],
                )
        except Exception as exc:
            self._lost(exc, "write")

    @contextmanager
    def claim(self, model_id: str, label: str) -> Iterator[None]:
        """Held while one process computes a call's misses, so another that asks for them waits
        and then finds them cached: one lock per model and call label (different cells run in
        parallel), which leaves no file behind (:func:`flipgate.storage.lock`). Without a usable
        cache there is nothing to share, and no lock."""
        # hashed, since a backend variant's id has a "/" in it
        name = Path(f"{self.path}.{sha256_json([model_id, label])[:16]}.lock")
        with ExitStack() as held:
            if self.usable:
                try:
                    held.enter_context(storage.lock(name))
                except Exception as exc:
                    self._lost(exc, "lock")
            yield

    def __len__(self) -> int:
        return self.conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
