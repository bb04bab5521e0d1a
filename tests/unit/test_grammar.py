import hashlib
import itertools
import json
import logging
import math
import random
import subprocess
import sys

import pytest
from support.paths import REPO

from flipgate import FlipgateError
from flipgate.backends.base import Request
from flipgate.cache import cache_key
from flipgate.grammar import GRAMMAR_VERSION, Manifest, inverse, item_seed, orderings
from flipgate.order.measure import order_cells


def test_seed_is_the_spec_sha256_formula():
    expected = int.from_bytes(hashlib.sha256("42\x1fq1\x1f4\x1f6".encode()).digest()[:4], "big")
    assert item_seed("q1", 4, 6) == expected


@pytest.mark.parametrize("n", [3, 4, 5, 10])
def test_k_orderings_canonical_first_distinct(n):
    perms = orderings(f"item-{n}", n, 6)
    assert len(perms) == 6
    assert perms[0] == tuple(range(n))
    assert len(set(perms)) == 6  # without replacement
    assert all(sorted(p) == list(range(n)) for p in perms)
    assert tuple(range(n)) not in perms[1:]


def test_cycles_all_permutations_when_n_factorial_below_k():
    assert orderings("x", 2, 6) == [(0, 1), (1, 0)] * 3
    one = orderings("y", 1, 6)
    assert one == [(0,)] * 6


def test_n3_uses_every_permutation_once_for_k6():
    perms = orderings("z", 3, 6)
    assert len(set(perms)) == math.factorial(3) == 6


def test_stable_across_processes():
    code = (
        "from flipgate.grammar import Manifest; "
        "print(Manifest.build('option_order','d',{'a':4,'b':5,'c':10}).sha256)"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": str(seed), "PATH": ""},
        ).stdout.strip()
        for seed in (1, 2)
    }
    assert runs == {Manifest.build("option_order", "d", {"a": 4, "b": 5, "c": 10}).sha256}


def test_inverse_maps_back():
    perm = (2, 0, 3, 1)  # slot -> source
    inv = inverse(perm)
    assert all(perm[inv[src]] == src for src in range(4))


def test_manifest_roundtrip_and_replay(tmp_path):
    m = Manifest.build("option_order", "d", {"a": 4, "b": 5})
    path = m.save(tmp_path)
    again = Manifest.from_json(path.read_text())
    assert again.entries == m.entries and again.sha256 == m.sha256
    Manifest.build("option_order", "d", {"a": 4}).save(tmp_path)  # subset: file unchanged
    assert Manifest.from_json(path.read_text()).sha256 == m.sha256


def test_manifest_refuses_conflicting_orderings(tmp_path):
    m = Manifest.build("option_order", "d", {"a": 4})
    m.save(tmp_path)
    bad = Manifest("option_order", "d", 6, 42, {"a": [(3, 2, 1, 0)] * 6})
    with pytest.raises(FlipgateError, match="differ.*delete it to regenerate it"):
        bad.save(tmp_path)


# -- docs/definitions.md §2: Facet-Probe's public draw, pinned item by item ------------------------
# The literal lists below were computed once by hand in a plain Python shell from the procedure
# in docs/definitions.md §2, without flipgate:
# seed = int.from_bytes(sha256("42␟<item>␟<n>␟<K>").digest()[:4], "big");
# rng = random.Random(seed); n <= 7: pool = list(itertools.permutations(range(n)))[1:],
# rng.shuffle(pool), [canonical] + pool[:K-1]; n! < K: the lexicographic list cycled to K;
# n > 7: rng.shuffle(fresh list(range(n))) until K-1 new distinct (non-canonical) ones.
PINNED = {
    # n=4, K=6, seed 2732833853 (a committed arc_challenge item)
    ("arc_challenge/MCAS_2003_8_25", 4): [
        (0, 1, 2, 3),
        (0, 1, 3, 2),
        (1, 3, 2, 0),
        (1, 2, 0, 3),
        (1, 0, 3, 2),
        (3, 0, 1, 2),
    ],
    # n=2, K=6: 2! < 6, the two permutations cycled (no draw)
    ("synthetic_rag/pin-two", 2): [(0, 1), (1, 0)] * 3,
    # n=9, K=6, seed 3665398914: the n > 7 branch (5 shuffles, none repeated)
    ("pin/nine-units", 9): [
        (0, 1, 2, 3, 4, 5, 6, 7, 8),
        (0, 2, 6, 8, 7, 5, 1, 4, 3),
        (4, 6, 2, 5, 0, 7, 3, 1, 8),
        (3, 2, 6, 1, 4, 0, 8, 7, 5),
        (6, 4, 3, 2, 0, 8, 7, 1, 5),
        (1, 7, 0, 4, 2, 6, 5, 3, 8),
    ],
}


@pytest.mark.parametrize("item_id,n", list(PINNED))
def test_orderings_pinned_to_facet_probe_draw(item_id, n):
    assert orderings(item_id, n, 6) == PINNED[(item_id, n)]


def _spec_draw(item_id, n, k, seed=42):
    """The docs/definitions.md §2 procedure, step by step, independent of flipgate.grammar."""
    text = str(seed) + "\x1f" + item_id + "\x1f" + str(n) + "\x1f" + str(k)
    rng = random.Random(int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big"))
    lexicographic = list(itertools.permutations(range(n)))
    if math.factorial(n) < k:
        return [lexicographic[i % len(lexicographic)] for i in range(k)]
    if n <= 7:
        pool = lexicographic[1:]
        rng.shuffle(pool)
        return [lexicographic[0]] + pool[: k - 1]
    out = [tuple(range(n))]
    while len(out) < k:
        perm = list(range(n))
        rng.shuffle(perm)
        if tuple(perm) not in out:
            out.append(tuple(perm))
    return out


@pytest.mark.parametrize(
    "n,k",
    [
        (1, 6),
        (2, 6),
        (3, 6),
        (3, 7),
        (4, 6),
        (5, 6),
        (7, 6),
        (8, 6),
        pytest.param(10, 6, marks=pytest.mark.slow),
        (4, 24),
        (4, 2),
    ],
)
def test_orderings_follow_the_spec_procedure(n, k):
    for item_id in ("mmlu/anatomy/22", "synthetic_multihop/106", "x"):
        assert orderings(item_id, n, k) == _spec_draw(item_id, n, k)


def test_committed_manifests_are_current_grammar():

    files = sorted((REPO / "fixtures" / "manifests").glob("*.json"))
    assert files
    for path in files:
        m = Manifest.from_json(path.read_text())
        assert m.grammar_version == GRAMMAR_VERSION, path
        rebuilt = Manifest.build(
            m.facet, m.dataset, {i: len(p[0]) for i, p in m.entries.items()}, m.k, m.seed
        )
        assert rebuilt.to_json() == path.read_text(), path


# -- grammar version ----------------------------------------------------------------------------
def test_grammar_version_in_manifest_json_and_sha256():
    m = Manifest.build("option_order", "d", {"a": 4, "b": 5})
    assert json.loads(m.to_json())["grammar_version"] == GRAMMAR_VERSION
    other = Manifest(m.facet, m.dataset, m.k, m.seed, m.entries, GRAMMAR_VERSION + 1)
    assert other.entries == m.entries and other.sha256 != m.sha256
    assert Manifest.from_json(m.to_json()).grammar_version == GRAMMAR_VERSION


@pytest.mark.parametrize("old_version", [None, 1])
def test_old_grammar_manifest_on_disk_is_regenerated(tmp_path, caplog, old_version):
    new = Manifest.build("option_order", "d", {"a": 4, "b": 5})
    path = new.path_in(tmp_path)
    body = {
        "facet": "option_order",
        "dataset": "d",
        "k": 6,
        "seed": 42,
        "entries": {"a": [[0, 1, 2, 3]] + [[3, 2, 1, 0]] * 5, "stale": [[0, 1]] * 6},
    }
    if old_version is not None:
        body["grammar_version"] = old_version
    path.write_text(json.dumps(body))
    with caplog.at_level(logging.WARNING, logger="flipgate"):
        assert new.save(tmp_path) == path
    assert path.read_text() == new.to_json()  # overwritten, not merged: the stale item is gone
    assert str(path) in caplog.text and "regenerated" in caplog.text
    new.save(tmp_path)  # same version now: verified, unchanged
    assert path.read_text() == new.to_json()


def test_cache_key_changes_with_grammar_version():
    settings = {"backend": "hf", "model": "m", "temperature": 0}
    req = Request(messages=(("user", "Q? A) x B) y"),), labels=("A", "B"))
    plain = cache_key(settings, req)
    current = cache_key(settings, req, GRAMMAR_VERSION)
    assert len({plain, current, cache_key(settings, req, GRAMMAR_VERSION + 1)}) == 3
    assert current == cache_key(settings, req, GRAMMAR_VERSION)


def test_facet_trials_cached_before_the_grammar_version_are_cold(tmp_path):
    """A response cache filled under keys without the grammar version (before it existed) is not
    hit by a facet cell: the first run re-asks the model, the next is warm."""
    from support.scripted import ScriptedBackend

    from flipgate.calls import Auditor, Paths
    from flipgate.config import AuditConfig
    from flipgate.items import DatasetSpec

    model = {
        "id": "scripted",
        "backend": "scripted",
        "source": {},
        "readouts": ["regex"],
        "primary_readout": "regex",
    }

    def auditor(run_id, backend):
        cfg = AuditConfig(
            tmp_path / "models.yaml",
            {"scripted": model},
            items_per_dataset=3,
            facets={"option_order": [DatasetSpec("arc_challenge")]},
            bootstrap_n=50,
        )
        a = Auditor(
            cfg,
            run_id,
            Paths(
                tmp_path / run_id / "t.sqlite",
                tmp_path / "cache.sqlite",
                tmp_path / "manifests",
                tmp_path / "models",
            ),
            progress=False,
        )
        a._backends["scripted"] = backend
        return a

    backend = ScriptedBackend()
    old = auditor("r0", backend)
    _, requests = old.plans.cell_requests("arc_challenge", "option_order")
    old.cache.put_many(
        "scripted",
        {
            cache_key(backend.settings, r): out
            for r, out in zip(requests, backend.complete(requests))
        },
    )
    backend.calls = 0
    df = order_cells(auditor("r1", backend)).trials("scripted", "arc_challenge", "option_order")
    assert backend.calls == len(requests) == 18 and not df["from_cache"].any()
    df = order_cells(auditor("r2", backend)).trials("scripted", "arc_challenge", "option_order")
    assert backend.calls == 18 and df["from_cache"].all()
