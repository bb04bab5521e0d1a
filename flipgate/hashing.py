"""sha256 helpers for receipts and cache keys."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from flipgate.files import user_cache_dir


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj: Any) -> str:
    return sha256_text(json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str))


def sha256_file(path: Path | str, chunk: int = 1 << 22) -> str:
    """sha256 of a file, memoised in a sidecar keyed by size and mtime (weights are large)."""
    path = Path(path)
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    memo = Path(os.environ.get("FLIPGATE_HASH_MEMO") or user_cache_dir() / "sha256")
    memo_file = memo / sha256_text(str(path.resolve()))
    if memo_file.exists():
        saved_stamp, _, digest = memo_file.read_text().partition(" ")
        if saved_stamp == stamp:
            return digest.strip()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    digest = h.hexdigest()
    try:
        memo.mkdir(parents=True, exist_ok=True)
        memo_file.write_text(f"{stamp} {digest}")
    except OSError:
        pass
    return digest


def sha256_files(paths: list[Path]) -> str:
    """One digest over several files (name + content digest each, sorted by name)."""
    return sha256_json(sorted((p.name, sha256_file(p)) for p in paths))
