"""Replayed analyses: a deterministic analysis (the ODI fits, seeded MCMC) is stored under the
sha256 of everything that determines it — its input table, settings, the source of the code that
computes it and the versions of the libraries it runs on — so a rerun on the same trials reads it
back instead of refitting (a warm rerun makes no model calls and no fits). JSON files beside the
response cache; ``--no-cache`` turns it off with the response cache."""

from __future__ import annotations

import json
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from flipgate import storage
from flipgate.files import atomic_write
from flipgate.hashing import sha256_json, sha256_text

PLACE = storage.Place("analysis cache", "--cache-dir", "delete it: the analysis is refitted")


def package_versions(names: list[str]) -> dict[str, str | None]:
    """Installed version of each distribution (None when it is not installed)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def source_sha256(package_dir: Path) -> str:
    """One digest over the Python sources of a package folder (name and text of each file)."""
    files = sorted(package_dir.glob("*.py"))
    return sha256_json([(p.name, sha256_text(p.read_text(encoding="utf-8"))) for p in files])


def table_sha256(frame: pd.DataFrame) -> str:
    """A digest of a table's rows and columns (dict-valued cells included)."""
    return sha256_text(frame.to_json(orient="split", index=False, default_handler=str))


def analysis_key(kind: str, inputs: dict[str, Any], code: Path, libraries: list[str]) -> str:
    """The key of analysis ``kind`` of ``inputs``, computed by the code in folder ``code``."""
    return sha256_json(
        {
            "kind": kind,
            "inputs": inputs,
            "code": source_sha256(code),
            "libraries": package_versions(libraries),
        }
    )


class AnalysisCache:
    """``get``/``put`` JSON results by key in ``folder`` (None: a cache that never holds)."""

    def __init__(self, folder: Path | None):
        self.folder = folder

    def get(self, key: str) -> dict[str, Any] | None:
        if self.folder is None:
            return None
        path = self.folder / f"{key}.json"
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent, unreadable, or not JSON (a torn write): compute it again
        return value if isinstance(value, dict) else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        """Store a result; a folder that cannot be written (a full disk) is warned about once and
        the cache is off for the rest of this process (the result is recomputed next time)."""
        if self.folder is None:
            return
        path = self.folder / f"{key}.json"
        try:
            atomic_write(path, json.dumps(value, allow_nan=True))
        except OSError as exc:
            self.folder = None
            warnings.warn(
                f"flipgate: {storage.describe(PLACE, path, exc)} (this process goes on without "
                "the analysis cache)",
                storage.StorageWarning,
                stacklevel=2,
            )
