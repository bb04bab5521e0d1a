"""Permutation grammar and manifests (docs/definitions.md §2; Facet-Probe §3 "Permutation
grammar").

K orderings per (item, facet); ordering 0 is canonical; the rest are drawn without replacement
from the non-canonical permutations when n! >= K, else all unique permutations are cycled.
Seeds come from sha256, never Python's ``hash()``, so manifests are stable across processes.
The draw reproduces Facet-Probe's public release step by step (see :func:`orderings`), so its
manifests and ours agree item by item.

``GRAMMAR_VERSION`` numbers the draw. Version 1 (manifests without a ``grammar_version`` field)
sampled permutation ranks with ``rng.sample``; version 2 is Facet-Probe's draw. The version is
written into every manifest (so it is part of the manifest sha256) and into the response-cache
key of permuted trials (``flipgate.cache.cache_key``), so caches filled under version 1 are cold.
A manifest file on disk with another or a missing grammar version is **regenerated** (overwritten,
with a warning naming the file) rather than merged or refused: a manifest is a pure function of
(item ids, unit counts, K, seed, grammar), an old file cannot be replayed under the new grammar
anyway, and a user with an old ``fixtures/manifests/`` directory should not have to delete files
by hand. Nothing mixes: the old orderings' cached answers sit under other cache keys.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from flipgate import FlipgateError, storage
from flipgate.files import atomic_write

GLOBAL_SEED = 42
DEFAULT_K = 6
GRAMMAR_VERSION = 2  # 1: rng.sample over ranks (no field in the manifest); 2: Facet-Probe's draw
_EXHAUSTIVE_MAX_N = 7  # up to this n the pool is every permutation; above it, repeated shuffles

log = logging.getLogger("flipgate")


def item_seed(item_id: str, n: int, k: int, seed: int = GLOBAL_SEED) -> int:
    """docs/definitions.md §2 seed: first 4 bytes (big endian) of sha256(seed␟item_id␟n␟K)."""
    text = f"{seed}\x1f{item_id}\x1f{n}\x1f{k}"
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:4], "big")


def orderings(
    item_id: str, n: int, k: int = DEFAULT_K, seed: int = GLOBAL_SEED
) -> list[tuple[int, ...]]:
    """The K orderings of ``n`` units for one item; ordering[o][slot] = source unit index.

    Facet-Probe's draw (docs/definitions.md §2): ``rng = random.Random(item_seed(...))``; n! < K:
    the lexicographic list of all permutations (canonical first) cycled to length K; n <= 7:
    ``itertools.permutations(range(n))`` less the canonical one, ``rng.shuffle``d, first K-1
    kept after the canonical; n > 7: ``rng.shuffle`` a fresh ``list(range(n))`` until K-1
    permutations that are neither canonical nor already chosen are found."""
    if n < 1:
        raise ValueError(f"cannot permute {n} units (item {item_id!r})")
    if k < 1:
        raise ValueError(f"K must be >= 1, got {k}")
    canonical = tuple(range(n))
    if math.factorial(n) < k:
        unique = list(itertools.permutations(range(n)))  # lexicographic, canonical first
        return [unique[i % len(unique)] for i in range(k)]
    rng = random.Random(item_seed(item_id, n, k, seed))
    if n <= _EXHAUSTIVE_MAX_N:
        pool = list(itertools.permutations(range(n)))
        pool.remove(canonical)  # lexicographically first
        rng.shuffle(pool)
        return [canonical] + pool[: k - 1]
    chosen = [canonical]
    seen = {canonical}
    while len(chosen) < k:
        perm = list(range(n))
        rng.shuffle(perm)
        candidate = tuple(perm)
        if candidate not in seen:
            seen.add(candidate)
            chosen.append(candidate)
    return chosen


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
    grammar_version: int | None = GRAMMAR_VERSION  # None: read from a file without the field

    @classmethod
    def build(
        cls,
        facet: str,
        dataset: str,
        units: dict[str, int],
        k: int = DEFAULT_K,
        seed: int = GLOBAL_SEED,
    ) -> "Manifest":
        """``units`` maps item_id -> number of permutable units."""
        entries = {iid: orderings(iid, n, k, seed) for iid, n in sorted(units.items())}
        return cls(facet, dataset, k, seed, entries)

    def to_json(self) -> str:
        body = {
            "facet": self.facet,
            "dataset": self.dataset,
            "k": self.k,
            "seed": self.seed,
            "grammar_version": self.grammar_version,
            "entries": {iid: [list(p) for p in perms] for iid, perms in self.entries.items()},
        }
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        body = json.loads(text)
        entries = {iid: [tuple(p) for p in perms] for iid, perms in body["entries"].items()}
        return cls(
            body["facet"],
            body["dataset"],
            body["k"],
            body["seed"],
            entries,
            body.get("grammar_version"),
        )

    @classmethod
    def stored(cls, path: Path) -> "Manifest | None":
        """The manifest in file ``path``, None when there is none; a file that is not one (edited,
        truncated) is one error line naming it."""
        if not path.exists():
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            manifest = cls.from_json(text)
            if not all(
                isinstance(p, tuple) and all(isinstance(u, int) for u in p)
                for perms in manifest.entries.values()
                for p in perms
            ):
                raise ValueError("an ordering is not a list of unit indices")
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            detail = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:80]
            raise _bad(path, f"not a manifest ({detail})") from None
        return manifest

    def path_in(self, directory: Path) -> Path:
        return Path(directory) / f"{self.facet}__{self.dataset}__k{self.k}__s{self.seed}.json"

    def save(self, directory: Path) -> Path:
        """Write (or verify) the manifest; an existing file with other content is an error,
        because manifests are replayed unchanged for every model. An existing file of another
        grammar version is regenerated (overwritten), see the module docstring."""
        path = self.path_in(directory)
        with storage.guarded(storage.MANIFEST, path):
            path.parent.mkdir(parents=True, exist_ok=True)
            with storage.lock(f"{path}.lock"):
                return self._save_locked(path)

    def _save_locked(self, path: Path) -> Path:
        if self.grammar_version != GRAMMAR_VERSION:
            raise ValueError(
                f"{path}: refusing to write a manifest of grammar version {self.grammar_version} "
                f"(this flipgate draws grammar version {GRAMMAR_VERSION})"
            )
        text = self.to_json()
        old = Manifest.stored(path)
        if old is not None and old.grammar_version != GRAMMAR_VERSION:
            log.warning(
                "%s: manifest of grammar version %s, regenerated under grammar version %s "
                "(docs/definitions.md §2)",
                path,
                old.grammar_version if old.grammar_version is not None else "1 (unversioned)",
                self.grammar_version,
            )
        elif old is not None:
            if old.entries.items() >= self.entries.items():
                return path
            merged = dict(old.entries)
            for iid, perms in self.entries.items():
                if iid in merged and merged[iid] != perms:
                    raise _bad(path, _difference(iid, merged[iid], perms))
                merged[iid] = perms
            text = Manifest(
                self.facet, self.dataset, self.k, self.seed, merged, self.grammar_version
            ).to_json()
        atomic_write(path, text)
        return path


def _bad(path: Path, problem: str) -> FlipgateError:
    """A manifest file that cannot be replayed, as one line naming it and the remedy."""
    return FlipgateError(f"{storage.MANIFEST.what} {path}: {problem}; {storage.MANIFEST.corrupt}")


def _difference(item_id: str, stored: list, drawn: list) -> str:
    """Where a stored item's orderings first differ from the grammar's draw."""
    o = next((i for i, (a, b) in enumerate(zip(stored, drawn)) if a != b), None)
    where = (
        f"ordering {o} is {list(stored[o])}, the grammar draws {list(drawn[o])}"
        if o is not None
        else f"{len(stored)} orderings stored, the grammar draws {len(drawn)}"
    )
    return f"its orderings of item {item_id[:60]!r} differ from the grammar's ({where})"[:300]
