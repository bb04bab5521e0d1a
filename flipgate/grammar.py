"""Permutation grammar and manifests (SPEC §2, FP §3 "Permutation grammar").

K orderings per (item, facet); ordering 0 is canonical; the rest are drawn without replacement
from the non-canonical permutations when n! >= K, else all unique permutations are cycled.
Seeds come from sha256, never Python's ``hash()``, so manifests are stable across processes.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock

GLOBAL_SEED = 42
DEFAULT_K = 6


def item_seed(item_id: str, n: int, k: int, seed: int = GLOBAL_SEED) -> int:
    """SPEC §2 seed: first 4 bytes (big endian) of sha256(seed␟item_id␟n␟K)."""
    text = f"{seed}\x1f{item_id}\x1f{n}\x1f{k}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big")


def _unrank(index: int, n: int) -> tuple[int, ...]:
    """The ``index``-th permutation of range(n) in lexicographic order."""
    pool = list(range(n))
    out = []
    for pos in range(n, 0, -1):
        block = math.factorial(pos - 1)
        q, index = divmod(index, block)
        out.append(pool.pop(q))
    return tuple(out)


def orderings(item_id: str, n: int, k: int = DEFAULT_K, seed: int = GLOBAL_SEED) -> list[tuple[int, ...]]:
    """The K orderings of ``n`` units for one item; ordering[o][slot] = source unit index."""
    if n < 1:
        raise ValueError(f"cannot permute {n} units (item {item_id!r})")
    if k < 1:
        raise ValueError(f"K must be >= 1, got {k}")
    canonical = tuple(range(n))
    total = math.factorial(n)
    if total < k:
        unique = list(itertools.permutations(range(n)))  # lexicographic, canonical first
        return [unique[i % total] for i in range(k)]
    rng = random.Random(item_seed(item_id, n, k, seed))
    # rank 0 is the canonical permutation; sample ranks 1..n!-1 without replacement
    ranks = rng.sample(range(1, total), k - 1)
    return [canonical] + [_unrank(r, n) for r in ranks]


def inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    """inv[source] = slot, for perm[slot] = source."""
    inv = [0] * len(perm)
    for slot, source in enumerate(perm):
        inv[source] = slot
    return tuple(inv)


@dataclass
class Manifest:
    """Orderings for every item of one (facet, dataset), fixed before inference."""

    facet: str
    dataset: str
    k: int
    seed: int
    entries: dict[str, list[tuple[int, ...]]] = field(default_factory=dict)

    @classmethod
    def build(cls, facet: str, dataset: str, units: dict[str, int], k: int = DEFAULT_K,
              seed: int = GLOBAL_SEED) -> "Manifest":
        """``units`` maps item_id -> number of permutable units."""
        entries = {iid: orderings(iid, n, k, seed) for iid, n in sorted(units.items())}
        return cls(facet, dataset, k, seed, entries)

    def to_json(self) -> str:
        body = {"facet": self.facet, "dataset": self.dataset, "k": self.k, "seed": self.seed,
                "entries": {iid: [list(p) for p in perms] for iid, perms in self.entries.items()}}
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        body = json.loads(text)
        entries = {iid: [tuple(p) for p in perms] for iid, perms in body["entries"].items()}
        return cls(body["facet"], body["dataset"], body["k"], body["seed"], entries)

    def path_in(self, directory: Path) -> Path:
        return Path(directory) / f"{self.facet}__{self.dataset}__k{self.k}__s{self.seed}.json"

    def save(self, directory: Path) -> Path:
        """Write (or verify) the manifest; an existing file with other content is an error,
        because manifests are replayed unchanged for every model."""
        path = self.path_in(directory)
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            return self._save_locked(path)

    def _save_locked(self, path: Path) -> Path:
        text = self.to_json()
        if path.exists():
            old = Manifest.from_json(path.read_text())
            if old.entries.items() >= self.entries.items():
                return path
            merged = dict(old.entries)
            for iid, perms in self.entries.items():
                if iid in merged and merged[iid] != perms:
                    raise ValueError(f"{path}: stored orderings for item {iid!r} differ from the grammar's")
                merged[iid] = perms
            text = Manifest(self.facet, self.dataset, self.k, self.seed, merged).to_json()
        tmp = path.with_suffix(f".tmp{random.getrandbits(32)}")
        tmp.write_text(text)
        tmp.replace(path)
        return path
