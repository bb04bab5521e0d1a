import hashlib
import math
import subprocess
import sys

import pytest

from flipgate.grammar import Manifest, inverse, item_seed, orderings


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
    code = "from flipgate.grammar import Manifest; print(Manifest.build('option_order','d',{'a':4,'b':5,'c':10}).sha256)"
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": str(seed), "PATH": ""}).stdout.strip() for seed in (1, 2)}
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
    with pytest.raises(ValueError, match="differ"):
        bad.save(tmp_path)
